package replication_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

func strp(s string) *string { return &s }

func kadmClient(c *rcluster) *kadm.Client { return kadm.NewClient(c.client()) }

// kadmOffsets is one partition's offset for kadm requests.
func kadmOffsets(topic string, partition int32, offset int64) kadm.Offsets {
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: topic, Partition: partition, At: offset})
	return o
}

// produceAll produces n numbered records to topic with acks=all (idempotent) and
// fails the test on any error.
func produceAll(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(from + i)), Value: []byte(fmt.Sprintf("value-%d", from+i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d..%d: %v", from, from+n-1, err)
	}
}

// syncedTopic creates topic with one partition replicated on three brokers, writes n
// records to it and waits until the replicas agree; it returns the partition and its
// leader.
func (c *rcluster) syncedTopic(topic string, n int) (kernel.TopicPartition, int32) {
	c.t.Helper()
	c.createTopic(topic, 1, 3, nil)
	tp := kernel.TopicPartition{Topic: topic}
	produceAll(c.t, c.client(kgo.DefaultProduceTopic(topic)), topic, 0, n)
	c.waitInSync(tp, 30*time.Second)
	return tp, c.leaderOf(tp)
}

// pauseFollowers stops every broker but leader from fetching and returns their ids.
func (c *rcluster) pauseFollowers(leader int32) []int32 {
	var followers []int32
	for _, nd := range c.nodes {
		if nd.id != leader {
			followers = append(followers, nd.id)
			c.repl(nd.id).PauseFetching(true)
		}
	}
	return followers
}

// rawProduce sends one Produce (one record to partition 0 of topic) to broker id and
// returns the partition's error code.
func clusterProduce(t *testing.T, c *rcluster, id int32, topic string, acks int16, timeoutMs int32) int16 {
	t.Helper()
	return clusterProduceTo(t, c, id, kernel.TopicPartition{Topic: topic}, acks, timeoutMs)
}

// clusterProduceTo is clusterProduce to any partition.
func clusterProduceTo(t *testing.T, c *rcluster, id int32, tp kernel.TopicPartition, acks int16, timeoutMs int32) int16 {
	t.Helper()
	topic := tp.Topic
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, c.image(id).Topic(topic).ID // by name or ID: whichever version kgo picks
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.Records = recordbatch.Build(recordbatch.Options{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()},
		recordbatch.Record{Value: []byte("raw")})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// (kgo rewrites a raw Produce's acks to the client's.)
	acksOpt := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}
	if acks == 1 {
		acksOpt = []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}
	}
	resp, err := c.brokerClient(id, acksOpt...).Broker(int(id)).Request(ctx, req)
	if err != nil {
		t.Fatalf("produce to %d: %v", id, err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// rawFetch fetches partition 0 of topic from broker id as a consumer (v12+ with
// lastEpoch as LastFetchedEpoch when >= 0).
func clusterFetch(t *testing.T, c *rcluster, id int32, topic string, offset int64, lastEpoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.SessionEpoch, req.MaxWaitMillis = 1<<20, -1, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, c.image(id).Topic(topic).ID // by name or ID: whichever version kgo picks
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.LastFetchedEpoch = offset, 1<<20, lastEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.brokerClient(id).Broker(int(id)).Request(ctx, req)
	if err != nil {
		t.Fatalf("fetch from %d: %v", id, err)
	}
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// TestClusterAcksAllReplicates: RF=3, min.insync.replicas=2, acks=all: every
// acknowledged record is on every replica, whose logs are byte for byte the leader's
// (offsets, epochs, log start), and consumers read them all.
func TestClusterAcksAllReplicates(t *testing.T) {
	// Two fetchers per source broker: the three partitions are sharded over them.
	c := startCluster(t, 3, "memory", map[string]string{"num.replica.fetchers": "2"})
	c.createTopic("r3", 3, 3, map[string]*string{"min.insync.replicas": strp("2")})
	cl := c.client(kgo.DefaultProduceTopic("r3"))
	const n = 300
	produceAll(t, cl, "r3", 0, n)
	total := int64(0)
	for p := range int32(3) {
		tp := kernel.TopicPartition{Topic: "r3", Partition: p}
		c.waitInSync(tp, 30*time.Second)
		v, _ := c.repl(c.leaderOf(tp)).Replica(tp)
		total += v.Log.LogEndOffset()
	}
	if total != n {
		t.Fatalf("%d records in the logs, want %d", total, n)
	}
	for _, nd := range c.nodes {
		// Each broker follows 2 of the 3 partitions (RF 3), from at most 2 leaders
		// with at most 2 shards each.
		if fetchers, parts := c.repl(nd.id).Fetchers(); parts != 2 || fetchers < 1 || fetchers > 4 {
			t.Errorf("broker %d: %d fetchers for %d partitions", nd.id, fetchers, parts)
		}
	}
	// A consumer reads every record once.
	cons := c.client(kgo.ConsumeTopics("r3"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(seen) < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Key)] {
				t.Errorf("record %s read twice", r.Key)
			}
			seen[string(r.Key)] = true
		})
	}
	if len(seen) != n {
		t.Fatalf("consumed %d records, want %d", len(seen), n)
	}
}

