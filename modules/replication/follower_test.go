package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// epochBatch is a batch of n records at base written in leader epoch epoch (as a
// leader would have stamped it).
func epochBatch(base int64, n int, epoch int32, value string) []byte {
	b := testBatch(n, value)
	recordbatch.SetBaseOffset(b, base)
	binary.BigEndian.PutUint32(b[recordbatch.OffLeaderEpoch:], uint32(epoch))
	return b
}

// followerImage makes node 1 a follower of node 2 for "t" (leader epoch epoch).
func followerImage(version uint64, epoch int32) *kernel.Image {
	im := image(version, topicSpec{name: "t", id: 1, leader: 2})
	pi := &im.Topic("t").Partitions[0]
	pi.LeaderEpoch, pi.Replicas, pi.ISR = epoch, []int32{2, 1}, []int32{2, 1}
	return im
}

// followerHarness is a harness whose node 1 follows node 2 for "t", with its fetcher
// paused (the tests play the leader's answers by hand).
func followerHarness(t *testing.T, epoch int32) (*harness, *Partition) {
	t.Helper()
	h := newHarness(t, nil)
	h.m.pauseFetching(true)
	h.meta.publish(followerImage(2, epoch))
	p := h.m.partition(kernel.TopicPartition{Topic: "t"})
	if p == nil || p.IsLeader() {
		t.Fatal("no follower partition")
	}
	return h, p
}

// TestFollowerAppendAndHW: a follower appends the leader's batches with their offsets
// and epochs, follows the leader's log start, takes min(leader HW, own LEO) as its HW,
// refuses clients, and drops answers that are stale (another log end, another epoch).
func TestFollowerAppendAndHW(t *testing.T) {
	h, p := followerHarness(t, 3)
	recs := append(epochBatch(0, 3, 2, "a"), epochBatch(3, 2, 3, "b")...)
	n, err := p.appendFetched(2, 3, 0, recs, 4, 0)
	if err != nil || n != len(recs) {
		t.Fatalf("append: %d %v", n, err)
	}
	if leo, hw := p.log.LogEndOffset(), p.HighWatermark(); leo != 5 || hw != 4 {
		t.Fatalf("LEO %d HW %d, want 5 and 4", leo, hw)
	}
	if es := p.log.Epochs(); len(es) != 2 || es[0] != (kernel.EpochEntry{Epoch: 2}) || es[1] != (kernel.EpochEntry{Epoch: 3, StartOffset: 3}) {
		t.Fatalf("epochs %+v", es)
	}
	// The leader's HW above our LEO: ours stops at our LEO.
	if _, err := p.appendFetched(2, 3, 5, nil, 9, 0); err != nil || p.HighWatermark() != 5 {
		t.Fatalf("HW %d (%v), want 5", p.HighWatermark(), err)
	}
	// The leader's log start moved: ours follows.
	if _, err := p.appendFetched(2, 3, 5, nil, 5, 3); err != nil || p.log.LogStartOffset() != 3 {
		t.Fatalf("log start %d (%v), want 3", p.log.LogStartOffset(), err)
	}
	// Stale answers change nothing: fetched at another log end, or for an older epoch.
	if n, _ := p.appendFetched(2, 3, 4, epochBatch(4, 1, 3, "x"), 5, 3); n != 0 {
		t.Fatal("appended an answer fetched at another log end")
	}
	if n, _ := p.appendFetched(2, 2, 5, epochBatch(5, 1, 3, "x"), 5, 3); n != 0 {
		t.Fatal("appended an answer for an old leader epoch")
	}
	// A trailing partial batch is left for the next fetch; a corrupt one is an error.
	full := epochBatch(5, 2, 3, "c")
	if n, err := p.appendFetched(2, 3, 5, append(slices.Clone(full), full[:20]...), 5, 3); err != nil || n != len(full) || p.log.LogEndOffset() != 7 {
		t.Fatalf("partial tail: %d %v LEO %d", n, err, p.log.LogEndOffset())
	}
	bad := epochBatch(7, 1, 3, "d")
	bad[len(bad)-1] ^= 0xff
	if _, err := p.appendFetched(2, 3, 7, bad, 7, 3); err == nil || p.log.LogEndOffset() != 7 {
		t.Fatalf("corrupt batch: %v LEO %d", err, p.log.LogEndOffset())
	}
	// Clients get NOT_LEADER_OR_FOLLOWER on a follower.
	if res := h.produce(9, 1, "t", 0, testBatch(1, "x")); res.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a follower: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	f := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0))
	if c := f.Topics[0].Partitions[0].ErrorCode; c != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch from a follower: %v", kerr.ErrorForCode(c))
	}
}

