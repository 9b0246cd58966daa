package interop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Multi-process cluster tests: three (or four) broker processes on 127.0.0.1 forming a
// raft metadata quorum, driven with franz-go. Helpers are in cluster_helpers_test.go.

var allThree = []int32{1, 2, 3}

// waitAllSeeAll waits until every running broker lists exactly the brokers want.
func (c *cluster) waitAllSeeAll(timeout time.Duration, want []int32) {
	c.t.Helper()
	for _, n := range c.running() {
		n.waitView(timeout, fmt.Sprintf("Metadata lists brokers %v", want), func(v *view) bool {
			return slices.Equal(v.brokers, want)
		})
	}
}

// agreedController waits until every running broker names the same controller and
// returns it.
func (c *cluster) agreedController(timeout time.Duration) int32 {
	c.t.Helper()
	run := c.running()
	ctrl := run[0].waitController(timeout, func(int32) bool { return true })
	for _, n := range run[1:] {
		n.waitController(timeout, func(id int32) bool { return id == ctrl })
	}
	// The first answer may have been stale; check the first broker again.
	return run[0].waitController(timeout, func(id int32) bool { return id == ctrl })
}

// allLed reports whether topic has n partitions in v, each with a leader.
func allLed(v *view, topic string, n int) bool {
	ps := v.leaders[topic]
	if len(ps) != n {
		return false
	}
	for _, l := range ps {
		if l < 0 {
			return false
		}
	}
	return true
}

// leadsAgain reports whether v lists all three brokers again and broker id leads each of
// parts of topic: a broker that was fenced is back and has its partitions.
func leadsAgain(v *view, id int32, topic string, parts []int32) bool {
	if !slices.Equal(v.brokers, allThree) {
		return false
	}
	for _, p := range parts {
		if v.leaders[topic][p] != id {
			return false
		}
	}
	return true
}

// TestClusterLeadersSpread: three brokers; a 12-partition RF=1 topic has four leaders on
// each, every broker tells clients the same leaders, and producing and consuming through
// each broker as the only bootstrap server reaches every partition.
func TestClusterLeadersSpread(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, 3, nil)
	c.startAll()
	c.waitAllSeeAll(20*time.Second, allThree)

	const topic = "spread"
	c.node(1).mustCreateTopic(30*time.Second, topic, 12, 1, nil)
	var first *view
	for _, n := range c.nodes {
		v := n.waitView(20*time.Second, "12 partitions, each with a leader", func(v *view) bool {
			return allLed(v, topic, 12)
		}, topic)
		counts := v.leaderCounts(topic)
		if counts[1] != 4 || counts[2] != 4 || counts[3] != 4 {
			t.Errorf("broker %d: leaders per broker %v, want 4 each on 1, 2, 3 (leaders %v)", n.id, counts, v.leaders[topic])
		}
		if first == nil {
			first = v
		} else if !maps.Equal(first.leaders[topic], v.leaders[topic]) || first.ids[topic] != v.ids[topic] {
			t.Errorf("broker %d tells clients %v (id %x), broker 1 %v (id %x)", n.id, v.leaders[topic], v.ids[topic],
				first.leaders[topic], first.ids[topic])
		}
	}
	checkMisroutedFetch(t, c, topic, first)
	for _, n := range c.nodes {
		n.produceEach(topic, 12, fmt.Sprintf("via%d", n.id))
	}
	for _, n := range c.nodes {
		checkProducedEach(t, n.addr, topic, partitionsOf(12), fmt.Sprintf("consumed through broker %d", n.id), "via1", "via2", "via3")
	}
}

