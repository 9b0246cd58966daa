package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// TestClusterForwarding: every broker registers (a follower's registration is
// forwarded), and client-facing writes work from a follower, which reads its own write
// at once.
func TestClusterForwarding(t *testing.T) {
	c := newCluster(t, 3)
	c.waitAll(10*time.Second, "three unfenced brokers", func(im *kernel.Image) bool {
		return len(liveBrokers(im)) == 3
	})
	for _, nd := range c.running() {
		b := nd.m.Image().Brokers[nd.id]
		if e, ok := b.Endpoint("PLAINTEXT"); !ok || e.Port != 9090+nd.id {
			t.Errorf("node %d registered endpoints %+v", nd.id, b.Endpoints)
		}
	}
	f := c.follower()
	if rt := createTopicOn(t, f, "from-follower", 6, 3, nil); rt.ErrorCode != 0 {
		t.Fatalf("create on follower %d: %d %v", f.id, rt.ErrorCode, rt.ErrorMessage)
	}
	if f.m.Image().Topic("from-follower") == nil {
		t.Fatal("the follower does not see the topic it created")
	}
	// Apply's verdict travels back: a second create is TOPIC_ALREADY_EXISTS.
	if rt := createTopicOn(t, f, "from-follower", 1, 1, nil); rt.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Errorf("second create: code %d", rt.ErrorCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[int64]bool{}
	for _, nd := range c.running() {
		first, err := nd.m.AllocateProducerIDs(ctx, 10)
		if err != nil {
			t.Fatalf("allocate on %d: %v", nd.id, err)
		}
		if seen[first] {
			t.Errorf("block %d handed out twice", first)
		}
		seen[first] = true
	}
	// TopicCreator from a follower.
	if tp, err := f.m.CreateTopic(ctx, "__consumer_offsets", 3, 3, nil); err != nil || len(tp.Partitions) != 3 {
		t.Fatalf("CreateTopic on follower: %v", err)
	}
	// Configs through a follower.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "from-follower"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("1000")
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp := call[*kmsg.IncrementalAlterConfigsResponse](t, f.fc, nil, req)
	if resp.Resources[0].ErrorCode != 0 || f.m.Image().Topic("from-follower").Configs["retention.ms"] != "1000" {
		t.Errorf("alter configs on follower: code %d, configs %v", resp.Resources[0].ErrorCode, f.m.Image().Topic("from-follower").Configs)
	}
	c.waitAll(10*time.Second, "every broker sees the topic", func(im *kernel.Image) bool { return im.Topic("from-follower") != nil })
}

// TestClusterFencing: a broker that stops heartbeating is fenced and leaves every ISR it
// is not the last member of; its RF=3 partitions get new leaders, its RF=1 partitions
// go offline; when it heartbeats again it is unfenced and its offline partitions come
// back with it as leader.
func TestClusterFencing(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	var x *tnode // a follower, so the controller stays up
	for _, nd := range c.running() {
		if nd != l {
			x = nd
			break
		}
	}
	others := []int32{}
	for _, nd := range c.running() {
		if nd != x {
			others = append(others, nd.id)
		}
	}
	rf3 := map[int32][]int32{0: {x.id, others[0], others[1]}, 1: {x.id, others[1], others[0]}, 2: {others[0], x.id, others[1]}}
	if rt := createTopicOn(t, l, "rf3", -1, -1, rf3); rt.ErrorCode != 0 {
		t.Fatalf("create rf3: %d", rt.ErrorCode)
	}
	if rt := createTopicOn(t, l, "rf1", -1, -1, map[int32][]int32{0: {x.id}, 1: {others[0]}}); rt.ErrorCode != 0 {
		t.Fatalf("create rf1: %d", rt.ErrorCode)
	}
	before := l.m.Image()

	x.m.life.pauseHeartbeats.Store(true)
	c.waitAll(20*time.Second, "the silent broker is fenced and its leaderships moved", func(im *kernel.Image) bool {
		b := im.Brokers[x.id]
		return b != nil && b.Fenced && !leadsAny(im, x.id) && im.Partition("rf1", 0).Leader == -1
	})
	im := l.m.Image()
	for p, want := range map[int32]int32{0: others[0], 1: others[1], 2: others[0]} {
		got := im.Partition("rf3", p)
		if got.Leader != want {
			t.Errorf("rf3-%d leader %d, want %d (first live ISR member)", p, got.Leader, want)
		}
		if old := before.Partition("rf3", p); old.Leader == x.id && got.LeaderEpoch != old.LeaderEpoch+1 {
			t.Errorf("rf3-%d leader epoch %d, was %d", p, got.LeaderEpoch, old.LeaderEpoch)
		}
		// The fenced broker left the ISR; the others stay, in their order.
		want := slices.DeleteFunc(slices.Clone(before.Partition("rf3", p).ISR), func(id int32) bool { return id == x.id })
		if !slices.Equal(got.ISR, want) {
			t.Errorf("rf3-%d ISR %v, want %v", p, got.ISR, want)
		}
	}
	// Its last member keeps an offline partition's ISR.
	if got := im.Partition("rf1", 0); !slices.Equal(got.ISR, []int32{x.id}) {
		t.Errorf("offline rf1-0 ISR %v", got.ISR)
	}
	if got := im.Partition("rf1", 1).Leader; got != others[0] {
		t.Errorf("rf1-1 (not on the fenced broker) leader %d", got)
	}
	// Metadata tells clients the partition has no leader.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("rf1")
	mreq.Topics = append(mreq.Topics, mt)
	mresp := call[*kmsg.MetadataResponse](t, l.fc, nil, mreq)
	if p := mresp.Topics[0].Partitions[0]; p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 ||
		!slices.Equal(p.OfflineReplicas, []int32{x.id}) || !slices.Equal(p.ISR, []int32{x.id}) {
		t.Errorf("metadata of offline rf1-0: %+v", p)
	}
	// The fenced broker is an offline replica, out of the ISR, of every rf3 partition.
	mt.Topic = kmsg.StringPtr("rf3")
	mreq.Topics = []kmsg.MetadataRequestTopic{mt}
	mresp = call[*kmsg.MetadataResponse](t, l.fc, nil, mreq)
	for _, p := range mresp.Topics[0].Partitions {
		want := im.Partition("rf3", p.Partition)
		if p.ErrorCode != 0 || !slices.Equal(p.OfflineReplicas, []int32{x.id}) || !slices.Equal(p.ISR, want.ISR) ||
			slices.Contains(p.ISR, x.id) || !slices.Equal(p.Replicas, want.Replicas) || p.Leader != want.Leader {
			t.Errorf("metadata of rf3-%d: %+v, image %+v", p.Partition, p, want)
		}
	}

	x.m.life.pauseHeartbeats.Store(false)
	c.waitAll(20*time.Second, "the broker is unfenced and leads rf1-0 again", func(im *kernel.Image) bool {
		b := im.Brokers[x.id]
		return b != nil && !b.Fenced && im.Partition("rf1", 0).Leader == x.id
	})
}

// TestClusterFailover: the controller dies; another voter takes over, writes continue
// through the survivors, the dead broker is fenced, and it comes back with a new
// incarnation.
func TestClusterFailover(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	oldInc := old.m.Image().Brokers[old.id]
	if oldInc == nil {
		t.Fatal("leader not registered")
	}
	incBefore := old.m.node.hub.state().Regs[old.id].Incarnation
	if rt := createTopicOn(t, old, "spread", 6, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	c.kill(old.id)
	nl := c.leader()
	if nl == old {
		t.Fatal("the dead node is still leader")
	}
	for _, nd := range c.running() {
		if rt := createTopicOn(t, nd, "after-"+string(rune('a'+nd.id)), 3, 2, nil); rt.ErrorCode != 0 {
			t.Fatalf("create via %d after failover: %d %v", nd.id, rt.ErrorCode, rt.ErrorMessage)
		}
	}
	c.waitAll(20*time.Second, "the dead controller is fenced and leads nothing", func(im *kernel.Image) bool {
		b := im.Brokers[old.id]
		return im.ControllerID == nl.id && b != nil && b.Fenced && !leadsAny(im, old.id)
	})
	// The new controller gave the survivors a whole session: none was fenced.
	for _, nd := range c.running() {
		if b := nl.m.Image().Brokers[nd.id]; b == nil || b.Fenced {
			t.Errorf("surviving broker %d fenced after the failover", nd.id)
		}
	}
	c.restart(old.id)
	c.waitAll(20*time.Second, "the restarted broker is registered again, unfenced", func(im *kernel.Image) bool {
		b := im.Brokers[old.id]
		return b != nil && !b.Fenced
	})
	if inc := c.nodes[old.id].m.node.hub.state().Regs[old.id].Incarnation; inc == incBefore {
		t.Error("the restarted broker kept its incarnation id")
	}
	// Its RF=1 partitions that went offline come back with it.
	c.waitAll(20*time.Second, "every partition of spread has a leader", func(im *kernel.Image) bool {
		return !slices.ContainsFunc(im.Topic("spread").Partitions, func(p kernel.PartitionImage) bool { return p.Leader < 0 })
	})
}

// TestControlledShutdown: a broker that stops gracefully has its leaderships moved
// before Stop returns, and is fenced.
func TestControlledShutdown(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	x := c.follower()
	o := c.third(x, l).id
	asg := map[int32][]int32{0: {x.id, l.id, o}, 1: {x.id, o, l.id}, 2: {l.id, x.id, o}}
	if rt := createTopicOn(t, l, "graceful", -1, -1, asg); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	c.waitAll(10*time.Second, "x sees the topic", func(im *kernel.Image) bool { return im.Topic("graceful") != nil })
	c.stop(x.id)
	// No waiting: the controller moved the leaderships before Stop returned.
	im := l.m.Image()
	if b := im.Brokers[x.id]; b == nil || !b.Fenced || leadsAny(im, x.id) {
		t.Fatalf("after a controlled shutdown: broker %+v, leads something: %v", b, leadsAny(im, x.id))
	}
	if p := im.Partition("graceful", 0); p.Leader != l.id {
		t.Errorf("graceful-0 leader %d, want %d", p.Leader, l.id)
	}
	if p := im.Partition("graceful", 1); p.Leader != o {
		t.Errorf("graceful-1 leader %d, want %d", p.Leader, o)
	}
}

// TestPlacementCluster: leaders spread evenly, racks are honoured, and a non-voter that
// joins later follows the log, registers and is used by new topics.
func TestPlacementCluster(t *testing.T) {
	c := newCluster(t, 3, "a", "b", "a")
	l := c.leader()
	if rt := createTopicOn(t, l, "twelve", 12, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	if got := leaders(l.m.Image().Topic("twelve")); len(got) != 3 || got[1] != 4 || got[2] != 4 || got[3] != 4 {
		t.Errorf("leaders of twelve: %v, want 4 each", got)
	}
	if rt := createTopicOn(t, l, "racked", 8, 2, nil); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	im := l.m.Image()
	for _, p := range im.Topic("racked").Partitions {
		if im.Brokers[p.Replicas[0]].Rack == im.Brokers[p.Replicas[1]].Rack {
			t.Errorf("racked-%d replicas %v share a rack", p.Partition, p.Replicas)
		}
	}

	// A fourth broker, not a voter, joins.
	n4 := c.addNonVoter(4, "b")
	c.waitAll(20*time.Second, "four unfenced brokers", func(im *kernel.Image) bool { return len(liveBrokers(im)) == 4 })
	if n4.m.Image().Topic("twelve") == nil {
		t.Fatal("the non-voter has not applied the log")
	}
	if n4.m.node.isVoter() {
		t.Fatal("node 4 is a voter")
	}
	// Writes from the non-voter are forwarded.
	if rt := createTopicOn(t, n4, "sixteen", 16, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create via the non-voter: %d %v", rt.ErrorCode, rt.ErrorMessage)
	}
	if got := leaders(n4.m.Image().Topic("sixteen")); len(got) != 4 || got[4] != 4 {
		t.Errorf("leaders of sixteen: %v, want 4 each over 4 brokers", got)
	}

	// DescribeQuorum, asked of the non-voter, answers from the controller.
	waitFor(t, 10*time.Second, func() bool {
		p := describeQuorum(t, n4).Topics[0].Partitions[0]
		return len(p.Observers) == 1 && p.Observers[0].LogEndOffset > 0
	})
	resp := describeQuorum(t, n4)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("describe quorum: %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.LeaderID != c.leader().id || p.LeaderEpoch < 1 || p.HighWatermark < int64(l.m.Image().Version) {
		t.Errorf("describe quorum partition: leader %d epoch %d hw %d (image %d)", p.LeaderID, p.LeaderEpoch, p.HighWatermark, l.m.Image().Version)
	}
	var ids []int32
	for _, v := range p.CurrentVoters {
		ids = append(ids, v.ReplicaID)
		if v.LogEndOffset <= 0 {
			t.Errorf("voter %d log end offset %d", v.ReplicaID, v.LogEndOffset)
		}
	}
	if !slices.Equal(ids, []int32{1, 2, 3}) || p.Observers[0].ReplicaID != 4 {
		t.Errorf("voters %v, observers %+v", ids, p.Observers)
	}
	if len(resp.Nodes) != 3 || len(resp.Nodes[0].Listeners) != 1 {
		t.Errorf("nodes %+v", resp.Nodes)
	}
}

func describeQuorum(t *testing.T, nd *tnode) *kmsg.DescribeQuorumResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.DescribeQuorumResponse](t, nd.fc, nil, req)
}

// TestNoControllerReachable: with the quorum gone, a write fails with NOT_CONTROLLER
// within the request's timeout.
func TestNoControllerReachable(t *testing.T) {
	c := newCluster(t, 3)
	f := c.follower()
	for _, nd := range c.running() {
		if nd != f {
			c.kill(nd.id)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := f.m.AllocateProducerIDs(ctx, 1)
	if !errors.Is(err, ErrNotController) {
		t.Fatalf("allocate without a quorum: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestClusterStopAllAtOnce: every broker stopping at once (each asking for a controlled
// shutdown) stops promptly, and the whole cluster restarts with its topics, which get
// leaders again.
func TestClusterStopAllAtOnce(t *testing.T) {
	c := newCluster(t, 3)
	if rt := createTopicOn(t, c.follower(), "kept", 6, 2, nil); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	start := time.Now()
	done := make(chan int32, 3)
	for _, nd := range c.running() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := nd.m.Stop(ctx); err != nil {
				t.Errorf("stop %d: %v", nd.id, err)
			}
			done <- nd.id
		}()
	}
	for range 3 {
		id := <-done
		nd := c.nodes[id]
		if err := nd.m.Cleanup(); err != nil {
			t.Errorf("cleanup %d: %v", id, err)
		}
		nd.m = nil
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("stopping all took %v", d)
	}
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.start(nd); err != nil {
				t.Errorf("restart %d: %v", nd.id, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	c.waitAll(20*time.Second, "kept has a leader on every partition after the restart", func(im *kernel.Image) bool {
		tp := im.Topic("kept")
		return tp != nil && len(liveBrokers(im)) == 3 &&
			!slices.ContainsFunc(tp.Partitions, func(p kernel.PartitionImage) bool { return p.Leader < 0 })
	})
}

// TestDuplicateRegistrationRefused: a second process with a live broker's node id is
// refused (DUPLICATE_BROKER_REGISTRATION) until the first one's session ends.
func TestDuplicateRegistrationRefused(t *testing.T) {
	c := newCluster(t, 3)
	l, f := c.leader(), c.follower()
	rc := rpc.NewClient(ErrNotRunning, nil)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := f.m.life.registrationRequest()
	req.IncarnationID = [16]byte{1, 2, 3}
	resp, err := rc.CallKmsg(ctx, l.addr, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.BrokerRegistrationResponse).ErrorCode; code != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("duplicate registration: code %d", code)
	}
	// The live broker re-registering itself (same incarnation) is fine.
	resp, err = rc.CallKmsg(ctx, l.addr, f.m.life.registrationRequest())
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.BrokerRegistrationResponse).ErrorCode; code != 0 {
		t.Fatalf("re-registration: code %d", code)
	}
	// Once the broker is silent past its session, it is fenced and a new incarnation
	// may take the id.
	f.m.life.pauseHeartbeats.Store(true)
	c.waitAll(20*time.Second, "the silent broker is fenced", func(im *kernel.Image) bool { return im.Brokers[f.id].Fenced })
	resp, err = rc.CallKmsg(ctx, l.addr, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.BrokerRegistrationResponse).ErrorCode; code != 0 {
		t.Fatalf("registration after the session ended: code %d", code)
	}
}

// TestClusterUnregisterBroker: a stopped (fenced) broker's registration is removed
// through any broker; a live one is refused; the removed broker comes back by
// registering again when it restarts.
func TestClusterUnregisterBroker(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	x := c.follower()
	via := c.third(l, x) // a broker that is not the controller: the entry is forwarded
	unregister := func(id int32) int16 {
		t.Helper()
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = id
		return call[*kmsg.UnregisterBrokerResponse](t, via.fc, nil, req).ErrorCode
	}
	if code := unregister(x.id); code != kerr.InvalidRequest.Code {
		t.Fatalf("a live broker: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	if code := unregister(42); code != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("an unknown broker: %v, want BROKER_ID_NOT_REGISTERED", kerr.ErrorForCode(code))
	}
	c.stop(x.id)
	c.waitAll(20*time.Second, "the stopped broker is fenced", func(im *kernel.Image) bool {
		b := im.Brokers[x.id]
		return b != nil && b.Fenced
	})
	if code := unregister(x.id); code != 0 {
		t.Fatalf("a fenced broker: %v", kerr.ErrorForCode(code))
	}
	c.waitAll(20*time.Second, "every broker forgot it", func(im *kernel.Image) bool { return im.Brokers[x.id] == nil })
	c.restart(x.id)
	c.waitAll(20*time.Second, "it registered again", func(im *kernel.Image) bool {
		b := im.Brokers[x.id]
		return b != nil && !b.Fenced
	})
}

// TestClusterAutoCreateLeadersElsewhere: a Metadata request that creates a topic
// whose partitions other brokers lead answers LEADER_NOT_AVAILABLE, as Kafka does
// (those leaders may not have applied the creation yet); asked again, it lists them.
func TestClusterAutoCreateLeadersElsewhere(t *testing.T) {
	c := newClusterWith(t, 3, map[string]string{"num.partitions": "6"})
	c.waitAll(10*time.Second, "three unfenced brokers", func(im *kernel.Image) bool {
		return len(liveBrokers(im)) == 3
	})
	nd := c.follower()
	resp := call[*kmsg.MetadataResponse](t, nd.fc, nil, req2(12, "spread"))
	topic := nd.m.Image().Topic("spread")
	if topic == nil {
		t.Fatal("not created")
	}
	if ledHere(topic, nd.id) {
		t.Fatalf("all six partitions led by %d: %v", nd.id, leaders(topic))
	}
	if got := resp.Topics[0]; got.ErrorCode != kerr.LeaderNotAvailable.Code || len(got.Partitions) != 0 || got.TopicID != topic.ID {
		t.Fatalf("first answer: code %d, %d partitions, id %x", got.ErrorCode, len(got.Partitions), got.TopicID)
	}
	resp = call[*kmsg.MetadataResponse](t, nd.fc, nil, req2(12, "spread"))
	if got := resp.Topics[0]; got.ErrorCode != 0 || len(got.Partitions) != 6 {
		t.Fatalf("second answer: code %d, %d partitions", got.ErrorCode, len(got.Partitions))
	}
}

// TestClusterUpdateFeaturesForwarded: UpdateFeatures sent to brokers that are not
// the controller is decided there, one request at a time: two followers upgrading
// transaction.version to 1 and to 2 at once end at 2 on every broker, the lower one
// refused when it comes second; a refusal carries the controller's reason.
func TestClusterUpdateFeaturesForwarded(t *testing.T) {
	c := newClusterFeatures(t, 3, nil, []kernel.SupportedFeature{{Name: "transaction.version", Min: 0, Max: 2, Default: 0}})
	a := c.follower()
	b := c.third(c.leader(), a)
	update := func(nd *tnode, level int16, typ int8) *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.Version, req.TimeoutMillis = 1, 10000
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", level, typ
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		return call[*kmsg.UpdateFeaturesResponse](t, nd.fc, nil, req)
	}
	if resp := update(a, 3, 1); resp.ErrorCode != kerr.InvalidUpdateVersion.Code || resp.ErrorMessage == nil ||
		!strings.Contains(*resp.ErrorMessage, "only supports versions 0-2") {
		t.Fatalf("past the supported level: %+v", resp)
	}
	for round := range 10 {
		if resp := update(a, 0, 2); resp.ErrorCode != 0 {
			t.Fatalf("round %d: downgrade to 0: %+v", round, resp)
		}
		codes := make(chan [2]int16, 2)
		for _, u := range []struct {
			nd    *tnode
			level int16
		}{{a, 1}, {b, 2}} {
			go func() { codes <- [2]int16{u.level, update(u.nd, u.level, 1).ErrorCode} }()
		}
		for range 2 {
			got := <-codes
			if got[1] != 0 && (got[0] != 1 || got[1] != kerr.InvalidUpdateVersion.Code) {
				t.Fatalf("round %d: upgrade to %d: %v", round, got[0], kerr.ErrorForCode(got[1]))
			}
		}
		c.waitAll(10*time.Second, "transaction.version 2", func(im *kernel.Image) bool { return im.Feature("transaction.version") == 2 })
	}
}

// TestClusterVoterMovesAddress: a voter restarted on another raft address (its
// raft_listen and its own voters entry changed) announces it (UpdateRaftVoter, as
// Kafka's voters do at start): it catches up and registers, the controller's
// configuration names the new address, and the quorum counts it there: with the
// third voter stopped, the leader and the moved voter still commit.
func TestClusterVoterMovesAddress(t *testing.T) {
	c := newCluster(t, 3)
	mover := c.follower()
	other := c.third(c.leader(), mover)
	c.stop(mover.id)
	old := mover.addr
	mover.addr = testcheck.FreeAddr(t)
	for i, v := range c.voters {
		if strings.HasPrefix(v, fmt.Sprintf("%d@", mover.id)) {
			c.voters[i] = fmt.Sprintf("%d@%s", mover.id, mover.addr)
		}
	}
	c.restart(mover.id) // returns once registered, so it caught up
	want := raft.ServerAddress(mover.addr)
	waitFor(t, 20*time.Second, func() bool {
		f := c.leader().m.node.raft.Load().GetConfiguration()
		if f.Error() != nil {
			return false
		}
		me, _ := findServer(f.Configuration(), mover.id)
		return me != nil && me.Suffrage == raft.Voter && me.Address == want
	})
	c.stop(other.id)
	if rt := createTopicOn(t, mover, "after-move", 1, 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create with voter %d moved from %s to %s and voter %d stopped: %v", mover.id, old, mover.addr, other.id, kerr.ErrorForCode(rt.ErrorCode))
	}
}