// TestFollowerTruncation plays Kafka's divergence rules on a follower log holding
// epoch 1 at [0, 4) and epoch 3 at [4, 8).
func TestFollowerTruncation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		div      kmsg.FetchResponseTopicPartitionDivergingEpoch
		hw       int64
		wantLEO  int64
		wantHWle int64
	}{
		{"same epoch ends earlier at the leader", kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: 3, EndOffset: 6}, 8, 6, 6},
		{"leader's end past ours for that epoch", kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: 1, EndOffset: 6}, 8, 4, 4},
		{"epoch we do not hold: back to our older one", kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: 2, EndOffset: 5}, 8, 4, 4},
		{"no epoch: the leader's end", kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: -1, EndOffset: 2}, 8, 2, 2},
		{"no end offset: our HW", kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: -1, EndOffset: -1}, 5, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := followerHarness(t, 4)
			// One record per batch, so every offset is a batch boundary (Truncate
			// removes the whole batch holding its target).
			var recs []byte
			for off := range int64(8) {
				recs = append(recs, epochBatch(off, 1, map[bool]int32{true: 1, false: 3}[off < 4], "a")...)
			}
			if _, err := p.appendFetched(2, 4, 0, recs, tc.hw, 0); err != nil {
				t.Fatal(err)
			}
			to, err := p.truncateDiverging(2, 4, 8, tc.div)
			if err != nil {
				t.Fatal(err)
			}
			if leo := p.log.LogEndOffset(); leo != tc.wantLEO || to < 0 {
				t.Fatalf("truncated to %d: LEO %d, want %d", to, leo, tc.wantLEO)
			}
			if hw := p.HighWatermark(); hw > tc.wantHWle || hw > p.log.LogEndOffset() {
				t.Fatalf("HW %d after truncation to %d", hw, p.log.LogEndOffset())
			}
			// The epochs that started at or past the new log end are gone.
			for _, e := range p.log.Epochs() {
				if e.StartOffset >= p.log.LogEndOffset() {
					t.Fatalf("epoch %+v kept after truncation to %d", e, p.log.LogEndOffset())
				}
			}
		})
	}
}

// TestFollowerOutOfRange: a log end past the leader's is cut back; one below the
// leader's log start restarts the log there.
func TestFollowerOutOfRange(t *testing.T) {
	_, p := followerHarness(t, 4)
	if _, err := p.appendFetched(2, 4, 0, epochBatch(0, 6, 4, "a"), 6, 0); err != nil {
		t.Fatal(err)
	}
	if what, err := p.fixOutOfRange(2, 4, 6, 0, 6); err != nil || what != "" {
		t.Fatalf("in range: %q %v", what, err)
	}
	if what, err := p.fixOutOfRange(2, 4, 6, 0, 3); err != nil || what != "truncated" || p.log.LogEndOffset() > 3 || p.HighWatermark() > p.log.LogEndOffset() {
		t.Fatalf("past the leader's end: %q %v LEO %d HW %d", what, err, p.log.LogEndOffset(), p.HighWatermark())
	}
	leo := p.log.LogEndOffset()
	if what, err := p.fixOutOfRange(2, 4, leo, 100, 120); err != nil || what != "reset" {
		t.Fatalf("below the leader's start: %q %v", what, err)
	}
	if s, e, hw := p.log.LogStartOffset(), p.log.LogEndOffset(), p.HighWatermark(); s != 100 || e != 100 || hw != 100 {
		t.Fatalf("after reset: start %d end %d HW %d", s, e, hw)
	}
	if _, err := p.fixOutOfRange(2, 4, 100, -1, -1); !errors.Is(err, errLeaderRange) {
		t.Fatalf("unknown leader offsets: %v", err)
	}
}

// TestFetchDivergingEpoch sends raw Fetch requests (v12+, encoded and decoded) with a
// LastFetchedEpoch to a leader whose log holds epoch 5 at [0, 3) and epoch 7 from 3:
// the answer carries the diverging epoch exactly when the fetcher's log has records
// the leader's does not, for consumers and followers alike; the follower's fetch
// offset does not count as its LEO then.
func TestFetchDivergingEpoch(t *testing.T) {
	h := newHarness(t, nil)
	im := image(2, topicSpec{name: "t", id: 1})
	pi := &im.Topic("t").Partitions[0]
	pi.Replicas = []int32{1, 2}
	h.meta.publish(im)
	h.produce(9, 1, "t", 0, testBatch(3, "a"))
	im = image(3, topicSpec{name: "t", id: 1})
	pi = &im.Topic("t").Partitions[0]
	pi.LeaderEpoch, pi.Replicas = 7, []int32{1, 2}
	h.meta.publish(im)
	h.produce(9, 1, "t", 0, testBatch(2, "b"))
	p := h.m.partition(kernel.TopicPartition{Topic: "t"})
	if es := p.log.Epochs(); len(es) != 2 || es[1] != (kernel.EpochEntry{Epoch: 7, StartOffset: 3}) {
		t.Fatalf("leader epochs %+v", es)
	}
	for _, tc := range []struct {
		name              string
		replica           int32
		lastEpoch         int32
		offset            int64
		wantEpoch         int32
		wantEnd           int64
		wantCode          int16
		wantRecords       bool
		wantFollowerKnown bool
	}{
		{"consumer in sync", -1, 5, 3, -1, -1, 0, true, false},
		{"consumer past epoch 5's end", -1, 5, 4, 5, 3, 0, false, false},
		{"consumer with an epoch the leader skipped", -1, 6, 5, 5, 3, 0, false, false},
		{"follower in sync", 2, 7, 4, -1, -1, 0, true, true},
		{"follower diverged", 2, 6, 5, 5, 3, 0, false, false},
		{"epoch newer than the leader's", -1, 9, 5, -1, -1, kerr.OffsetOutOfRange.Code, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fetchReq("t", 1, 0, tc.offset)
			r.ReplicaID = tc.replica
			r.ReplicaState.ID = tc.replica
			r.Topics[0].Partitions[0].LastFetchedEpoch = tc.lastEpoch
			for _, v := range []int16{12, 15, 17} {
				p.mu.Lock()
				p.followers[2].leo = -1
				p.mu.Unlock()
				f := h.fetch(context.Background(), v, r)
				fp := f.Topics[0].Partitions[0]
				if fp.ErrorCode != tc.wantCode || fp.DivergingEpoch.Epoch != tc.wantEpoch || fp.DivergingEpoch.EndOffset != tc.wantEnd {
					t.Fatalf("v%d: code %v diverging %+v", v, kerr.ErrorForCode(fp.ErrorCode), fp.DivergingEpoch)
				}
				if (len(fp.RecordBatches) > 0) != tc.wantRecords {
					t.Fatalf("v%d: %d record bytes", v, len(fp.RecordBatches))
				}
				p.mu.Lock()
				known := p.followers[2].leo >= 0
				p.mu.Unlock()
				if known != tc.wantFollowerKnown {
					t.Fatalf("v%d: follower LEO recorded = %v", v, known)
				}
			}
		})
	}
}