// checkMisroutedFetch sends a Fetch for each partition of topic to a broker that does
// not lead it: the answer is NOT_LEADER_OR_FOLLOWER and, from Fetch v16 (KIP-951), names
// the current leader and its endpoint so the client re-routes at once.
func checkMisroutedFetch(t *testing.T, c *cluster, topic string, v *view) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for p, leader := range v.leaders[topic] {
		other := c.node(leader%3 + 1) // a broker that is not the leader
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, v.ids[topic]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := other.request(ctx, req)
		if err != nil {
			t.Fatalf("Fetch %s-%d from broker %d: %v", topic, p, other.id, err)
		}
		fr := resp.(*kmsg.FetchResponse)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			t.Fatalf("Fetch %s-%d from broker %d: %d topics in the answer", topic, p, other.id, len(fr.Topics))
		}
		rp2 := fr.Topics[0].Partitions[0]
		if rp2.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Errorf("Fetch %s-%d (leader %d) from broker %d: %v, want NOT_LEADER_OR_FOLLOWER", topic, p, leader, other.id,
				kerr.ErrorForCode(rp2.ErrorCode))
			continue
		}
		if p == 0 {
			t.Logf("misrouted Fetch answered at v%d: %v, current leader %d", fr.Version,
				kerr.ErrorForCode(rp2.ErrorCode), rp2.CurrentLeader.LeaderID)
		}
		if fr.Version < 16 {
			continue
		}
		if rp2.CurrentLeader.LeaderID != leader {
			t.Errorf("Fetch v%d %s-%d from broker %d: current leader %d, want %d", fr.Version, topic, p, other.id,
				rp2.CurrentLeader.LeaderID, leader)
		}
		want := c.node(leader).addr
		found := false
		for _, b := range fr.Brokers {
			if b.NodeID == leader && fmt.Sprintf("%s:%d", b.Host, b.Port) == want {
				found = true
			}
		}
		if !found {
			t.Errorf("Fetch v%d %s-%d from broker %d: node endpoints %+v lack leader %d at %s", fr.Version, topic, p, other.id,
				fr.Brokers, leader, want)
		}
	}
}

// alterErr is the first error of an alter-configs answer.
func alterErr(rs kadm.AlterConfigsResponses) error {
	if len(rs) == 0 {
		return errors.New("no answer for the resource")
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%s: %w (%s)", r.Name, r.Err, r.ErrMessage)
		}
	}
	return nil
}

// TestClusterCreateTopicViaNonController: CreateTopics sent to a broker that is not the
// controller is forwarded: it succeeds at once (no NOT_CONTROLLER), with its configs,
// and every broker sees the same topic id; a second create through the third broker is
// TOPIC_ALREADY_EXISTS.
func TestClusterCreateTopicViaNonController(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, 3, nil)
	c.startAll()
	ctrl := c.agreedController(20 * time.Second)
	var others []*clusterNode
	for _, n := range c.nodes {
		if n.id != ctrl {
			others = append(others, n)
		}
	}
	const topic = "via-follower"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := others[0].createTopic(ctx, topic, 6, 1, map[string]string{"retention.ms": "3600000"}); err != nil {
		t.Fatalf("CreateTopics through broker %d (controller %d): %v", others[0].id, ctrl, err)
	}
	// A successful answer is sent once the receiving broker's image has the topic.
	v, err := others[0].metadata(ctx, topic)
	if err != nil || !allLed(v, topic, 6) {
		t.Fatalf("broker %d right after its CreateTopics answer: %v (err %v)", others[0].id, v, err)
	}
	id := v.ids[topic]
	for _, n := range c.nodes {
		n.waitView(20*time.Second, "the new topic, same id", func(v *view) bool {
			return allLed(v, topic, 6) && v.ids[topic] == id
		}, topic)
	}
	err = others[1].createTopic(ctx, topic, 6, 1, nil)
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("second CreateTopics through broker %d: %v, want TOPIC_ALREADY_EXISTS", others[1].id, err)
	}
	adm := kadm.NewClient(newClient(t, others[1].addr))
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs: %v", err)
	}
	if got := configValue(rcs, topic, "retention.ms"); got != "3600000" {
		t.Errorf("retention.ms of %q = %q, want 3600000", topic, got)
	}
}

// configValue returns a config's value in a DescribeConfigs result ("<missing>" if none).
func configValue(rcs kadm.ResourceConfigs, resource, key string) string {
	for _, rc := range rcs {
		if rc.Name != resource {
			continue
		}
		for _, c := range rc.Configs {
			if c.Key == key && c.Value != nil {
				return *c.Value
			}
		}
	}
	return "<missing>"
}