// TestClusterHighWatermark: the HW moves only when followers fetch. With both
// followers stalled, an acks=1 write is on the leader alone: consumers do not see it
// (the HW stays), acks=all waits and times out; once the followers fetch again the HW
// passes everything and consumers see it.
func TestClusterHighWatermark(t *testing.T) {
	// A long lag time: the stalled followers stay in the ISR.
	c := startCluster(t, 3, "memory", map[string]string{"replica.lag.time.max.ms": "60000"})
	tp, leader := c.syncedTopic("hw", 5)
	followers := c.pauseFollowers(leader)
	if code := clusterProduce(t, c, leader, "hw", 1, 5000); code != 0 {
		t.Fatalf("acks=1: %v", kerr.ErrorForCode(code))
	}
	lv, _ := c.repl(leader).Replica(tp)
	if leo := lv.Log.LogEndOffset(); leo != 6 {
		t.Fatalf("leader LEO %d, want 6", leo)
	}
	// Neither the HW nor what consumers see moves while the followers do not fetch.
	for range 3 {
		fp := clusterFetch(t, c, leader, "hw", 0, -1)
		last, _ := lastOffsetOf(fp.RecordBatches)
		if fp.ErrorCode != 0 || fp.HighWatermark != 5 || last != 4 {
			t.Fatalf("consumer fetch: %v HW %d last offset %d; want HW 5, last 4", kerr.ErrorForCode(fp.ErrorCode), fp.HighWatermark, last)
		}
		if fp := clusterFetch(t, c, leader, "hw", 5, -1); len(fp.RecordBatches) != 0 {
			t.Fatal("a consumer read past the HW")
		}
		time.Sleep(100 * time.Millisecond) // give a wrong HW move the chance to show
	}
	if code := clusterProduce(t, c, leader, "hw", -1, 300); code != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all with stalled followers: %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(code))
	}
	// One follower back: the other still holds the HW.
	c.repl(followers[0]).PauseFetching(false)
	c.eventually(10*time.Second, "follower caught up", func() bool {
		v, _ := c.repl(followers[0]).Replica(tp)
		return v.Log.LogEndOffset() == 7
	})
	if v, _ := c.repl(leader).Replica(tp); v.HW != 5 {
		t.Fatalf("HW %d with one ISR follower stalled, want 5", v.HW)
	}
	c.repl(followers[1]).PauseFetching(false)
	c.waitInSync(tp, 30*time.Second)
	fp := clusterFetch(t, c, leader, "hw", 0, -1)
	if last, _ := lastOffsetOf(fp.RecordBatches); fp.HighWatermark != 7 || last != 6 {
		t.Fatalf("after catching up: HW %d last %d, want 7 and 6", fp.HighWatermark, last)
	}
}

// lastOffsetOf returns the last offset of the batches in b.
func lastOffsetOf(b []byte) (int64, bool) { return lastOffset(b) }

