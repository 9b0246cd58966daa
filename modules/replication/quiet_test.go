package replication

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// quietCount is how many partitions of session id carry a quiet mark.
func quietCount(h *harness, id int32) int {
	s := h.m.sessions.get(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sp := range s.parts {
		if sp.qPart != nil {
			n++
		}
	}
	return n
}

// TestFetchSessionQuietMatchesFullFetch drives a consumer session through random
// produces, DeleteRecords and idle rounds, and checks every incremental answer against
// a sessionless full fetch at the same offsets: a partition is in the incremental answer
// exactly when the full fetch has records or an error for it or its HW or log start
// differs from what the session last sent, and then with the same content. Quiet marks
// (session.go) must never hide a change.
func TestFetchSessionQuietMatchesFullFetch(t *testing.T) {
	for _, v := range []int16{7, 12, 13} {
		t.Run(string(rune('0'+v/10))+string(rune('0'+v%10)), func(t *testing.T) {
			h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 8})
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(v), 7))
			offsets := map[int32]int64{}
			for p := range int32(8) {
				offsets[p] = 0
			}
			type sent struct{ hw, logStart int64 }
			last := map[int32]sent{}
			open := h.fetch(ctx, v, sessionReq(0, 0, offsets))
			id := open.SessionID
			for p, rp := range partsOf(open) {
				last[p] = sent{rp.HighWatermark, rp.LogStartOffset}
			}
			changed := map[int32]int64{}
			quietSeen := 0
			for step := range 400 {
				p := rng.Int32N(8)
				switch rng.IntN(5) {
				case 0, 1:
					h.produce(9, 1, "t", p, testBatch(1+rng.IntN(3), "r"))
				case 2:
					// Up to the consumer's offset, so it never falls out of range.
					if part := h.m.partition(kernel.TopicPartition{Topic: "t", Partition: p}); part != nil && offsets[p] > part.log.LogStartOffset() {
						if _, err := part.deleteRecordsBefore(offsets[p]); err != nil {
							t.Fatal(err)
						}
					}
				}
				inc := h.fetch(ctx, v, sessionReq(id, int32(step+1), changed))
				if inc.ErrorCode != 0 {
					t.Fatalf("step %d: session error %d", step, inc.ErrorCode)
				}
				quietSeen = max(quietSeen, quietCount(h, id))
				truth := partsOf(h.fetch(ctx, v, sessionReq(0, -1, offsets)))
				got := partsOf(inc)
				changed = map[int32]int64{}
				for p := range int32(8) {
					tr := truth[p]
					want := len(tr.RecordBatches) > 0 || tr.ErrorCode != 0 || tr.HighWatermark != last[p].hw || tr.LogStartOffset != last[p].logStart
					g, in := got[p]
					if in != want {
						t.Fatalf("step %d partition %d: in answer %v, want %v (truth hw %d log start %d records %d; last sent %+v)",
							step, p, in, want, tr.HighWatermark, tr.LogStartOffset, len(tr.RecordBatches), last[p])
					}
					if !in {
						continue
					}
					if g.ErrorCode != tr.ErrorCode || g.HighWatermark != tr.HighWatermark || g.LogStartOffset != tr.LogStartOffset || len(g.RecordBatches) != len(tr.RecordBatches) {
						t.Fatalf("step %d partition %d: got err %d hw %d start %d records %d, full fetch err %d hw %d start %d records %d",
							step, p, g.ErrorCode, g.HighWatermark, g.LogStartOffset, len(g.RecordBatches), tr.ErrorCode, tr.HighWatermark, tr.LogStartOffset, len(tr.RecordBatches))
					}
					last[p] = sent{g.HighWatermark, g.LogStartOffset}
					if len(g.RecordBatches) > 0 {
						offsets[p] = g.HighWatermark // every batch up to the HW fits the limits
						changed[p] = offsets[p]
					}
				}
			}
			if quietSeen < 4 {
				t.Fatalf("at most %d partitions were ever quiet: the marks are not being made", quietSeen)
			}
		})
	}
}