// TestClusterControllerKill: SIGKILL the active controller; the two others elect a new
// one within seconds, topic creation keeps working through both, the killed broker is
// fenced after its session timeout, and it restarts on its data, catches up, is
// unfenced and can create topics too.
func TestClusterControllerKill(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, 3, nil)
	c.startAll()
	ctrl := c.agreedController(20 * time.Second)
	c.node(1).mustCreateTopic(30*time.Second, "before-kill", 3, 1, nil)

	victim := c.node(ctrl)
	victim.kill()
	killed := time.Now()
	survivors := c.others(victim)
	// "Within seconds": raft's election plus the new controller's first entry.
	newCtrl := survivors[0].waitController(15*time.Second, func(id int32) bool { return id != ctrl })
	t.Logf("controller %d killed; broker %d names controller %d after %s", ctrl, survivors[0].id, newCtrl,
		time.Since(killed).Round(time.Millisecond))
	survivors[1].waitController(10*time.Second, func(id int32) bool { return id == newCtrl })

	survivors[0].mustCreateTopic(20*time.Second, "after-kill-a", 3, 1, nil)
	survivors[1].mustCreateTopic(20*time.Second, "after-kill-b", 3, 1, nil)
	// No controlled shutdown: the killed broker is fenced once its session times out.
	for _, n := range survivors {
		n.waitView(clusterSessionTimeout+15*time.Second, fmt.Sprintf("broker %d fenced", ctrl), func(v *view) bool {
			return !slices.Contains(v.brokers, ctrl) && len(v.brokers) == 2
		})
	}
	t.Logf("broker %d fenced %s after its SIGKILL", ctrl, time.Since(killed).Round(time.Millisecond))

	victim.start()
	victim.waitView(20*time.Second, "caught up after the restart", func(v *view) bool {
		return v.controller == newCtrl && len(v.leaders["before-kill"]) == 3 &&
			len(v.leaders["after-kill-a"]) == 3 && len(v.leaders["after-kill-b"]) == 3
	})
	c.waitAllSeeAll(20*time.Second, allThree)
	victim.mustCreateTopic(20*time.Second, "after-rejoin", 3, 1, nil)
	for _, n := range survivors {
		n.waitView(10*time.Second, "the topic created through the restarted broker", func(v *view) bool {
			return allLed(v, "after-rejoin", 3)
		}, "after-rejoin")
	}
}

// TestClusterBrokerStopFencing: SIGTERM a broker that is not the controller. It is
// fenced: Metadata stops listing it, its RF=1 partitions have no leader
// (LEADER_NOT_AVAILABLE, leader -1) and its RF=3 partitions get leaders among the live
// brokers, while the others keep theirs. Restarted, it is unfenced and leads its RF=1
// partitions again, with the records they held.
func TestClusterBrokerStopFencing(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, 3, nil)
	c.startAll()
	ctrl := c.agreedController(20 * time.Second)
	c.waitAllSeeAll(20*time.Second, allThree) // all unfenced, so placement uses all three
	watcher := c.node(ctrl)
	var victim *clusterNode
	for _, n := range c.nodes {
		if n.id != ctrl {
			victim = n
		}
	}
	watcher.mustCreateTopic(30*time.Second, "rf1", 12, 1, nil)
	watcher.mustCreateTopic(30*time.Second, "rf3", 6, 3, nil)
	before := watcher.waitView(20*time.Second, "both topics led", func(v *view) bool {
		return allLed(v, "rf1", 12) && allLed(v, "rf3", 6)
	}, "rf1", "rf3")
	var victimRF1, victimRF3 []int32
	for p, l := range before.leaders["rf1"] {
		if l == victim.id {
			victimRF1 = append(victimRF1, p)
		}
	}
	for p, l := range before.leaders["rf3"] {
		if l == victim.id {
			victimRF3 = append(victimRF3, p)
		}
	}
	slices.Sort(victimRF1)
	if len(victimRF1) != 4 || len(victimRF3) != 2 {
		t.Fatalf("broker %d leads rf1 %v and rf3 %v, want 4 and 2 (placement not spread): %v", victim.id, victimRF1, victimRF3, before)
	}
	watcher.produceEach("rf1", 12, "before")

	victim.stop()
	stopped := time.Now()
	after := watcher.waitView(clusterSessionTimeout+15*time.Second, fmt.Sprintf("broker %d fenced", victim.id), func(v *view) bool {
		if slices.Contains(v.brokers, victim.id) {
			return false
		}
		for p, l := range before.leaders["rf1"] {
			want := l
			if l == victim.id {
				want = -1
			}
			if v.leaders["rf1"][p] != want {
				return false
			}
		}
		for p, l := range v.leaders["rf3"] {
			if l < 0 || l == victim.id {
				return false
			}
			if before.leaders["rf3"][p] != victim.id && l != before.leaders["rf3"][p] {
				return false // a partition the victim did not lead keeps its leader
			}
		}
		return len(v.leaders["rf3"]) == 6
	}, "rf1", "rf3")
	t.Logf("broker %d fenced %s after SIGTERM: %v", victim.id, time.Since(stopped).Round(time.Millisecond), after)

	// A client asking for an offline partition is told it has no leader.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("rf1")
	req.Topics = append(req.Topics, rt)
	resp, err := watcher.request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.(*kmsg.MetadataResponse).Topics[0].Partitions {
		if slices.Contains(victimRF1, p.Partition) && (p.Leader != -1 || p.ErrorCode != kerr.LeaderNotAvailable.Code) {
			t.Errorf("offline partition rf1-%d: leader %d, error %v; want -1 and LEADER_NOT_AVAILABLE",
				p.Partition, p.Leader, kerr.ErrorForCode(p.ErrorCode))
		}
	}

	victim.start()
	for _, n := range c.nodes {
		n.waitView(20*time.Second, fmt.Sprintf("broker %d back and leading its rf1 partitions", victim.id), func(v *view) bool {
			return leadsAgain(v, victim.id, "rf1", victimRF1) && allLed(v, "rf3", 6)
		}, "rf1", "rf3")
	}
	checkProducedEach(t, watcher.addr, "rf1", victimRF1, "rf1 after the restart (produced before the stop)", "before")
}