// TestClusterISRShrinkExpand: a follower that stops fetching leaves the ISR after
// replica.lag.time.max.ms; acks=all with min.insync.replicas=2 keeps working with two
// in-sync replicas and answers NOT_ENOUGH_REPLICAS with one; followers that fetch
// again rejoin. Needs the metadata module's kernel.PartitionChanger.
func TestClusterISRShrinkExpand(t *testing.T) {
	c := startCluster(t, 3, "memory", map[string]string{"replica.lag.time.max.ms": "1000"})
	if _, ok := c.nodes[0].k.Module("metadata").(kernel.PartitionChanger); !ok {
		t.Skip("the metadata module does not implement kernel.PartitionChanger yet")
	}
	c.createTopic("isr", 1, 3, map[string]*string{"min.insync.replicas": strp("2")})
	tp := kernel.TopicPartition{Topic: "isr"}
	cl := c.client(kgo.DefaultProduceTopic("isr"), kgo.RecordRetries(3))
	produceAll(t, cl, "isr", 0, 10)
	c.waitInSync(tp, 30*time.Second)
	leader := c.leaderOf(tp)
	var followers []int32
	for _, nd := range c.nodes {
		if nd.id != leader {
			followers = append(followers, nd.id)
		}
	}
	isr := func() []int32 {
		pi := c.image(leader).Partition("isr", 0)
		s := slices.Clone(pi.ISR)
		slices.Sort(s)
		return s
	}
	without := func(drop ...int32) []int32 {
		var out []int32
		for _, nd := range c.nodes {
			if !slices.Contains(drop, nd.id) {
				out = append(out, nd.id)
			}
		}
		return out
	}

	c.repl(followers[1]).PauseFetching(true)
	c.eventually(15*time.Second, "ISR shrinks to 2", func() bool { return slices.Equal(isr(), without(followers[1])) })
	produceAll(t, cl, "isr", 10, 10) // two in sync: acks=all works
	if code := clusterProduce(t, c, leader, "isr", -1, 10_000); code != 0 {
		t.Fatalf("acks=all with ISR of 2: %v", kerr.ErrorForCode(code))
	}

	c.repl(followers[0]).PauseFetching(true)
	c.eventually(15*time.Second, "ISR shrinks to the leader", func() bool { return slices.Equal(isr(), []int32{leader}) })
	if code := clusterProduce(t, c, leader, "isr", -1, 10_000); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR of 1: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	if code := clusterProduce(t, c, leader, "isr", 1, 10_000); code != 0 {
		t.Fatalf("acks=1 with ISR of 1: %v", kerr.ErrorForCode(code))
	}

	c.repl(followers[0]).PauseFetching(false)
	c.repl(followers[1]).PauseFetching(false)
	c.eventually(15*time.Second, "ISR expands to 3", func() bool { return slices.Equal(isr(), without()) })
	produceAll(t, cl, "isr", 20, 10)
	c.waitInSync(tp, 30*time.Second)
	// The partition epoch moved with every change (4 changes).
	if pe := c.image(leader).Partition("isr", 0).PartitionEpoch; pe < 4 {
		t.Fatalf("partition epoch %d after 4 ISR changes", pe)
	}
}

