package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

type appendOutcome struct {
	res kernel.AppendResult
	err error
}

func goAppend(m *Module, ctx context.Context, tp kernel.TopicPartition, records []byte) chan appendOutcome {
	ch := make(chan appendOutcome, 1)
	go func() {
		res, err := m.Append(ctx, tp, records)
		ch <- appendOutcome{res, err}
	}()
	return ch
}

// TestPartitionsAppendWaitsForHW holds the HW back with a follower in the ISR (as the
// acks=all produce tests do): Append returns only once the HW passes its records,
// returns ctx.Err() when cancelled while waiting, and ErrStopping when the module stops.
// ReadCommitted never passes the HW and stops at an error from fn.
func TestPartitionsAppendWaitsForHW(t *testing.T) {
	h, p := followedHarness(t)
	tp := p.tp

	ch := goAppend(h.m, context.Background(), tp, testBatch(3, "a"))
	waitFor(t, func() bool { return h.m.pg.watching(tp) == 1 })
	select {
	case o := <-ch:
		t.Fatalf("returned before the HW passed the records: %+v", o)
	default:
	}
	p.updateFollower(2, 3)
	if o := <-ch; o.err != nil || o.res.BaseOffset != 0 || o.res.LastOffset != 2 {
		t.Fatalf("append: %+v", o)
	}

	// Cancelled while waiting: ctx.Err(), though the records are in the log.
	ctx, cancel := context.WithCancel(context.Background())
	ch = goAppend(h.m, ctx, tp, testBatch(2, "b"))
	waitFor(t, func() bool { return h.m.pg.watching(tp) == 1 })
	var n int
	if err := h.m.ReadCommitted(context.Background(), tp, 0, func([]byte) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("read committed: %d batches, %v; want 1 (the HW is 3)", n, err)
	}
	cancel()
	if o := <-ch; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled append: %+v", o)
	}
	if leo := p.log.LogEndOffset(); leo != 5 {
		t.Fatalf("LEO %d, want 5", leo)
	}
	p.updateFollower(2, 5)

	// fn's error stops the read and is returned.
	stop := errors.New("stop")
	n = 0
	if err := h.m.ReadCommitted(context.Background(), tp, 0, func([]byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("fn error: %d calls, %v", n, err)
	}
	// From an offset inside the second batch: that batch is the first one.
	var bases []int64
	if err := h.m.ReadCommitted(context.Background(), tp, 4, func(b []byte) error {
		bases = append(bases, int64(binary.BigEndian.Uint64(b)))
		return nil
	}); err != nil || len(bases) != 1 || bases[0] != 3 {
		t.Fatalf("read from 4: %v %v", bases, err)
	}
	// A cancelled ctx stops the read before the first chunk.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := h.m.ReadCommitted(ctx, tp, 0, func([]byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with cancelled ctx: %v", err)
	}

	// Stop ends a waiting Append promptly.
	ch = goAppend(h.m, context.Background(), tp, testBatch(1, "c"))
	waitFor(t, func() bool { return h.m.pg.watching(tp) == 1 })
	if err := h.m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := <-ch; !errors.Is(o.err, ErrStopping) {
		t.Fatalf("append during stop: %+v", o)
	}
}

// TestPartitionsAppendRejects: corrupt batches wrap kernel.ErrCorrupt, control batches
// are rejected, unknown partitions and followers give kernel.ErrNotLeader, and the
// caller's bytes are left alone.
func TestPartitionsAppendRejects(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1}, topicSpec{name: "f", id: 2, leader: 2})
	ctx := context.Background()
	tp := kernel.TopicPartition{Topic: "t"}
	bad := testBatch(2, "x")
	bad[len(bad)-1] ^= 0xff
	if _, err := h.m.Append(ctx, tp, bad); !errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
	if _, err := h.m.Append(ctx, tp, nil); !errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("empty: %v", err)
	}
	ctl := recordbatch.Build(recordbatch.Options{ProducerID: 1, BaseSequence: -1, Control: true}, recordbatch.Record{Key: []byte{0, 0, 0, 0}})
	if _, err := h.m.Append(ctx, tp, ctl); !errors.Is(err, ErrRecordsRejected) && !errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("control: %v", err)
	}
	for _, other := range []kernel.TopicPartition{{Topic: "nope"}, {Topic: "t", Partition: 1}, {Topic: "f"}} {
		if _, err := h.m.Append(ctx, other, testBatch(1, "x")); !errors.Is(err, kernel.ErrNotLeader) {
			t.Fatalf("%s: %v", other, err)
		}
		if err := h.m.ReadCommitted(ctx, other, 0, func([]byte) error { return nil }); !errors.Is(err, kernel.ErrNotLeader) {
			t.Fatalf("read %s: %v", other, err)
		}
	}
	if e, ok := h.m.Leader(kernel.TopicPartition{Topic: "f"}); ok {
		t.Fatalf("leader of f: %d %v", e, ok)
	}
	if e, ok := h.m.Leader(tp); !ok || e != 5 {
		t.Fatalf("leader of t: %d %v", e, ok)
	}
	if _, ok := h.m.Leader(kernel.TopicPartition{Topic: "nope"}); ok {
		t.Fatal("leads an unknown topic")
	}
	in := testBatch(2, "y")
	orig := string(in)
	res, err := h.m.Append(ctx, tp, in)
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 1 {
		t.Fatalf("append: %+v %v", res, err)
	}
	if string(in) != orig {
		t.Fatal("Append modified the caller's records")
	}
	if leo := h.m.partition(tp).log.LogEndOffset(); leo != 2 {
		t.Fatalf("LEO %d: a rejected append wrote", leo)
	}
}

// BenchmarkPartitionsAppend: one Append of a small batch (one 100-byte record) to
// storage.memory, ISR = {self}, so the HW passes it at once.
func BenchmarkPartitionsAppend(b *testing.B) {
	h := newHarness(b, nil, topicSpec{name: "t", id: 1, configs: map[string]string{"segment.bytes": "1048576"}})
	tp := kernel.TopicPartition{Topic: "t"}
	batch := testBatch(1, string(make([]byte, 100)))
	ctx := context.Background()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.m.Append(ctx, tp, batch); err != nil {
			b.Fatal(err)
		}
	}
}

func TestOffsetsSeam(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "offs", id: 7}, topicSpec{name: "far", id: 8, leader: 2})
	tp := kernel.TopicPartition{Topic: "offs", Partition: 0}
	for _, other := range []kernel.TopicPartition{{Topic: "nope"}, {Topic: "far"}} {
		if _, _, ok := h.m.Offsets(other); ok {
			t.Fatalf("offsets of %v, which this broker does not lead", other)
		}
	}
	batch := recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseSequence: -1},
		recordbatch.Record{Value: []byte("a")}, recordbatch.Record{Value: []byte("b")})
	if _, err := h.m.Append(context.Background(), tp, batch); err != nil {
		t.Fatal(err)
	}
	start, hw, ok := h.m.Offsets(tp)
	if !ok || start != 0 || hw != 2 {
		t.Fatalf("Offsets = %d, %d, %v; want 0, 2, true", start, hw, ok)
	}
}