// TestClusterFullRestart: stop all three brokers, start them again: every topic comes
// back with its id, partitions and leaders, its configs (set at creation and altered
// later), the cluster-wide broker config, and its records.
func TestClusterFullRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, 3, nil)
	c.startAll()
	c.waitAllSeeAll(20*time.Second, allThree)
	c.node(1).mustCreateTopic(30*time.Second, "keep-a", 6, 1,
		map[string]string{"retention.ms": "7200000", "cleanup.policy": "compact"})
	c.node(2).mustCreateTopic(30*time.Second, "keep-b", 3, 3, nil)
	// Brokers apply the metadata log each at its own pace: wait until the broker the
	// admin client talks to knows both topics.
	c.node(3).waitView(20*time.Second, "both topics", func(v *view) bool {
		return allLed(v, "keep-a", 6) && allLed(v, "keep-b", 3)
	}, "keep-a", "keep-b")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.node(3).addr))
	mmb, lrm := "65536", "86400000"
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &mmb}}, "keep-b")
	if err == nil {
		err = alterErr(ar)
	}
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs keep-b: %v", err)
	}
	br, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: &lrm}})
	if err == nil {
		err = alterErr(br)
	}
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs cluster default log.retention.ms: %v", err)
	}
	c.node(1).produceEach("keep-a", 6, "kept")
	before := c.node(1).waitView(20*time.Second, "both topics led", func(v *view) bool {
		return allLed(v, "keep-a", 6) && allLed(v, "keep-b", 3)
	})

	c.stopAll()
	c.startAll()

	for _, n := range c.nodes {
		n.waitView(30*time.Second, "the topics back", func(v *view) bool {
			return slices.Equal(v.brokers, allThree) && allLed(v, "keep-a", 6) && allLed(v, "keep-b", 3) &&
				v.ids["keep-a"] == before.ids["keep-a"] && v.ids["keep-b"] == before.ids["keep-b"] &&
				maps.Equal(v.leaders["keep-a"], before.leaders["keep-a"]) // RF=1: the only replica leads
		})
	}
	adm = kadm.NewClient(newClient(t, c.node(2).addr))
	rcs, err := adm.DescribeTopicConfigs(ctx, "keep-a", "keep-b")
	if err != nil {
		t.Fatalf("DescribeTopicConfigs after the restart: %v", err)
	}
	for _, want := range []struct{ topic, key, value string }{
		{"keep-a", "retention.ms", "7200000"},
		{"keep-a", "cleanup.policy", "compact"},
		{"keep-b", "max.message.bytes", "65536"},
	} {
		if got := configValue(rcs, want.topic, want.key); got != want.value {
			t.Errorf("after the restart %s %s = %q, want %q", want.topic, want.key, got, want.value)
		}
	}
	// The cluster default as the brokers use it: keep-b has no retention.ms of its own.
	if got := configValue(rcs, "keep-b", "retention.ms"); got != lrm {
		t.Errorf("after the restart keep-b retention.ms (from the cluster default log.retention.ms) = %q, want %s", got, lrm)
	}
	checkProducedEach(t, c.node(3).addr, "keep-a", partitionsOf(6), "keep-a after the restart", "kept")
}