// TestClusterDivergentFollowerTruncates: a leader takes acks=1 writes its followers
// never fetch, then stops; a follower becomes leader in a new epoch and takes other
// writes at the same offsets. The new leader answers a fetch carrying the old epoch
// with a diverging epoch, and the old leader, restarted on its data, truncates its
// unreplicated records to the divergence point and ends with the new leader's log,
// byte for byte.
func TestClusterDivergentFollowerTruncates(t *testing.T) {
	c := startCluster(t, 3, "segmentlog", map[string]string{"replica.lag.time.max.ms": "60000"})
	tp, old := c.syncedTopic("div", 10)
	oldEpoch := c.image(old).Partition("div", 0).LeaderEpoch
	c.pauseFollowers(old)
	for range 5 {
		if code := clusterProduce(t, c, old, "div", 1, 5000); code != 0 {
			t.Fatalf("acks=1: %v", kerr.ErrorForCode(code))
		}
	}
	if v, _ := c.repl(old).Replica(tp); v.Log.LogEndOffset() != 15 || v.HW != 10 {
		t.Fatalf("old leader: LEO %d HW %d, want 15 and 10", v.Log.LogEndOffset(), v.HW)
	}
	c.stop(old)
	for _, nd := range c.running() {
		c.repl(nd.id).PauseFetching(false)
	}
	var leader int32
	c.eventually(30*time.Second, "a new leader", func() bool {
		pi := c.image(c.running()[0].id).Partition("div", 0)
		leader = pi.Leader
		return leader >= 0 && leader != old && pi.LeaderEpoch > oldEpoch
	})
	newEpoch := c.image(leader).Partition("div", 0).LeaderEpoch
	produceAll(t, c.client(kgo.DefaultProduceTopic("div")), "div", 100, 3)
	c.eventually(10*time.Second, "new leader's records committed", func() bool {
		v, _ := c.repl(leader).Replica(tp)
		return v.HW == 13
	})
	// A fetch with the old epoch past that epoch's end at the new leader diverges.
	fp := clusterFetch(t, c, leader, "div", 15, oldEpoch)
	if fp.ErrorCode != 0 || fp.DivergingEpoch.Epoch != oldEpoch || fp.DivergingEpoch.EndOffset != 10 || len(fp.RecordBatches) != 0 {
		t.Fatalf("fetch with epoch %d at 15: %v diverging %+v, %d bytes; want epoch %d end 10",
			oldEpoch, kerr.ErrorForCode(fp.ErrorCode), fp.DivergingEpoch, len(fp.RecordBatches), oldEpoch)
	}
	if fp := clusterFetch(t, c, leader, "div", 10, newEpoch); fp.ErrorCode != 0 || fp.DivergingEpoch.Epoch != -1 {
		t.Fatalf("fetch with the new epoch: %v diverging %+v", kerr.ErrorForCode(fp.ErrorCode), fp.DivergingEpoch)
	}

	c.restart(old)
	c.waitBrokers(3)
	c.eventually(30*time.Second, "the old leader follows", func() bool {
		v, ok := c.repl(old).Replica(tp)
		return ok && v.Follower && v.Leader == leader
	})
	want := c.waitInSync(tp, 30*time.Second)
	v, _ := c.repl(old).Replica(tp)
	if v.Log.LogEndOffset() != 13 {
		t.Fatalf("old leader's LEO %d, want 13", v.Log.LogEndOffset())
	}
	if got := logBytes(t, v.Log); string(got) != string(want) {
		t.Fatal("old leader's log differs from the new leader's")
	}
	if !c.nodes[old-1].logs.contains("follower truncated to the divergence point") {
		t.Error("the old leader did not log a truncation")
	}
}

// TestClusterFollowerBelowLogStart: a follower that fell out of the ISR while the
// leader deleted the records it lacks (DeleteRecords past its log end) gets
// OFFSET_OUT_OF_RANGE, restarts its log at the leader's log start (Log.Reset), catches
// up and rejoins the ISR.
func TestClusterFollowerBelowLogStart(t *testing.T) {
	c := startCluster(t, 3, "memory", map[string]string{"replica.lag.time.max.ms": "1000"})
	if _, ok := c.nodes[0].k.Module("metadata").(kernel.PartitionChanger); !ok {
		t.Skip("the metadata module does not implement kernel.PartitionChanger yet")
	}
	c.createTopic("gone", 1, 3, nil)
	tp := kernel.TopicPartition{Topic: "gone"}
	cl := c.client(kgo.DefaultProduceTopic("gone"))
	produceAll(t, cl, "gone", 0, 10)
	c.waitInSync(tp, 30*time.Second)
	leader := c.leaderOf(tp)
	lagging := int32(1)
	if lagging == leader {
		lagging = 2
	}
	c.repl(lagging).PauseFetching(true)
	c.eventually(15*time.Second, "the paused follower leaves the ISR", func() bool {
		return !slices.Contains(c.image(leader).Partition("gone", 0).ISR, lagging)
	})
	produceAll(t, cl, "gone", 10, 10)
	adm := kadmClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs := kadmOffsets("gone", 0, 15)
	res, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.Lookup("gone", 0); !ok || r.Err != nil || r.LowWatermark != 15 {
		t.Fatalf("delete records: %+v", r)
	}
	if v, _ := c.repl(lagging).Replica(tp); v.Log.LogEndOffset() != 10 {
		t.Fatalf("the paused follower has %d records, want 10", v.Log.LogEndOffset())
	}
	c.repl(lagging).PauseFetching(false)
	c.eventually(15*time.Second, "the follower rejoins the ISR", func() bool {
		return slices.Contains(c.image(leader).Partition("gone", 0).ISR, lagging)
	})
	c.waitInSync(tp, 30*time.Second)
	v, _ := c.repl(lagging).Replica(tp)
	if s, e := v.Log.LogStartOffset(), v.Log.LogEndOffset(); s != 15 || e != 20 {
		t.Fatalf("follower log [%d, %d), want [15, 20)", s, e)
	}
	if !c.nodes[lagging-1].logs.contains("follower offset out of range: log reset") {
		t.Error("the follower did not log its reset")
	}
}