// TestReplicaFetchReadsPastHW: a follower reads up to the log end (not the HW) and its
// fetch offset becomes its LEO: the HW moves to it and a waiting acks=all produce
// completes, woken by the fetch; consumers still stop at the HW. A fetch without
// CLUSTER_ACTION is refused.
func TestReplicaFetchReadsPastHW(t *testing.T) {
	h, p := followedHarness(t)
	got := h.waitingProduce(produceReq(-1, "t", 1, 0, testBatch(3, "x")))
	consumer := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0)).Topics[0].Partitions[0]
	if len(consumer.RecordBatches) != 0 || consumer.HighWatermark != 0 {
		t.Fatalf("consumer read past the HW: %d bytes, HW %d", len(consumer.RecordBatches), consumer.HighWatermark)
	}
	r := fetchReq("t", 1, 0, 0)
	r.ReplicaState.ID = 2
	follower := h.fetch(context.Background(), 15, r).Topics[0].Partitions[0]
	if follower.ErrorCode != 0 || len(follower.RecordBatches) == 0 || follower.HighWatermark != 0 {
		t.Fatalf("follower fetch: %v %d bytes HW %d", kerr.ErrorForCode(follower.ErrorCode), len(follower.RecordBatches), follower.HighWatermark)
	}
	// The follower appended them and fetches from 3: that completes the produce.
	r.Topics[0].Partitions[0].FetchOffset = 3
	follower = h.fetch(context.Background(), 15, r).Topics[0].Partitions[0]
	if follower.HighWatermark != 3 || p.HighWatermark() != 3 {
		t.Fatalf("HW after the follower's fetch at 3: answer %d, partition %d", follower.HighWatermark, p.HighWatermark())
	}
	res := receive(t, got, 10*time.Second, "acks=all produce not completed by the follower's fetch")
	if res.ErrorCode != 0 {
		t.Fatalf("acks=all: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	resp, _ := h.doAs(context.Background(), 15, r, denyClusterAction{})
	dec := &kmsg.FetchResponse{Version: 15}
	if err := dec.ReadFrom(bodyBytes(t, resp.Body)); err != nil || dec.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("replica fetch without CLUSTER_ACTION: %v %+v", err, dec.Topics)
	}
}

// denyClusterAction denies CLUSTER_ACTION and allows everything else.
type denyClusterAction struct{}

func (denyClusterAction) Authorize(_ context.Context, _ kernel.Principal, _ string, op kernel.Operation, r kernel.Resource) bool {
	return !(r.Type == kernel.ResCluster && op == kernel.OpClusterAction)
}

// TestAcksAllFailsOnLeaderLoss: a produce waiting for the HW answers
// NOT_LEADER_OR_FOLLOWER when this broker loses leadership, and so does one whose
// leader epoch changed under it (a new epoch may truncate the batch away).
func TestAcksAllFailsOnLeaderLoss(t *testing.T) {
	for _, tc := range []string{"leader moved", "new epoch"} {
		t.Run(tc, func(t *testing.T) {
			h := newHarness(t, nil)
			h.m.pauseFetching(true)
			h.meta.publish(twoReplicas(2, 1, 2))
			tp := kernel.TopicPartition{Topic: "t"}
			got := h.waitingProduce(produceReq(-1, "t", 1, 0, testBatch(1, "x")))
			im := twoReplicas(3, 1, 2)
			pi := &im.Topic("t").Partitions[0]
			pi.LeaderEpoch = 6
			if tc == "leader moved" {
				pi.Leader = 2
			}
			h.meta.publish(im)
			if tc == "new epoch" {
				// The follower catches up with the old batch in the new epoch: the HW
				// passes it, but the wait began in epoch 5.
				h.m.partition(tp).updateFollower(2, 1)
			}
			res := receive(t, got, 10*time.Second, "waiting produce not answered")
			if res.ErrorCode != kerr.NotLeaderForPartition.Code {
				t.Fatalf("got %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(res.ErrorCode))
			}
		})
	}
}

// changerMeta is a fakeMeta whose AlterPartition the test scripts.
type changerMeta struct {
	*fakeMeta
	mu    sync.Mutex
	reqs  []kernel.AlterPartitionRequest
	reply func(req kernel.AlterPartitionRequest) (kernel.PartitionImage, error)
}

func (c *changerMeta) AlterPartition(_ context.Context, req kernel.AlterPartitionRequest) (kernel.PartitionImage, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	reply := c.reply
	c.mu.Unlock()
	return reply(req)
}

func (c *changerMeta) requests() []kernel.AlterPartitionRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs)
}

