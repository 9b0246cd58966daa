package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups"
)

// TestMixedClientsServerAssigned: five classic-protocol clients, each with its own
// assignment protocol (kcat -G and librdkafka: range; kafkajs: RoundRobinAssigner;
// sarama: roundrobin; kgo: cooperative-sticky), share one group whose config
// sluice.consumer.assignor names an assignor plugin. The coordinator assigns them all
// with the plugin (every partition to the member with the smallest id, so its hand is
// recognisable); the group consumes everything. The plugin then crashes inside a
// rebalance: the fallback (uniform) assigns that generation. With the plugin back, the
// next rebalance is the plugin's again and the group goes on consuming.
func TestMixedClientsServerAssigned(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	needLibrdkafka(t)
	node := needKafkajs(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		need(t, "the go command is not on PATH")
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, "assignorplugin")
	run(t, 3*time.Minute, "", goBin, "build", "-o", plugin, "../modules/groups/testdata/assignorplugin")
	modeFile := filepath.Join(dir, "mode")
	setMode := func(mode string) {
		t.Helper()
		if err := os.WriteFile(modeFile, []byte(mode), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setMode("good")
	b := startBrokerConfig(t, fmt.Sprintf(`configs: {group.initial.rebalance.delay.ms: "0", offsets.topic.num.partitions: "4", group.min.session.timeout.ms: "1000"}
modules:
  groups:
    assignors:
      - uniform
      - {name: smallest, plugin: %s, timeout_ms: 5000, env: {SLUICE_TEST_ASSIGNOR_MODE_FILE: %s}}
`, plugin, modeFile))
	const (
		topic      = "mixed-assign"
		group      = "mixed-assign-g"
		partitions = 6
	)
	createTopic(t, b.addr, topic, partitions)
	cl := newClient(t, b.addr)
	adm := kadm.NewClient(cl)
	setGroupConfig(t, cl, group, "sluice.consumer.assignor", "smallest")
	produceSeq(t, b.addr, topic, partitions, "first", 300)

	classics := startClassicClients(t, kcat, node, b.addr, topic, group, "mixed")
	kgoOpts := []kgo.Opt{
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID("mixed-kgo"),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(300 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
		kgo.AutoCommitInterval(100 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond),
	}
	kgoMember := startKgoMember(t, b.addr, kgoOpts...)

	// One member (the smallest id) holds every partition: the plugin assigned.
	pluginHand := func(members int) func(kadm.DescribedGroup) string {
		return func(d kadm.DescribedGroup) string {
			if d.Protocol != "smallest" {
				return "protocol " + d.Protocol
			}
			ids := []string{}
			for _, m := range d.Members {
				ids = append(ids, m.MemberID)
			}
			smallest := slices.Min(ids)
			for _, m := range d.Members {
				n := len(memberPartitions(m, topic))
				if m.MemberID == smallest && n != partitions || m.MemberID != smallest && n != 0 {
					return fmt.Sprintf("member %s (%s) has %d partitions", m.MemberID, m.ClientID, n)
				}
			}
			return ""
		}
	}
	waitGroupShape(t, adm, group, 5, 60*time.Second, "the plugin's assignment of five clients", pluginHand(5))
	waitCommittedAtEnd(t, adm, group, topic, 30*time.Second)

	// The plugin crashes in the next rebalance (kgo leaves): the fallback assigns.
	before := pluginStatsOf(t, b.adminAddr)["smallest"]
	setMode("crash-on-call")
	kgoMember.Close()
	waitGroupShape(t, adm, group, 4, 60*time.Second, "the fallback's assignment of four clients", func(d kadm.DescribedGroup) string {
		holders := 0
		for _, m := range d.Members {
			if len(memberPartitions(m, topic)) > 0 {
				holders++
			}
		}
		if holders < 2 {
			return fmt.Sprintf("%d members hold partitions", holders)
		}
		return ""
	})
	if st := pluginStatsOf(t, b.adminAddr)["smallest"]; st.Fallbacks <= before.Fallbacks {
		t.Errorf("plugin stats %+v: no fallback counted (before: %d)", st, before.Fallbacks)
	}

	// The plugin is relaunched; the next rebalance (kgo back) is the plugin's again.
	setMode("good")
	if !pollUntil(30*time.Second, func() bool { return pluginStatsOf(t, b.adminAddr)["smallest"].State == groups.PluginRunning }) {
		t.Fatalf("the plugin is not running again: %+v", pluginStatsOf(t, b.adminAddr)["smallest"])
	}
	startKgoMember(t, b.addr, kgoOpts...)
	waitGroupShape(t, adm, group, 5, 60*time.Second, "the plugin's assignment again", pluginHand(5))
	produceSeq(t, b.addr, topic, partitions, "second", 60)
	waitCommittedAtEnd(t, adm, group, topic, 30*time.Second)

	classics.stop(t)
}

// classicClients are four classic-protocol members of one group, each with its own
// assignment protocol: kcat -G and librdkafka (range), kafkajs (RoundRobinAssigner)
// and sarama (roundrobin). Their client ids start with a prefix.
type classicClients struct {
	kcat, py, js *lineProc
	sarama       *saramaMember
}

func startClassicClients(t *testing.T, kcat, node, addr, topic, group, prefix string) *classicClients {
	t.Helper()
	return &classicClients{
		kcat: startLineProc(t, nil, kcat, "-b", addr, "-G", group, "-q", "-X", "auto.offset.reset=earliest",
			"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=300", "-X", "auto.commit.interval.ms=100",
			"-X", "client.id="+prefix+"-kcat", "-f", "%p %o\n", topic),
		py:     startLineProc(t, pythonEnv(), systemPython, "group_member.py", addr, topic, group, prefix+"-librdkafka"),
		js:     startNode(t, node, "group_member.js", addr, topic, group, prefix+"-kafkajs"),
		sarama: startSaramaMember(t, addr, topic, group, prefix+"-sarama"),
	}
}

// stop has the clients leave (librdkafka and kafkajs cleanly, with their exit
// checked) and kills kcat.
func (c *classicClients) stop(t *testing.T) {
	t.Helper()
	c.py.send("stop")
	c.js.send("stop")
	c.py.wait(30 * time.Second)
	c.js.wait(30 * time.Second)
	c.sarama.stop(t)
	c.kcat.kill()
}

// waitGroupShape waits until group is Stable with n members and check passes.
func waitGroupShape(t *testing.T, adm *kadm.Client, group string, n int, timeout time.Duration, what string, check func(kadm.DescribedGroup) string) {
	t.Helper()
	why := ""
	if !pollUntil(timeout, func() bool {
		d, err := describeGroupErr(adm, group)
		switch {
		case err != nil:
			why = err.Error()
		case d.State != "Stable" || len(d.Members) != n:
			why = fmt.Sprintf("state %s with %d members", d.State, len(d.Members))
		default:
			why = check(d)
		}
		return why == ""
	}) {
		t.Fatalf("group %s: no %s within %s: %s", group, what, timeout, why)
	}
}

// setGroupConfig sets one group config with IncrementalAlterConfigs on a GROUP resource.
func setGroupConfig(t *testing.T, cl *kgo.Client, group, name, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs GROUP %s: %+v", group, resp.Resources)
	}
}

// pluginStatsOf reads GET /v1/plugins from a broker's admin listener.
func pluginStatsOf(t *testing.T, adminAddr string) map[string]groups.PluginStats {
	t.Helper()
	resp, err := http.Get("http://" + adminAddr + "/v1/plugins")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Plugins []groups.PluginStats `json:"plugins"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]groups.PluginStats{}
	for _, p := range body.Plugins {
		out[p.Name] = p
	}
	return out
}

// startKgoMember starts a kgo group member polling in the background; Close leaves.
func startKgoMember(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := newClient(t, addr, opts...)
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	return cl
}

// saramaMember is a sarama consumer group member (roundrobin protocol, auto-commit).
type saramaMember struct {
	cg     sarama.ConsumerGroup
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func startSaramaMember(t *testing.T, addr, topic, group, clientID string) *saramaMember {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = clientID
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &saramaMember{cg: cg, cancel: cancel}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, saramaHandler{}); err != nil && ctx.Err() == nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				time.Sleep(100 * time.Millisecond) // sarama's own retry pace after an error
			}
		}
	}()
	t.Cleanup(func() { s.cancel(); _ = cg.Close(); s.wg.Wait() })
	return s
}

// stop leaves the group and fails the test on an error sarama's Consume returned.
func (s *saramaMember) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	if err := s.cg.Close(); err != nil {
		t.Errorf("sarama close: %v", err)
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil && !strings.Contains(s.err.Error(), "rebalance") {
		t.Errorf("sarama consume: %v", s.err)
	}
}

type saramaHandler struct{}

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		sess.MarkMessage(m, "")
	}
	return nil
}
