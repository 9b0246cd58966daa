package compact

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

func TestOffsetMapBoundedAndExact(t *testing.T) {
	m := NewOffsetMap(240_000, 0.9) // 10,000 slots
	if c := m.Capacity(); c != 9000 {
		t.Fatalf("capacity %d, want 9000", c)
	}
	m.Reset(100) // a small pass sizes a small table
	if m.Bytes() != minSlots*slotSize {
		t.Fatalf("table of %d bytes for 100 records, want the minimum %d", m.Bytes(), minSlots*slotSize)
	}
	m.Reset(1 << 30) // a huge pass is capped by the budget
	if m.Bytes() > 240_000 {
		t.Fatalf("table of %d bytes over the 240,000 budget", m.Bytes())
	}
	room := m.Room()
	for i := range room {
		m.Put(fmt.Appendf(nil, "key-%d", i), int64(i))
	}
	if m.Room() != 0 || m.Len() != room {
		t.Fatalf("after %d puts: room %d, len %d", room, m.Room(), m.Len())
	}
	// A later offset for a known key needs no room.
	m.Put([]byte("key-7"), 1_000_000)
	for i := range room {
		want := int64(i)
		if i == 7 {
			want = 1_000_000
		}
		if got, ok := m.Get(fmt.Appendf(nil, "key-%d", i)); !ok || got != want {
			t.Fatalf("key-%d: %d %v, want %d", i, got, ok, want)
		}
	}
	if _, ok := m.Get([]byte("absent")); ok {
		t.Fatal("found a key never put")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a put past the limit did not panic")
		}
	}()
	m.Put([]byte("one too many"), 1)
}

func TestTxnsAborted(t *testing.T) {
	tx := NewTxns([]kernel.AbortedTxn{{ProducerID: 1, FirstOffset: 10, LastOffset: 20}, {ProducerID: 1, FirstOffset: 30, LastOffset: 35}, {ProducerID: 2, FirstOffset: 0, LastOffset: 5}})
	for _, c := range []struct {
		pid, off int64
		want     bool
	}{{1, 9, false}, {1, 10, true}, {1, 19, true}, {1, 20, false}, {1, 25, false}, {1, 34, true}, {2, 4, true}, {2, 5, false}, {3, 12, false}} {
		if got := tx.Aborted(c.pid, c.off); got != c.want {
			t.Errorf("Aborted(%d, %d) = %v, want %v", c.pid, c.off, got, c.want)
		}
	}
}

// fakeLog is a compact.Log whose dirtiness and pass outcome the test sets.
type fakeLog struct {
	name   string
	ratio  float64
	due    bool
	fail   atomic.Bool
	passes atomic.Int32
	block  chan struct{} // when set, a pass waits for it (or the context)
}

func (f *fakeLog) Name() string { return f.name }

func (f *fakeLog) Cleanable(int64) (Candidate, bool) {
	return Candidate{DirtyRatio: f.ratio, Due: f.due}, f.ratio > 0 || f.due
}

func (f *fakeLog) Clean(ctx context.Context, env *Env) (Result, error) {
	f.passes.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	if f.fail.Load() {
		return Result{}, errors.New("corrupt segment")
	}
	return Result{Stats: Stats{BytesRead: 100, BytesWritten: 10, RecordsRemoved: 3}}, nil
}

func TestCleanerPicksDirtiestAndDueFirst(t *testing.T) {
	c := NewCleaner(Config{Threads: 1, BackoffMs: 10, DedupeBufferSize: 1 << 20}, nil, nil)
	a, b, d := &fakeLog{name: "a-0", ratio: 0.6}, &fakeLog{name: "b-0", ratio: 0.9}, &fakeLog{name: "d-0", ratio: 0.1, due: true}
	logs := []Log{a, b, d}
	if got := c.pick(logs); got != d {
		t.Fatalf("picked %v, want the due log", got.Name())
	}
	if got := c.pick(logs); got != b {
		t.Fatalf("picked %v, want the dirtiest of the rest", got.Name())
	}
	if got := c.pick(logs); got != a {
		t.Fatalf("picked %v, want the last one not busy", got.Name())
	}
	if got := c.pick(logs); got != nil {
		t.Fatalf("picked %v while every log is busy", got.Name())
	}
}

// A log whose pass fails is counted, reported uncleanable in /metrics and skipped for
// a while; the others go on being cleaned, and Stop returns with a pass in progress.
func TestCleanerSkipsFailingLogs(t *testing.T) {
	c := NewCleaner(Config{Threads: 2, BackoffMs: 5, DedupeBufferSize: 1 << 20}, nil, nil)
	bad, good := &fakeLog{name: "bad-0", ratio: 0.9}, &fakeLog{name: "good-0", ratio: 0.5}
	bad.fail.Store(true)
	stuck := &fakeLog{name: "stuck-0", ratio: 0.1, block: make(chan struct{})}
	var mu sync.Mutex
	logs := []Log{bad, good, stuck}
	mt := kernel.NewMetrics()
	RegisterMetrics(mt, c, func() []Log { mu.Lock(); defer mu.Unlock(); return logs })
	c.Start(func() []Log { mu.Lock(); defer mu.Unlock(); return logs })
	deadline := time.Now().Add(10 * time.Second)
	for good.passes.Load() < 5 || stuck.passes.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("good log cleaned %d times, stuck %d", good.passes.Load(), stuck.passes.Load())
		}
		time.Sleep(time.Millisecond) // the threads run on their own; nothing to wait on
	}
	c.Stop()
	if n := bad.passes.Load(); n != 1 {
		t.Fatalf("failing log tried %d times, want once (then skipped for ten backoffs of at least 1 s)", n)
	}
	tot := c.Totals()
	if tot.Errors != 1 || tot.Passes < 6 || tot.BytesRead < 500 {
		t.Fatalf("totals %+v", tot)
	}
	var sb strings.Builder
	mt.WriteText(&sb)
	for _, want := range []string{
		`sluice_log_cleaner_uncleanable{partition="0",topic="bad"} 1`,
		`sluice_log_cleaner_uncleanable{partition="0",topic="good"} 0`,
		`sluice_log_cleaner_errors_total 1`,
		`sluice_log_cleaner_dirty_ratio{partition="0",topic="good"} 0.5`,
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, sb.String())
		}
	}
	// A log that went away is forgotten by the next pick.
	mu.Lock()
	logs = []Log{good}
	mu.Unlock()
	c.pick(logs)
	c.mu.Lock()
	n := len(c.last) + len(c.failed)
	c.mu.Unlock()
	if n > 1 {
		t.Fatalf("%d entries kept for logs that are gone", n)
	}
}

func TestSplitName(t *testing.T) {
	for in, want := range map[string][2]string{
		"orders-3":     {"orders", "3"},
		"a-b-c-12":     {"a-b-c", "12"},
		"no_partition": {"no_partition", ""},
	} {
		if topic, part := splitName(in); topic != want[0] || part != want[1] {
			t.Errorf("splitName(%q) = %q, %q, want %q", in, topic, part, want)
		}
	}
}