// isrHarness is a harness whose metadata changes ISRs (accepting every change
// unless reply says otherwise), with node 1 leading "t" over replicas 1, 2, 3 and
// min.insync.replicas 2, and a fake clock.
func isrHarness(t *testing.T, reply func(req kernel.AlterPartitionRequest) (kernel.PartitionImage, error)) (*harness, *changerMeta, *Partition, *fakeClock) {
	t.Helper()
	meta := &fakeMeta{img: image(1)}
	cm := &changerMeta{fakeMeta: meta}
	accept := func(req kernel.AlterPartitionRequest) (kernel.PartitionImage, error) {
		return kernel.PartitionImage{Leader: req.Leader, LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch + 1, Replicas: []int32{1, 2, 3}, ISR: req.ISR}, nil
	}
	if reply == nil {
		reply = accept
	}
	cm.reply = reply
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	h := newHarnessMeta(t, cm, meta, nil, func(m *Module) { m.now = clock.Now })
	h.m.pauseFetching(true)
	im := image(2, topicSpec{name: "t", id: 1, configs: map[string]string{"min.insync.replicas": "2"}})
	pi := &im.Topic("t").Partitions[0]
	pi.Replicas, pi.ISR, pi.PartitionEpoch = []int32{1, 2, 3}, []int32{1, 2, 3}, 10
	h.meta.publish(im)
	p := h.m.partition(kernel.TopicPartition{Topic: "t"})
	return h, cm, p, clock
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fetchAs records a follower fetch at offset through the leader path.
func fetchAs(p *Partition, h *harness, replica int32, offset int64) {
	if prop, _, _ := p.followerFetched(replica, offset, p.log.LogEndOffset(), h.m.now().UnixMilli()); prop != nil {
		h.m.proposeISR(p, prop)
	}
}

// TestISRShrinkAndExpand: followers not caught up for replica.lag.time.max.ms leave
// the ISR (one AlterPartition in flight, the answer's partition epoch applied);
// acks=all keeps working while the ISR holds min.insync.replicas and answers
// NOT_ENOUGH_REPLICAS below; a follower that reaches the HW (and the epoch's start)
// joins again.
func TestISRShrinkAndExpand(t *testing.T) {
	h, cm, p, clock := isrHarness(t, nil)
	lag := h.m.rcfg.Load().lagMaxMs
	fetchAs(p, h, 2, 0)
	fetchAs(p, h, 3, 0)
	h.produce(9, 1, "t", 0, testBatch(2, "a")) // LEO 2; HW waits for 2 and 3
	fetchAs(p, h, 2, 2)
	if p.HighWatermark() != 0 {
		t.Fatalf("HW %d with follower 3 behind", p.HighWatermark())
	}
	// 3 stops fetching; 2 keeps fetching at the log end.
	clock.add(time.Duration(lag/2) * time.Millisecond)
	fetchAs(p, h, 2, 2)
	h.m.shrinkISRs(h.m.now().UnixMilli(), lag)
	if n := len(cm.requests()); n != 0 {
		t.Fatalf("%d ISR changes before the lag passed", n)
	}
	clock.add(time.Duration(lag/2+1) * time.Millisecond)
	fetchAs(p, h, 2, 2)
	h.m.shrinkISRs(h.m.now().UnixMilli(), lag)
	waitFor(t, func() bool { return slices.Equal(p.ISR(), []int32{1, 2}) })
	reqs := cm.requests()
	if len(reqs) != 1 || !slices.Equal(reqs[0].ISR, []int32{1, 2}) || reqs[0].PartitionEpoch != 10 || reqs[0].LeaderEpoch != 5 || reqs[0].Leader != 1 {
		t.Fatalf("shrink requests %+v", reqs)
	}
	if pe := p.place.Load().partitionEpoch; pe != 11 {
		t.Fatalf("partition epoch %d, want 11", pe)
	}
	// The HW no longer waits for 3.
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("HW %d after the shrink, want 2", hw)
	}
	if res := produceWithin(h, 100, testBatch(1, "b")); res.ErrorCode != kerr.RequestTimedOut.Code {
		// (2 is in the ISR but the test does not fetch for it: the wait times out.)
		t.Fatalf("acks=all with ISR {1,2}: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	// 2 stops too: ISR {1} < min.insync.replicas.
	clock.add(time.Duration(lag+1) * time.Millisecond)
	h.m.shrinkISRs(h.m.now().UnixMilli(), lag)
	waitFor(t, func() bool { return slices.Equal(p.ISR(), []int32{1}) })
	if res := h.produce(9, -1, "t", 0, testBatch(1, "c")); res.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR {1}: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	// 3 comes back below the HW: not yet; at the HW: it joins.
	leo := p.log.LogEndOffset()
	fetchAs(p, h, 3, 1)
	if n := len(cm.requests()); n != 2 {
		t.Fatalf("%d ISR changes after a lagging fetch, want 2", n)
	}
	fetchAs(p, h, 3, leo)
	waitFor(t, func() bool { return slices.Equal(p.ISR(), []int32{1, 3}) })
	if res := produceWithin(h, 100, testBatch(1, "d")); res.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all with ISR {1,3}, 3 not fetching: %v", kerr.ErrorForCode(res.ErrorCode))
	}
}

// produceWithin produces records to "t" with acks=all and a timeout of ms.
func produceWithin(h *harness, ms int32, records []byte) kmsg.ProduceResponseTopicPartition {
	h.t.Helper()
	r := produceReq(-1, "t", 1, 0, records)
	r.TimeoutMillis = ms
	resp, err := h.do(context.Background(), 9, r)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// TestISRChangeErrors: a change rejected for good (a newer image is coming) is dropped
// and not proposed again before the backoff; a transient failure is retried; while a
// change is in flight no other is proposed, and the HW counts the maximal ISR.
func TestISRChangeErrors(t *testing.T) {
	var mu sync.Mutex
	answers := []error{kerr.NotController, kerr.RequestTimedOut, nil, kerr.InvalidUpdateVersion}
	release := make(chan struct{})
	reply := func(req kernel.AlterPartitionRequest) (kernel.PartitionImage, error) {
		mu.Lock()
		err := error(kerr.OperationNotAttempted)
		if len(answers) > 0 {
			err, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		if err == nil {
			<-release // hold the accepted expansion in flight
			return kernel.PartitionImage{Leader: 1, LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch + 1, Replicas: []int32{1, 2, 3}, ISR: req.ISR}, nil
		}
		return kernel.PartitionImage{}, err
	}
	h, cm, p, clock := isrHarness(t, reply)
	lag := h.m.rcfg.Load().lagMaxMs
	fetchAs(p, h, 2, 0)
	clock.add(time.Duration(lag+1) * time.Millisecond)
	fetchAs(p, h, 2, 0)
	h.m.shrinkISRs(h.m.now().UnixMilli(), lag) // 3 leaves: NotController, RequestTimedOut, then accepted (held)
	waitFor(t, func() bool { return len(cm.requests()) == 3 })
	// In flight: the maximal ISR still holds 3, so the HW waits for it.
	h.produce(9, 1, "t", 0, testBatch(1, "a"))
	fetchAs(p, h, 2, 1)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d while the shrink is in flight", hw)
	}
	h.m.shrinkISRs(h.m.now().UnixMilli(), lag)
	if n := len(cm.requests()); n != 3 {
		t.Fatalf("%d requests: a second change was proposed while one is in flight", n)
	}
	close(release)
	waitFor(t, func() bool { return slices.Equal(p.ISR(), []int32{1, 2}) && p.HighWatermark() == 1 })
	// 3 catches up: the expansion is rejected (INVALID_UPDATE_VERSION) and dropped.
	fetchAs(p, h, 3, 1)
	waitFor(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(cm.requests()) == 4 && p.pending == nil
	})
	if !slices.Equal(p.ISR(), []int32{1, 2}) {
		t.Fatalf("ISR %v after a rejected expansion", p.ISR())
	}
	fetchAs(p, h, 3, 1) // within the backoff: not proposed again
	if n := len(cm.requests()); n != 4 {
		t.Fatalf("%d requests: proposed again within the backoff", n)
	}
	// Stop ends the ISR check and the AlterPartition calls.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	noModuleGoroutines(t)
}

// noModuleGoroutines waits until no module goroutine runs (one that Stop waited for
// may still be returning from its last deferred call) and fails with their stacks.
func noModuleGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g := moduleGoroutines()
		if g == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Stop:\n%s", g)
		}
		time.Sleep(time.Millisecond)
	}
}

