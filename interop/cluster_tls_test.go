package interop

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// TestClusterTLSBrokerKill: three broker processes whose inter-broker listener is SSL
// (mutual TLS), so followers fetch over TLS and the raft ports are mutual TLS. An RF 3
// topic takes acks=all writes; its leader is SIGKILLed; the others elect a new leader
// (raft and controller RPC over mutual TLS) and take more writes; the killed broker,
// restarted, catches up over TLS and rejoins the ISR with a log identical to the
// others', and every acknowledged record is there once.
func TestClusterTLSBrokerKill(t *testing.T) {
	t.Parallel()
	const topic = "tls"
	needBroker(t)
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster-ca")
	cfgs := withReplConfigs(map[string]string{
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
		"inter.broker.listener.name":     "INTERNAL",
		"ssl.keystore.location":          tlstest.WriteFile(t, dir, "broker.pem", ca.Server(t, "broker").KeyStore()),
		"ssl.truststore.location":        tlstest.WriteFile(t, dir, "ca.pem", ca.PEM),
		"ssl.client.auth":                "required",
	})
	c := newClusterWith(t, 3, 3, nil, clusterOpt{configs: cfgs, listeners: func(int32) string {
		return fmt.Sprintf(`[{name: PLAINTEXT, address: 127.0.0.1:0}, {name: INTERNAL, address: "127.0.0.1:%d"}]`, freePort(t))
	}})
	c.startAll()
	c.waitAllSeeAll(60*time.Second, allThree)
	c.node(1).mustCreateTopic(30*time.Second, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	ps := c.node(1).waitPartitions(30*time.Second, topic, "ISR whole", fullISR(allThree))
	produceN(t, c.seeds(), topic, 0, "before", 0, 500)

	victim := c.node(ps[0].leader)
	victim.kill()
	other := c.others(victim)[0]
	other.waitPartitions(30*time.Second, topic, "a new leader", func(ps map[int32]partState) bool {
		return ps[0].leader >= 0 && ps[0].leader != victim.id
	})
	produceN(t, c.seeds(), topic, 0, "after", 0, 500)
	victim.restart()
	other.waitPartitions(60*time.Second, topic, "ISR whole again", fullISR(allThree))
	c.waitReplicasIdentical(60*time.Second, topic, 1)

	stored := map[string]int{}
	for _, v := range readValues(t, other.addr, topic, 0) {
		stored[v]++
	}
	for _, tag := range []string{"before", "after"} {
		for i := range int64(500) {
			if n := stored[string(seqValue(tag, 0, i))]; n != 1 {
				t.Fatalf("record %s %d stored %d times", tag, i, n)
			}
		}
	}
}