// TestClusterFourthBroker: a broker that is not a raft voter joins a running cluster of
// three; every broker lists it, a new 12-partition topic puts three leaders on each of
// the four, records go through it, and DescribeQuorum shows it as an observer.
func TestClusterFourthBroker(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, 3, nil)
	c.startAll()
	c.waitAllSeeAll(20*time.Second, allThree)
	n4 := c.addNode(4, nil)
	n4.start()
	all := []int32{1, 2, 3, 4}
	c.waitAllSeeAll(20*time.Second, all)

	const topic = "four"
	n4.mustCreateTopic(30*time.Second, topic, 12, 1, nil)
	for _, n := range c.nodes {
		v := n.waitView(20*time.Second, "12 partitions led", func(v *view) bool { return allLed(v, topic, 12) }, topic)
		counts := v.leaderCounts(topic)
		for _, id := range all {
			if counts[id] != 3 {
				t.Errorf("broker %d: leaders per broker %v, want 3 on each of 1-4", n.id, counts)
				break
			}
		}
	}
	n4.produceEach(topic, 12, "via4")
	got := fetchAll(t, c.node(1).addr, topic, partitionsOf(12), 30*time.Second)
	for p := range int32(12) {
		if len(got[p]) != 1 {
			t.Errorf("partition %d: %d records, want 1", p, len(got[p]))
		}
	}

	ok := pollUntil(20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		q, err := c.node(1).describeQuorumRouted(ctx)
		if err != nil {
			t.Logf("DescribeQuorum: %v", err)
			return false
		}
		return slices.Equal(replicaIDs(q.CurrentVoters), allThree) && slices.Equal(replicaIDs(q.Observers), []int32{4})
	})
	if !ok {
		t.Errorf("DescribeQuorum never showed voters 1-3 and observer 4")
	}
}

// describeQuorumRouted sends DescribeQuorum the way kadm-style admin clients do: kgo
// routes it to the controller named in Metadata.
func (n *clusterNode) describeQuorumRouted(ctx context.Context) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	dr, err := describeQuorumRequest().RequestWith(ctx, n.cl)
	if err != nil {
		return nil, err
	}
	return quorumPartition(dr)
}

func replicaIDs(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var ids []int32
	for _, r := range rs {
		ids = append(ids, r.ReplicaID)
	}
	slices.Sort(ids)
	return ids
}

// TestClusterDescribeQuorum: DescribeQuorum names the controller as the leader, the
// three voters with their log end offsets (the leader's at least the high watermark,
// every voter caught up to it once idle) and no observers; asked directly, each broker
// gives the same leader.
func TestClusterDescribeQuorum(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, 3, nil)
	c.startAll()
	ctrl := c.agreedController(20 * time.Second)
	c.node(1).mustCreateTopic(30*time.Second, "quorum", 1, 1, nil)

	var last string
	ok := pollUntil(20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		q, err := c.node(2).describeQuorumRouted(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%+v", *q)
		if q.LeaderID != ctrl || q.LeaderEpoch < 1 || q.HighWatermark < 1 || len(q.Observers) != 0 ||
			!slices.Equal(replicaIDs(q.CurrentVoters), allThree) {
			return false
		}
		for _, v := range q.CurrentVoters {
			// The leader's log end is at least the high watermark, and with no writes
			// every voter's lag drops to zero.
			if v.LogEndOffset < q.HighWatermark {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("DescribeQuorum (controller %d): not leader %d with voters 1-3 caught up; last answer: %s", ctrl, ctrl, last)
	}
	for _, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		q, err := n.describeQuorum(ctx)
		cancel()
		if err != nil {
			// Kafka answers DescribeQuorum on the controller only; a broker may say
			// NOT_LEADER_OR_FOLLOWER instead of forwarding.
			if n.id != ctrl && (errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.NotController)) {
				continue
			}
			t.Errorf("DescribeQuorum asked of broker %d: %v", n.id, err)
			continue
		}
		if q.LeaderID != ctrl {
			t.Errorf("DescribeQuorum asked of broker %d: leader %d, want %d", n.id, q.LeaderID, ctrl)
		}
	}
}

// kgo.Client satisfies kmsg.Requestor (used by describeQuorumRouted).
var _ kmsg.Requestor = (*kgo.Client)(nil)