// moduleGoroutines returns the stacks of the module's own goroutines (fetchers, the
// ISR check, AlterPartition calls) still running in the process.
func moduleGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, fn := range []string{"replication.(*fetcher).run", "replication.(*Module).isrLoop", "replication.(*Module).alterPartition"} {
			if strings.Contains(g, fn) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

// TestStopLeavesNoFetchers: a follower's fetcher stuck on a leader that never answers
// is stopped (and its goroutine gone) by Stop; re-targeting and removing partitions
// stops fetchers too.
func TestStopLeavesNoFetchers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns sync.WaitGroup
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			accepted <- struct{}{}
			go func() { // read and never answer
				defer conns.Done()
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	follower := func(version uint64, epoch int32) *kernel.Image {
		im := followerImage(version, epoch)
		im.Brokers[2] = &kernel.BrokerImage{ID: 2, Endpoints: []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: int32(port)}}}
		return im
	}
	h := newHarness(t, nil)
	h.meta.publish(follower(2, 3))
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetcher did not connect to the leader")
	}
	if n, parts := h.m.Fetchers(); n != 1 || parts != 1 {
		t.Fatalf("%d fetchers, %d partitions", n, parts)
	}
	if !fetcherRunning() {
		t.Fatal("no fetcher goroutine")
	}
	// Node 1 leads now: the fetcher stops.
	lead := followerImage(3, 4)
	lead.Topic("t").Partitions[0].Leader = 1
	h.meta.publish(lead)
	waitFor(t, func() bool { return !fetcherRunning() })
	// Follower again, then Stop while it waits for the silent leader.
	h.meta.publish(follower(4, 5))
	waitFor(t, fetcherRunning)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	noModuleGoroutines(t)
	if n, parts := h.m.Fetchers(); n != 0 || parts != 0 {
		t.Fatalf("after Stop: %d fetchers, %d partitions", n, parts)
	}
	ln.Close()
	conns.Wait() // the fetcher closed its connections
}

