package replication

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// updateFollower records a fetch of follower replica at leo, made when the leader's
// LEO was its current one (the leader path of a follower fetch, without the request).
func (p *Partition) updateFollower(replica int32, leo int64) {
	if prop, _, _ := p.followerFetched(replica, leo, p.log.LogEndOffset(), time.Now().UnixMilli()); prop != nil {
		p.isrChanged(prop, nil, 0)
	}
}

// twoReplicas returns an image where node 1 leads "t" with ISR isr and min.insync.replicas 2.
func twoReplicas(version uint64, isr ...int32) *kernel.Image {
	im := image(version, topicSpec{name: "t", id: 1, configs: map[string]string{"min.insync.replicas": "2"}})
	pi := &im.Topic("t").Partitions[0]
	pi.Replicas, pi.ISR = []int32{1, 2}, isr
	return im
}

// followedHarness is a harness whose node 1 leads "t" with follower 2 in the ISR
// (twoReplicas at version 2), so its HW waits for the follower; p is "t"-0.
func followedHarness(t *testing.T) (h *harness, p *Partition) {
	t.Helper()
	h = newHarness(t, nil)
	h.meta.publish(twoReplicas(2, 1, 2))
	return h, h.m.partition(kernel.TopicPartition{Topic: "t"})
}

// TestAcksAllWaitsForFollower drives the purgatory path acks=all takes with a real
// follower in the ISR: the produce is answered only when the follower's LEO moves the
// HW past the batch (the ISR issue feeds updateFollower from follower fetches).
func TestAcksAllWaitsForFollower(t *testing.T) {
	h, p := followedHarness(t)

	got := h.waitingProduce(produceReq(-1, "t", 1, 0, testBatch(3, "x")))
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d before the follower has the batch", hw)
	}
	// Consumers never see past the HW, though the leader's log has the batch.
	f := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0))
	if fp := f.Topics[0].Partitions[0]; fp.ErrorCode != 0 || fp.HighWatermark != 0 || len(fp.RecordBatches) != 0 {
		t.Fatalf("fetch past the HW: err %d hw %d %d bytes", fp.ErrorCode, fp.HighWatermark, len(fp.RecordBatches))
	}
	if leo := p.log.LogEndOffset(); leo != 3 {
		t.Fatalf("LEO %d", leo)
	}
	p.updateFollower(2, 2) // not yet past the last offset (2)
	select {
	case r := <-got:
		t.Fatalf("answered before the HW passed the batch: %+v", r)
	default:
	}
	p.updateFollower(2, 3)
	r := receive(t, got, 10*time.Second, "acks=all not completed when the follower caught up")
	if r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("%+v", r)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("HW %d, want 3", hw)
	}
	f = h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0))
	if fp := f.Topics[0].Partitions[0]; fp.HighWatermark != 3 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch after the HW moved: hw %d %d bytes", fp.HighWatermark, len(fp.RecordBatches))
	}
}

func TestAcksAllTimeoutAndISRShrink(t *testing.T) {
	h := newHarness(t, nil)
	h.meta.publish(twoReplicas(2, 1, 2))

	r := produceReq(-1, "t", 1, 0, testBatch(1, "x"))
	r.TimeoutMillis = 20
	resp, err := h.do(context.Background(), 9, r)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.RequestTimedOut.Code {
		t.Fatalf("timeout: %v", kerr.ErrorForCode(c))
	}

	got := h.waitingProduce(produceReq(-1, "t", 1, 0, testBatch(1, "x")))
	h.meta.publish(twoReplicas(3, 1)) // follower drops out of the ISR
	res := receive(t, got, 10*time.Second, "ISR shrink did not complete the waiting produce")
	if res.ErrorCode != kerr.NotEnoughReplicasAfterAppend.Code {
		t.Fatalf("ISR shrink: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	// And now the ISR is too small before the append.
	resp, _ = h.do(context.Background(), 9, produceReq(-1, "t", 1, 0, testBatch(1, "x")))
	if c := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.NotEnoughReplicas.Code {
		t.Fatalf("small ISR: %v", kerr.ErrorForCode(c))
	}
}

// TestLeaderChangeCompletesWaitingFetch: a long-polling fetch answers at once when the
// partition's leadership moves away (the placement change wakes the purgatory).
func TestLeaderChangeCompletesWaitingFetch(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	tp := kernel.TopicPartition{Topic: "t"}
	r := fetchReq("t", 1, 0, 0)
	r.MinBytes, r.MaxWaitMillis = 1, 600_000
	got := make(chan *kmsg.FetchResponse, 1)
	go func() { got <- h.fetch(context.Background(), 12, r) }()
	waitFor(t, func() bool { return h.m.pg.watching(tp) == 1 })
	im := image(2, topicSpec{name: "t", id: 1})
	pi := &im.Topic("t").Partitions[0]
	pi.Leader, pi.LeaderEpoch, pi.Replicas, pi.ISR = 2, 6, []int32{1, 2}, []int32{2}
	h.meta.publish(im)
	resp := receive(t, got, 10*time.Second, "leader change did not complete the waiting fetch")
	fp := resp.Topics[0].Partitions[0]
	if fp.ErrorCode != kerr.NotLeaderForPartition.Code || fp.CurrentLeader.LeaderID != 2 || fp.CurrentLeader.LeaderEpoch != 6 {
		t.Fatalf("%+v", fp)
	}
}

// An acks=all produce waiting for a follower when its topic is deleted is answered at
// once (its records are gone with the log), not left to time out.
func TestAcksAllAnsweredWhenTopicDeleted(t *testing.T) {
	h := newHarness(t, nil)
	h.meta.publish(twoReplicas(2, 1, 2))
	r := produceReq(-1, "t", 1, 0, testBatch(1, "x"))
	r.TimeoutMillis = 60_000
	got := h.waitingProduce(r)
	h.meta.publish(image(3)) // "t" deleted
	res := receive(t, got, 20*time.Second, "acks=all produce still waiting after its topic was deleted")
	if res.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("got %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(res.ErrorCode))
	}
}
