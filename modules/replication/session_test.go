package replication

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sessionReq(id, epoch int32, parts map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.MaxBytes, r.SessionID, r.SessionEpoch = 1<<20, id, epoch
	if len(parts) > 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = "t", [16]byte{1}
		for p := int32(0); p < 8; p++ { // deterministic order
			off, ok := parts[p]
			if !ok {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
			t.Partitions = append(t.Partitions, rp)
		}
		r.Topics = append(r.Topics, t)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = "t", [16]byte{1}, forget
		r.ForgottenTopics = append(r.ForgottenTopics, ft)
	}
	return r
}

func partsOf(resp *kmsg.FetchResponse) map[int32]kmsg.FetchResponseTopicPartition {
	out := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

func TestFetchSessions(t *testing.T) {
	for _, v := range []int16{7, 12, 13, 18} {
		t.Run("v"+string(rune('0'+v/10))+string(rune('0'+v%10)), func(t *testing.T) {
			h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 3})
			ctx := context.Background()
			h.produce(9, 1, "t", 0, testBatch(1, "x"))

			full := h.fetch(ctx, v, sessionReq(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}))
			if full.ErrorCode != 0 || full.SessionID == 0 {
				t.Fatalf("open: err %d id %d", full.ErrorCode, full.SessionID)
			}
			if n := len(partsOf(full)); n != 3 {
				t.Fatalf("full response has %d partitions, want 3", n)
			}
			id := full.SessionID

			// Nothing changed: an incremental fetch returns no partitions.
			inc := h.fetch(ctx, v, sessionReq(id, 1, map[int32]int64{0: 1}))
			if inc.ErrorCode != 0 || inc.SessionID != id || len(partsOf(inc)) != 0 {
				t.Fatalf("idle incremental: err %d id %d parts %v", inc.ErrorCode, inc.SessionID, partsOf(inc))
			}
			// A produce to partition 2 shows up without the client naming it.
			h.produce(9, 1, "t", 2, testBatch(2, "y"))
			inc = h.fetch(ctx, v, sessionReq(id, 2, nil))
			ps := partsOf(inc)
			if len(ps) != 1 || len(ps[2].RecordBatches) == 0 || ps[2].HighWatermark != 2 {
				t.Fatalf("incremental after produce: %+v", ps)
			}
			// Forgotten partitions are no longer fetched.
			h.fetch(ctx, v, sessionReq(id, 3, map[int32]int64{2: 2}, 0))
			h.produce(9, 1, "t", 0, testBatch(1, "z"))
			inc = h.fetch(ctx, v, sessionReq(id, 4, nil))
			if len(partsOf(inc)) != 0 {
				t.Fatalf("forgotten partition returned: %+v", partsOf(inc))
			}
			// Wrong epoch, unknown id.
			if r := h.fetch(ctx, v, sessionReq(id, 9, nil)); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
				t.Fatalf("bad epoch: %d", r.ErrorCode)
			}
			if r := h.fetch(ctx, v, sessionReq(id+1, 1, nil)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("unknown id: %d", r.ErrorCode)
			}
			// The epoch was not consumed by the failures.
			if r := h.fetch(ctx, v, sessionReq(id, 5, nil)); r.ErrorCode != 0 {
				t.Fatalf("after failures: %d", r.ErrorCode)
			}
			// Epoch -1 closes the session.
			if r := h.fetch(ctx, v, sessionReq(id, -1, map[int32]int64{0: 0})); r.SessionID != 0 || len(partsOf(r)) != 1 {
				t.Fatalf("close: id %d parts %d", r.SessionID, len(partsOf(r)))
			}
			if r := h.fetch(ctx, v, sessionReq(id, 6, nil)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("closed session still usable: %d", r.ErrorCode)
			}
		})
	}
}

func TestFetchSessionIncrementalLongPoll(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 2})
	ctx := context.Background()
	full := h.fetch(ctx, 12, sessionReq(0, 0, map[int32]int64{0: 0, 1: 0}))
	r := sessionReq(full.SessionID, 1, nil)
	r.MinBytes, r.MaxWaitMillis = 1, 60_000
	got := make(chan *kmsg.FetchResponse, 1)
	go func() { got <- h.fetch(ctx, 12, r) }()
	waitFor(t, func() bool { return h.m.pg.n.Load() == 1 })
	h.produce(9, 1, "t", 1, testBatch(1, "x"))
	select {
	case resp := <-got:
		if ps := partsOf(resp); len(ps) != 1 || len(ps[1].RecordBatches) == 0 {
			t.Fatalf("%+v", ps)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("incremental long poll not woken")
	}
}

func TestSessionCacheEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newSessionCache(2, time.Minute, func() time.Time { return now })
	a := c.create(5)
	b := c.create(1)
	if a == nil || b == nil || a.id == b.id {
		t.Fatal("create")
	}
	a.upsert(sessionKey{topic: "t"}, 0, 1, -1, -1)
	// Full, nothing stale, new session not bigger than the smallest: refused.
	if s := c.create(0); s != nil {
		t.Fatal("evicted a fresh session for an empty one")
	}
	// A bigger session evicts the smallest one.
	now = now.Add(time.Second)
	if s := c.create(3); s == nil || c.get(b.id) != nil {
		t.Fatal("bigger session did not evict the smallest")
	}
	// Once stale, the least recently used one goes.
	now = now.Add(2 * time.Minute)
	if s := c.create(0); s == nil || c.get(a.id) != nil || c.len() != 2 {
		t.Fatal("stale session not evicted")
	}
	if s := newSessionCache(0, time.Minute, time.Now).create(1); s != nil {
		t.Fatal("disabled cache created a session")
	}
}

func TestFetchSessionsDisabled(t *testing.T) {
	h := newHarness(t, func(m *Module) { m.FetchSessionCacheSlots = 0 }, topicSpec{name: "t", id: 1})
	full := h.fetch(context.Background(), 12, sessionReq(0, 0, map[int32]int64{0: 0}))
	if full.SessionID != 0 || full.ErrorCode != 0 || len(partsOf(full)) != 1 {
		t.Fatalf("%+v", full)
	}
}