// A delayed fetch whose partitions are all quiet still wakes when one of them gets
// records, and answers with them.
func TestFetchSessionQuietLongPoll(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 4})
	ctx := context.Background()
	open := h.fetch(ctx, 12, sessionReq(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}))
	id := open.SessionID
	if inc := h.fetch(ctx, 12, sessionReq(id, 1, nil)); len(partsOf(inc)) != 0 {
		t.Fatalf("idle fetch answered %v", partsOf(inc))
	}
	if n := quietCount(h, id); n != 4 {
		t.Fatalf("%d quiet partitions after an idle fetch, want 4", n)
	}
	r := sessionReq(id, 2, nil)
	r.MinBytes, r.MaxWaitMillis = 1, 60_000
	got := make(chan *kmsg.FetchResponse, 1)
	go func() { got <- h.fetch(ctx, 12, r) }()
	waitFor(t, func() bool { return h.m.pg.watching(kernel.TopicPartition{Topic: "t", Partition: 3}) == 1 })
	h.produce(9, 1, "t", 3, testBatch(2, "x"))
	select {
	case resp := <-got:
		if ps := partsOf(resp); len(ps) != 1 || len(ps[3].RecordBatches) == 0 || ps[3].HighWatermark != 2 {
			t.Fatalf("woken fetch answered %+v", ps)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("delayed fetch over quiet partitions not woken")
	}
}

// A change that wakes nothing (here: the log start moved under the partition, as
// retention does) reaches the client once the quiet mark's time is up, not never.
func TestFetchSessionQuietMarkExpires(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Unix(1_000_000, 0).UnixNano())
	h := newHarness(t, func(m *Module) { m.now = func() time.Time { return time.Unix(0, clock.Load()) } }, topicSpec{name: "t", id: 1, parts: 2})
	ctx := context.Background()
	h.produce(9, 1, "t", 0, testBatch(3, "x"))
	open := h.fetch(ctx, 12, sessionReq(0, 0, map[int32]int64{0: 3, 1: 0}))
	id := open.SessionID
	h.fetch(ctx, 12, sessionReq(id, 1, nil))
	if n := quietCount(h, id); n != 2 {
		t.Fatalf("%d quiet partitions, want 2", n)
	}
	part := h.m.partition(kernel.TopicPartition{Topic: "t", Partition: 0})
	if err := part.log.DeleteRecordsBefore(2); err != nil { // no Partition.changed
		t.Fatal(err)
	}
	if inc := h.fetch(ctx, 12, sessionReq(id, 2, nil)); len(partsOf(inc)) != 0 {
		t.Fatalf("a quiet mark within its time was not trusted: %v", partsOf(inc))
	}
	clock.Add(int64(quietMaxAge))
	inc := h.fetch(ctx, 12, sessionReq(id, 3, nil))
	if ps := partsOf(inc); len(ps) != 1 || ps[0].LogStartOffset != 2 {
		t.Fatalf("after the mark's time: %+v, want partition 0 with log start 2", ps)
	}
}

// A quiet partition whose topic is deleted and re-created under the same name is not
// read as the new incarnation through the old session's topic ID: the fetch answers
// UNKNOWN_TOPIC_ID, as without the quiet mark.
func TestFetchSessionQuietTopicRecreated(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 2})
	ctx := context.Background()
	open := h.fetch(ctx, 13, sessionReq(0, 0, map[int32]int64{0: 0, 1: 0}))
	id := open.SessionID
	h.fetch(ctx, 13, sessionReq(id, 1, nil))
	if n := quietCount(h, id); n != 2 {
		t.Fatalf("%d quiet partitions, want 2", n)
	}
	h.meta.publish(image(3))
	h.meta.publish(image(4, topicSpec{name: "t", id: 2, parts: 2}))
	waitFor(t, func() bool {
		p := h.m.partition(kernel.TopicPartition{Topic: "t"})
		return p != nil && p.topicID == [16]byte{2}
	})
	h.produce(9, 1, "t", 0, testBatch(1, "new incarnation"))
	inc := h.fetch(ctx, 13, sessionReq(id, 2, nil))
	for p, rp := range partsOf(inc) {
		if len(rp.RecordBatches) > 0 || rp.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("partition %d of the old topic ID: err %d, %d record bytes; want UNKNOWN_TOPIC_ID and none", p, rp.ErrorCode, len(rp.RecordBatches))
		}
	}
	if len(partsOf(inc)) != 2 {
		t.Fatalf("answer %v, want both partitions with UNKNOWN_TOPIC_ID", partsOf(inc))
	}
}