// TestClusterFollowerReads: with follower_reads on and brokers in racks r1-r3, a kgo
// consumer with a follower's rack is sent to that follower (preferred read replica)
// and reads every record from it.
func TestClusterFollowerReads(t *testing.T) {
	c := startClusterWith(t, 3, "memory", nil, clusterOpts{racks: []string{"r1", "r2", "r3"}, replication: "follower_reads: true"})
	const n = 50
	_, leader := c.syncedTopic("near", n)
	follower := leader%3 + 1
	before := c.repl(follower).FetchBytes()
	cons := c.client(kgo.ConsumeTopics("near"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Rack(fmt.Sprintf("r%d", follower)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		got += fs.NumRecords()
	}
	if got != n {
		t.Fatalf("consumed %d records, want %d", got, n)
	}
	if served := c.repl(follower).FetchBytes() - before; served == 0 {
		t.Fatalf("follower %d (rack r%d) served no records to the consumer in its rack", follower, follower)
	}
}

// TestClusterIdleLeaderRejoins: a broker that took a partition over and appended
// nothing (its epoch starts at its log end), then lost it to a preferred election,
// follows the new leader and gets its next records. Its first fetch names its empty
// epoch and diverges; the truncation at its log end drops that epoch (Kafka's
// truncateTo), where before it kept it and diverged at every fetch, out of the ISR
// for good (found by sarama's suite).
func TestClusterIdleLeaderRejoins(t *testing.T) {
	c := startCluster(t, 3, "segmentlog", map[string]string{"replica.lag.time.max.ms": "2000"})
	tp, _ := c.syncedTopic("idle", 10)
	first := c.image(1).Partition("idle", 0).Replicas[0] // the preferred leader
	c.eventually(30*time.Second, "the preferred leader", func() bool { return c.leaderOf(tp) == first })
	epoch := c.image(first).Partition("idle", 0).LeaderEpoch
	c.stop(first)
	var second int32
	c.eventually(30*time.Second, "a second leader", func() bool {
		pi := c.image(c.running()[0].id).Partition("idle", 0)
		second = pi.Leader
		return second >= 0 && second != first && pi.LeaderEpoch > epoch
	})
	c.restart(first)
	c.waitBrokers(3)
	// (Not waitInSync: the second leader's empty epoch is in its cache only.)
	c.eventually(30*time.Second, "the first leader back in the ISR", func() bool {
		pi := c.image(second).Partition("idle", 0)
		v, ok := c.repl(first).Replica(tp)
		return ok && v.Log.LogEndOffset() == 10 && slices.Contains(pi.ISR, first)
	})
	adm := kadm.NewClient(c.client())
	c.eventually(30*time.Second, "the first leader back", func() bool {
		_, _ = adm.ElectLeaders(context.Background(), kadm.ElectPreferredReplica, kadm.TopicsSet{"idle": {0: {}}})
		return c.leaderOf(tp) == first
	})
	produceAll(t, c.client(kgo.DefaultProduceTopic("idle")), "idle", 10, 5)
	c.waitInSync(tp, 20*time.Second)
	if v, _ := c.repl(second).Replica(tp); v.Log.LogEndOffset() != 15 {
		t.Fatalf("the idle leader's log ends at %d, want 15", v.Log.LogEndOffset())
	}
}
