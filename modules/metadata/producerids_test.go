package metadata

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
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
	for _, n := range []int32{1, 1000, 5, maxProducerIDBlock, 1} {
		if got := allocate(t, m, n); got != want {
			t.Fatalf("block of %d starts at %d, want %d", n, got, want)
		}
		want += int64(n)
	}
	if got := m.hub.state().nextProducerID; got != want {
		t.Fatalf("counter %d, want %d", got, want)
	}
}

func TestAllocateProducerIDsInvalid(t *testing.T) {
	m, _ := startModule(t, t.TempDir())
	allocate(t, m, 3)
	before := m.Image().Version
	for _, n := range []int32{0, -1, math.MinInt32, maxProducerIDBlock + 1, math.MaxInt32} {
		if _, err := m.AllocateProducerIDs(context.Background(), n); !errors.Is(err, ErrInvalidProducerIDCount) {
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
	s := emptyState()
	s, _ = s.apply(1, &producerIDsRecord{BrokerID: 1, Count: 7})
	for _, r := range []*producerIDsRecord{
		{BrokerID: 1, Count: 0},
		{BrokerID: 1, Count: -5},
		{BrokerID: 1, Count: maxProducerIDBlock + 1},
		{BrokerID: -1, Count: 1},
	} {
		next, err := s.apply(2, r)
		if !errors.Is(err, errInvalidEntry) || next.nextProducerID != 7 {
			t.Errorf("%+v: err %v, counter %d", r, err, next.nextProducerID)
		}
	}
	// The counter never wraps to negative ids.
	s.nextProducerID = math.MaxInt64 - 5
	if next, err := s.apply(3, &producerIDsRecord{BrokerID: 1, Count: 10}); !errors.Is(err, errProducerIDsExhausted) || next.nextProducerID != math.MaxInt64-5 {
		t.Errorf("overflow: err %v, counter %d", err, next.nextProducerID)
	}
	if next, err := s.apply(3, &producerIDsRecord{BrokerID: 1, Count: 5}); err != nil || next.nextProducerID != math.MaxInt64 {
		t.Errorf("last block: err %v, counter %d", err, next.nextProducerID)
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
	if got := m.hub.state().nextProducerID; got != next || len(blocks) != workers*each {
		t.Fatalf("counter %d, covered %d in %d blocks", got, next, len(blocks))
	}
}

// TestAllocateProducerIDsRestart restarts the module, replaying the log or restoring a
// snapshot: the counter carries on where it was, so no id is handed out twice.
func TestAllocateProducerIDsRestart(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		name := "log"
		if snapshot {
			name = "snapshot"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			m, _ := startModule(t, dir, func(m *Module, _ *fakeContext) { m.SnapshotThreshold = 1 })
			allocate(t, m, 10)
			allocate(t, m, 20)
			if snapshot {
				if err := m.raft.Load().Snapshot().Error(); err != nil {
					t.Fatalf("snapshot: %v", err)
				}
				if got := latestSnapshot(t, m).nextProducerID; got != 30 {
					t.Fatalf("snapshot holds %d, want 30", got)
				}
				if got := allocate(t, m, 5); got != 30 { // after the snapshot: from the log
					t.Fatalf("block at %d, want 30", got)
				}
			}
			want := m.hub.state().nextProducerID
			stopModule(t, m)

			m2, _ := startModule(t, dir)
			if got := m2.hub.state().nextProducerID; got != want {
				t.Fatalf("after restart the counter is %d, want %d", got, want)
			}
			if got := allocate(t, m2, 1); got != want {
				t.Fatalf("after restart the block starts at %d, want %d", got, want)
			}
		})
	}
}

func TestSnapshotFormat3(t *testing.T) {
	s, _ := emptyState().apply(1, &producerIDsRecord{BrokerID: 1, Count: 42})
	b, err := encodeSnapshot(s)
	if err != nil || b[0] != snapshotFormatV3 {
		t.Fatalf("producer ids: format %d, %v", b[0], err)
	}
	r, err := decodeSnapshot(bytes.NewReader(b))
	if err != nil || r.nextProducerID != 42 {
		t.Fatalf("decode format 3: %+v %v", r, err)
	}
	// Extensions and producer ids together: format 3 keeps both.
	s, _ = s.apply(2, &extensionRecord{Namespace: "a", Key: "k", Value: []byte("v")})
	if b, err = encodeSnapshot(s); err != nil || b[0] != snapshotFormatV3 {
		t.Fatalf("both: format %d, %v", b[0], err)
	}
	if r, err = decodeSnapshot(bytes.NewReader(b)); err != nil || r.nextProducerID != 42 || string(r.img.Extension("a", "k")) != "v" {
		t.Fatalf("decode both: %+v %v", r, err)
	}
	// Older formats predate ProducerIDs entries: they load with the counter at 0 (and
	// a field they did not have is ignored, as an older broker would).
	for _, old := range [][]byte{
		append([]byte{snapshotFormatV1}, `{"version":7,"cluster_id":"c","controller_id":1,"brokers":[],"topics":[]}`+"\n"...),
		append([]byte{snapshotFormatV2}, `{"version":7,"cluster_id":"c","controller_id":1,"brokers":[],"topics":[],"extensions":{"a":{"k":"dg=="}}}`+"\n"...),
		append([]byte{snapshotFormatV2}, `{"version":7,"cluster_id":"c","controller_id":1,"brokers":[],"topics":[],"next_producer_id":9}`+"\n"...),
	} {
		r, err := decodeSnapshot(bytes.NewReader(old))
		if err != nil || r.img.Version != 7 || r.nextProducerID != 0 {
			t.Fatalf("decode format %d: %+v %v", old[0], r, err)
		}
	}
	// Without allocations the older formats are still written.
	if b, _ := encodeSnapshot(emptyState()); b[0] != snapshotFormatV1 {
		t.Errorf("empty state: format %d", b[0])
	}
	bad := append([]byte{snapshotFormatV3}, `{"version":7,"brokers":[],"topics":[],"next_producer_id":-1}`...)
	if _, err := decodeSnapshot(bytes.NewReader(bad)); !errors.Is(err, ErrBadRecord) {
		t.Errorf("negative counter: %v", err)
	}
}