// fetcherRunning reports whether a replica fetcher goroutine exists in the process.
func fetcherRunning() bool {
	return strings.Contains(moduleGoroutines(), "replication.(*fetcher).run")
}

// TestISRHammer runs acks=all producers, two followers fetching through the leader
// path (one of them stalling now and then, so the ISR shrinks and expands through a
// PartitionChanger), the periodic ISR check and a stream of images (new leader epochs,
// leadership moving away and back) on one partition at once: no deadlock, every
// answer is one Kafka allows, and HW <= LEO throughout.
func TestISRHammer(t *testing.T) {
	meta := &fakeMeta{img: image(1)}
	cm := &changerMeta{fakeMeta: meta}
	cm.reply = func(req kernel.AlterPartitionRequest) (kernel.PartitionImage, error) {
		return kernel.PartitionImage{Leader: req.Leader, LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch + 1, Replicas: []int32{1, 2, 3}, ISR: req.ISR}, nil
	}
	h := newHarnessMeta(t, cm, meta, map[string]string{"replica.lag.time.max.ms": "20"}, nil)
	h.m.pauseFetching(true)
	var imu sync.Mutex
	version, epoch := uint64(1), int32(5)
	publish := func(leader int32, newEpoch bool) {
		imu.Lock()
		defer imu.Unlock()
		version++
		if newEpoch {
			epoch++
		}
		im := image(version, topicSpec{name: "t", id: 1, configs: map[string]string{"min.insync.replicas": "2"}})
		pi := &im.Topic("t").Partitions[0]
		pi.Leader, pi.LeaderEpoch, pi.Replicas, pi.ISR = leader, epoch, []int32{1, 2, 3}, []int32{1, 2, 3}
		if p := h.m.partition(kernel.TopicPartition{Topic: "t"}); p != nil {
			pl := p.place.Load()
			pi.ISR, pi.PartitionEpoch = slices.Clone(pl.isr), pl.partitionEpoch
			if !slices.Contains(pi.ISR, leader) {
				pi.ISR = append(pi.ISR, leader)
			}
		}
		h.meta.publish(im)
	}
	publish(1, true)
	p := h.m.partition(kernel.TopicPartition{Topic: "t"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	allowed := map[int16]bool{0: true, kerr.RequestTimedOut.Code: true, kerr.NotEnoughReplicas.Code: true,
		kerr.NotEnoughReplicasAfterAppend.Code: true, kerr.NotLeaderForPartition.Code: true}
	var pwg sync.WaitGroup
	for range 3 {
		pwg.Go(func() {
			for range 100 {
				if res := produceWithin(h, 50, testBatch(2, "h")); !allowed[res.ErrorCode] {
					t.Errorf("produce: %v", kerr.ErrorForCode(res.ErrorCode))
					return
				}
			}
		})
	}
	for _, replica := range []int32{2, 3} {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if replica == 3 && i%50 < 10 {
					time.Sleep(2 * time.Millisecond) // stall: falls out of the ISR
					continue
				}
				r := fetchReq("t", 1, 0, p.log.LogEndOffset())
				r.ReplicaState.ID = replica
				r.MinBytes, r.MaxWaitMillis = 1, 5
				resp, err := h.do(ctx, 15, r)
				if err != nil {
					return
				}
				bodyBytes(t, resp.Body)
			}
		})
	}
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			// Mostly images that change nothing for the partition; every 20th a new
			// epoch, every 40th with leadership elsewhere (and back at the next).
			leader := int32(1)
			if i%40 == 39 {
				leader = 2
			}
			publish(leader, i%20 == 19)
			time.Sleep(3 * time.Millisecond)
			if hw, leo := p.HighWatermark(), p.log.LogEndOffset(); hw > leo {
				t.Errorf("HW %d > LEO %d", hw, leo)
			}
		}
	})
	pwg.Wait()
	// Both kinds of change happened: a shrink (fewer than 3) and an expansion back to
	// 3 (the images always start from the leader's ISR, so 3 is only ever proposed
	// by an expansion).
	waitFor(t, func() bool {
		var shrink, expand bool
		for _, r := range cm.requests() {
			shrink = shrink || len(r.ISR) < 3
			expand = expand || len(r.ISR) == 3
		}
		return shrink && expand
	})
	cancel()
	wg.Wait()
	publish(1, true)
}

