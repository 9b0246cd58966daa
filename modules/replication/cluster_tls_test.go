package replication_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// TestClusterTLSBetweenBrokers: three brokers whose inter-broker listener is SSL
// (mutual TLS) and whose raft port is therefore mutual TLS too. Clients use a
// PLAINTEXT listener; followers can only catch up by fetching over TLS, and the
// controller RPC and raft only work over mutual TLS. The raft port refuses a
// plaintext client, a TLS client without a certificate and one whose certificate
// another CA signed.
func TestClusterTLSBetweenBrokers(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster-ca")
	// One certificate for every broker (127.0.0.1, localhost); it serves as client
	// certificate too (extended key usage clientAuth).
	keystore := tlstest.WriteFile(t, dir, "broker.pem", ca.Server(t, "broker").KeyStore())
	truststore := tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)
	c := startClusterWith(t, 3, "memory", map[string]string{
		"listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SSL",
		"inter.broker.listener.name":     "INTERNAL",
		"ssl.keystore.location":          keystore,
		"ssl.truststore.location":        truststore,
		"ssl.client.auth":                "required",
	}, clusterOpts{listeners: `[{name: CLIENT, address: "127.0.0.1:0"}, {name: INTERNAL, address: "127.0.0.1:0"}]`})

	tp, leader := c.syncedTopic("secure", 200)
	if v, _ := c.repl(leader).Replica(tp); len(v.ISR) != 3 {
		t.Fatalf("ISR %v", v.ISR)
	}
	// More acks=all writes after the first catch-up, through a fresh client.
	produceAll(t, c.client(kgo.DefaultProduceTopic("secure"), kgo.RequiredAcks(kgo.AllISRAcks())), "secure", 200, 300)
	c.waitInSync(tp, 30*time.Second)
	if v, _ := c.repl(leader).Replica(tp); v.Log.LogEndOffset() != 500 {
		t.Fatalf("leader's log end %d, want 500", v.Log.LogEndOffset())
	}

	raftAddr := c.nodes[0].raft
	other := tlstest.NewCA(t, "other-ca")
	for _, tc := range []struct {
		name  string
		cfg   *tls.Config // nil: plaintext
		admit bool
	}{
		{"plaintext", nil, false},
		{"TLS without a client certificate", &tls.Config{RootCAs: ca.Pool()}, false},
		{"client certificate of another CA", &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{other.Server(t, "intruder").TLS(t)}}, false},
		{"client certificate of the cluster CA", &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{ca.Client(t, pkix.Name{CommonName: "tool"}).TLS(t)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := probeRaftPort(t, raftAddr, tc.cfg)
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			if tc.admit && !timedOut {
				t.Fatalf("a broker's certificate was refused: %v", err)
			}
			if !tc.admit && (err == nil || timedOut) {
				// A refusal is a prompt close or alert, never a hang.
				t.Fatalf("not refused: %v", err)
			}
		})
	}
	c.eventually(10*time.Second, "a refusal in broker 1's log", func() bool {
		return c.nodes[0].logs.contains("refused raft port connection")
	})
	// The cluster still works after the probes.
	produceAll(t, c.client(kgo.DefaultProduceTopic("secure")), "secure", 500, 10)
	c.waitInSync(tp, 30*time.Second)
}

// probeRaftPort connects to addr (TLS with cfg, plaintext without), sends the
// controller RPC preamble and waits a moment for an answer: an error that is a
// timeout means the connection was admitted and is waiting for a request; any other
// error means it was refused.
func probeRaftPort(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	conn := nc
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.ServerName = "127.0.0.1"
		tc := tls.Client(nc, cfg)
		if err := tc.Handshake(); err != nil {
			return err
		}
		conn = tc
	}
	// The controller RPC preamble (rpc.Magic) and the size of a request frame, but
	// not the frame: an admitted connection waits for it.
	if _, err := conn.Write([]byte{'S', 'L', 'C', 1, 0, 0, 0, 12}); err != nil {
		return err
	}
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	if err == nil {
		return errors.New("unexpected answer")
	}
	return err
}

// TestClusterSASLSSLBetweenBrokers: the inter-broker listener is SASL_SSL; followers
// log in with SCRAM-SHA-512 as the bootstrap user "broker" (a super user) from
// listener.name.internal.scram-sha-512.sasl.jaas.config. It needs the kernel's SASL
// server side and skips while the kernel does not serve SaslHandshake.
func TestClusterSASLSSLBetweenBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-broker cluster test")
	}
	// The kernel claims the SASL keys when the auth module is an Authenticator.
	probe := testbroker.Start(t, testbroker.WithConfig(`
configs: {super.users: "User:ANONYMOUS"}
modules:
  auth: {use: acl, users: [{name: u, password: p}]}
`))
	cl := probe.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	r, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	served := false
	for _, k := range r.ApiKeys {
		served = served || k.ApiKey == kmsg.SASLHandshake.Int16()
	}
	if !served {
		t.Skip("the kernel does not serve SaslHandshake yet")
	}
	probe.Stop()

	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster-ca")
	keystore := tlstest.WriteFile(t, dir, "broker.pem", ca.Server(t, "broker").KeyStore())
	truststore := tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)
	c := startClusterWith(t, 3, "memory", map[string]string{
		"listener.security.protocol.map":                        "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL",
		"inter.broker.listener.name":                            "INTERNAL",
		"sasl.enabled.mechanisms":                               "SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                  "SCRAM-SHA-512",
		"listener.name.internal.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"ssl.keystore.location":                                 keystore,
		"ssl.truststore.location":                               truststore,
		// ANONYMOUS: the test's clients on the PLAINTEXT listener.
		"super.users": "User:broker;User:ANONYMOUS",
	}, clusterOpts{
		listeners: `[{name: CLIENT, address: "127.0.0.1:0"}, {name: INTERNAL, address: "127.0.0.1:0"}]`,
		modules:   "  auth: {use: acl, users: [{name: broker, password: broker-secret}]}\n",
	})
	tp, leader := c.syncedTopic("sasl-secure", 200)
	if v, _ := c.repl(leader).Replica(tp); len(v.ISR) != 3 || v.Log.LogEndOffset() != 200 {
		t.Fatalf("ISR %v, log end %d", v.ISR, v.Log.LogEndOffset())
	}
}
