package metadata

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

func allocate(t *testing.T, m *Module, count int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := m.AllocateProducerIDs(ctx, count)
	if err != nil {
		t.Fatalf("allocate %d: %v", count, err)
	}
	return first
}

func TestAllocateProducerIDsConsecutive(t *testing.T) {
	m, _ := startModule(t, t.TempDir())
	var alloc kernel.ProducerIDAllocator = m // found by type assertion, as the txn module does
	_ = alloc
	want := int64(0)
	for _, n := range []int32{1, 1000, 5, image.MaxProducerIDBlock, 1} {
		if got := allocate(t, m, n); got != want {
			t.Fatalf("block of %d starts at %d, want %d", n, got, want)
		}
		want += int64(n)
	}
	if got := m.node.hub.state().NextProducerID; got != want {
		t.Fatalf("counter %d, want %d", got, want)
	}
}

func TestAllocateProducerIDsInvalid(t *testing.T) {
	m, _ := startModule(t, t.TempDir())
	allocate(t, m, 3)
	before := m.Image().Version
	for _, n := range []int32{0, -1, math.MinInt32, image.MaxProducerIDBlock + 1, math.MaxInt32} {
		if _, err := m.AllocateProducerIDs(context.Background(), n); !errors.Is(err, image.ErrInvalidProducerIDCount) {
			t.Errorf("count %d: %v", n, err)
		}
	}
	if m.Image().Version != before {
		t.Error("an invalid count reached the log")
	}
	if got := allocate(t, m, 1); got != 3 {
		t.Errorf("next block at %d, want 3", got)
	}

	// Apply refuses the same entries (a broker on other code could propose them), and
	// a refused entry leaves the counter where it was.
	s := image.EmptyState()
	s, _ = s.Apply(1, &image.ProducerIDsRecord{BrokerID: 1, Count: 7})
	for _, r := range []*image.ProducerIDsRecord{
		{BrokerID: 1, Count: 0},
		{BrokerID: 1, Count: -5},
		{BrokerID: 1, Count: image.MaxProducerIDBlock + 1},
		{BrokerID: -1, Count: 1},
	} {
		next, err := s.Apply(2, r)
		if !errors.Is(err, image.ErrInvalidEntry) || next.NextProducerID != 7 {
			t.Errorf("%+v: err %v, counter %d", r, err, next.NextProducerID)
		}
	}
	// The counter never wraps to negative ids.
	s.NextProducerID = math.MaxInt64 - 5
	if next, err := s.Apply(3, &image.ProducerIDsRecord{BrokerID: 1, Count: 10}); !errors.Is(err, image.ErrProducerIDsExhausted) || next.NextProducerID != math.MaxInt64-5 {
		t.Errorf("overflow: err %v, counter %d", err, next.NextProducerID)
	}
	if next, err := s.Apply(3, &image.ProducerIDsRecord{BrokerID: 1, Count: 5}); err != nil || next.NextProducerID != math.MaxInt64 {
		t.Errorf("last block: err %v, counter %d", err, next.NextProducerID)
	}
}

// TestAllocateProducerIDsConcurrent allocates from many goroutines at once: the blocks
// never overlap and together cover [0, total) exactly.
func TestAllocateProducerIDsConcurrent(t *testing.T) {
	m, _ := startModule(t, t.TempDir())
	const workers, each = 8, 10
	type block struct{ first, n int64 }
	var (
		mu     sync.Mutex
		blocks []block
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := int32(1 + (w*each+i)%7)
				first, err := m.AllocateProducerIDs(ctx, n)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				blocks = append(blocks, block{first, int64(n)})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.SortFunc(blocks, func(a, b block) int { return cmp.Compare(a.first, b.first) })
	next := int64(0)
	for _, b := range blocks {
		if b.first != next {
			t.Fatalf("block %+v, want it to start at %d (blocks %v)", b, next, blocks)
		}
		next += b.n
	}
	if got := m.node.hub.state().NextProducerID; got != next || len(blocks) != workers*each {
		t.Fatalf("counter %d, covered %d in %d blocks", got, next, len(blocks))
	}
}

// TestAllocateProducerIDsRestart restarts the module, replaying the log or restoring a
// snapshot: the counter carries on where it was, so no id is handed out twice.
func TestAllocateProducerIDsRestart(t *testing.T) {
	logAndSnapshot(t, func(t *testing.T, dir string, m *Module, snapshot bool) {
		allocate(t, m, 10)
		allocate(t, m, 20)
		if snapshot {
			takeSnapshot(t, m)
			if got := latestSnapshot(t, m).NextProducerID; got != 30 {
				t.Fatalf("snapshot holds %d, want 30", got)
			}
			if got := allocate(t, m, 5); got != 30 { // after the snapshot: from the log
				t.Fatalf("block at %d, want 30", got)
			}
		}
		want := m.node.hub.state().NextProducerID
		stopModule(t, m)

		m2, _ := startModule(t, dir)
		if got := m2.node.hub.state().NextProducerID; got != want {
			t.Fatalf("after restart the counter is %d, want %d", got, want)
		}
		if got := allocate(t, m2, 1); got != want {
			t.Fatalf("after restart the block starts at %d, want %d", got, want)
		}
	})
}