// TestFollowerStraddlingBatch: the leader's batch holding the follower's log end
// starts below it. An empty log (reset to a log start inside a batch) restarts at the
// batch and takes it, then follows the leader's log start, as Kafka; a log whose last
// batch is not the leader's is cut back to the leader's boundary and appends when the
// boundaries meet, else fetches again (errRefetch).
func TestFollowerStraddlingBatch(t *testing.T) {
	t.Run("empty log", func(t *testing.T) {
		_, p := followerHarness(t, 3)
		if err := p.log.Reset(15); err != nil {
			t.Fatal(err)
		}
		if _, err := p.appendFetched(2, 3, 15, epochBatch(10, 10, 3, "a"), 20, 15); err != nil {
			t.Fatal(err)
		}
		if s, e, hw := p.log.LogStartOffset(), p.log.LogEndOffset(), p.HighWatermark(); s != 15 || e != 20 || hw != 20 {
			t.Fatalf("log [%d, %d) HW %d, want [15, 20) HW 20", s, e, hw)
		}
	})
	t.Run("boundaries meet", func(t *testing.T) {
		_, p := followerHarness(t, 3)
		if _, err := p.appendFetched(2, 3, 0, append(epochBatch(0, 5, 3, "a"), epochBatch(5, 3, 3, "ours")...), 8, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := p.appendFetched(2, 3, 8, epochBatch(5, 5, 3, "leader's"), 10, 0); err != nil {
			t.Fatal(err)
		}
		if e := p.log.LogEndOffset(); e != 10 {
			t.Fatalf("LEO %d, want 10", e)
		}
	})
	t.Run("boundaries differ", func(t *testing.T) {
		_, p := followerHarness(t, 3)
		if _, err := p.appendFetched(2, 3, 0, append(epochBatch(0, 5, 3, "a"), epochBatch(5, 5, 3, "ours")...), 10, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := p.appendFetched(2, 3, 10, epochBatch(8, 5, 3, "leader's"), 13, 0); err != errRefetch {
			t.Fatalf("got %v, want errRefetch", err)
		}
		if e, hw := p.log.LogEndOffset(), p.HighWatermark(); e != 5 || hw > 5 {
			t.Fatalf("LEO %d HW %d, want 5 and <= 5", e, hw)
		}
	})
}

// racks gives brokers 1-3 racks r1-r3 in im.
func racks(im *kernel.Image) *kernel.Image {
	for id := int32(1); id <= 3; id++ {
		im.Brokers[id] = &kernel.BrokerImage{ID: id, Rack: fmt.Sprintf("r%d", id), Endpoints: []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: "127.0.0.9", Port: 1}}}
	}
	return im
}

// TestFollowerReadsLeader: with follower_reads, a consumer whose rack holds an
// in-sync follower that reached its fetch offset is sent there (preferred read
// replica, no records); otherwise, and without the setting or before v11, it reads
// from the leader.
func TestFollowerReadsLeader(t *testing.T) {
	for _, on := range []bool{true, false} {
		h := newHarness(t, func(m *Module) { m.FollowerReads = on })
		h.m.pauseFetching(true)
		im := racks(image(2, topicSpec{name: "t", id: 1}))
		pi := &im.Topic("t").Partitions[0]
		pi.Replicas, pi.ISR = []int32{1, 2, 3}, []int32{1, 2, 3}
		h.meta.publish(im)
		h.produce(9, 1, "t", 0, testBatch(3, "a"))
		p := h.m.partition(kernel.TopicPartition{Topic: "t"})
		p.updateFollower(2, 3)
		p.updateFollower(3, 1)
		for _, tc := range []struct {
			v         int16
			rack      string
			offset    int64
			preferred int32
		}{
			{11, "r2", 0, 2},
			{18, "r2", 3, 2},
			{11, "r1", 0, -1}, // the leader's own rack
			{11, "r3", 2, -1}, // follower 3 has not reached 2 (and the HW is 1)
			{11, "r3", 1, 3},
			{11, "r9", 0, -1},
			{10, "r2", 0, -1}, // no rack before v11
		} {
			r := fetchReq("t", 1, 0, tc.offset)
			r.Rack = tc.rack
			fp := h.fetch(context.Background(), tc.v, r).Topics[0].Partitions[0]
			want := tc.preferred
			if !on || tc.v < 11 {
				want = -1
			}
			if fp.ErrorCode != 0 || fp.PreferredReadReplica != want {
				t.Fatalf("on=%v v%d rack %s offset %d: %v preferred %d, want %d", on, tc.v, tc.rack, tc.offset, kerr.ErrorForCode(fp.ErrorCode), fp.PreferredReadReplica, want)
			}
			if hasRecords := len(fp.RecordBatches) > 0; hasRecords != (want < 0 && tc.offset < p.HighWatermark()) {
				t.Fatalf("on=%v v%d rack %s: records %v with preferred %d", on, tc.v, tc.rack, hasRecords, want)
			}
		}
	}
}

// TestFollowerReadsFollower: with follower_reads, a follower serves consumers up to
// its own HW (never past it), answers OFFSET_OUT_OF_RANGE past its log end, checks
// the leader epoch, and a long poll completes when a fetched answer moves its HW.
func TestFollowerReadsFollower(t *testing.T) {
	h := newHarness(t, func(m *Module) { m.FollowerReads = true })
	h.m.pauseFetching(true)
	h.meta.publish(followerImage(2, 3))
	p := h.m.partition(kernel.TopicPartition{Topic: "t"})
	var recs []byte
	for off := range int64(5) {
		recs = append(recs, epochBatch(off, 1, 3, "a")...)
	}
	if _, err := p.appendFetched(2, 3, 0, recs, 3, 0); err != nil {
		t.Fatal(err)
	}
	fp := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0)).Topics[0].Partitions[0]
	last, _ := lastOffsetOf(&kernel.ReadResult{Chunks: []kernel.Chunk{{Bytes: fp.RecordBatches}}, Size: int64(len(fp.RecordBatches))})
	if fp.ErrorCode != 0 || fp.HighWatermark != 3 || last != 2 {
		t.Fatalf("follower read: %v HW %d last %d; want HW 3 and last 2", kerr.ErrorForCode(fp.ErrorCode), fp.HighWatermark, last)
	}
	if fp := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 4)).Topics[0].Partitions[0]; fp.ErrorCode != 0 || len(fp.RecordBatches) != 0 {
		t.Fatalf("past the follower's HW: %v %d bytes", kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
	}
	if fp := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 6)).Topics[0].Partitions[0]; fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("past the follower's log end: %v", kerr.ErrorForCode(fp.ErrorCode))
	}
	r := fetchReq("t", 1, 0, 0)
	r.Topics[0].Partitions[0].CurrentLeaderEpoch = 2
	if fp := h.fetch(context.Background(), 12, r).Topics[0].Partitions[0]; fp.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("old epoch: %v", kerr.ErrorForCode(fp.ErrorCode))
	}
	// A long poll at the HW completes when the leader's next answer moves it.
	r = fetchReq("t", 1, 0, 3)
	r.MinBytes, r.MaxWaitMillis = 1, 600_000
	got := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() { got <- h.fetch(context.Background(), 12, r).Topics[0].Partitions[0] }()
	waitFor(t, func() bool { return h.m.pg.watching(p.tp) == 1 })
	if _, err := p.appendFetched(2, 3, 5, nil, 5, 0); err != nil {
		t.Fatal(err)
	}
	fp = receive(t, got, 10*time.Second, "long poll on a follower not completed by its HW move")
	if fp.HighWatermark != 5 || len(fp.RecordBatches) == 0 {
		t.Fatalf("long poll: HW %d, %d bytes", fp.HighWatermark, len(fp.RecordBatches))
	}
}

// TestReplicaFetchLearnsHW: a follower's long poll at the log end completes when the
// HW passes the one its last answer carried (another follower's fetch moved it), so
// followers learn the HW without waiting for new records.
func TestReplicaFetchLearnsHW(t *testing.T) {
	h := newHarness(t, nil)
	im := image(2, topicSpec{name: "t", id: 1})
	pi := &im.Topic("t").Partitions[0]
	pi.Replicas, pi.ISR = []int32{1, 2, 3}, []int32{1, 2, 3}
	h.meta.publish(im)
	tp := kernel.TopicPartition{Topic: "t"}
	h.produce(9, 1, "t", 0, testBatch(3, "a"))
	replicaFetch := func(replica int32, offset int64, wait int32) kmsg.FetchResponseTopicPartition {
		r := fetchReq("t", 1, 0, offset)
		r.ReplicaState.ID = replica
		r.MinBytes, r.MaxWaitMillis = 1, wait
		return h.fetch(context.Background(), 15, r).Topics[0].Partitions[0]
	}
	if fp := replicaFetch(2, 0, 0); fp.HighWatermark != 0 || len(fp.RecordBatches) == 0 {
		t.Fatalf("first fetch: HW %d, %d bytes", fp.HighWatermark, len(fp.RecordBatches))
	}
	got := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() { got <- replicaFetch(2, 3, 600_000) }()
	waitFor(t, func() bool { return h.m.pg.watching(tp) == 1 })
	select {
	case fp := <-got:
		t.Fatalf("answered before the HW moved: %+v", fp)
	default:
	}
	if fp := replicaFetch(3, 3, 0); fp.HighWatermark != 3 {
		t.Fatalf("follower 3's fetch: HW %d, want 3", fp.HighWatermark)
	}
	fp := receive(t, got, 10*time.Second, "follower 2's long poll not answered when the HW moved")
	if fp.HighWatermark != 3 || len(fp.RecordBatches) != 0 {
		t.Fatalf("follower 2's long poll: HW %d, %d bytes", fp.HighWatermark, len(fp.RecordBatches))
	}
}
