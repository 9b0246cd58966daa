package segmentlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// openBudgetStore opens a store on dir that keeps at most budget segment files open.
func openBudgetStore(t *testing.T, dir string, budget int) *Store {
	t.Helper()
	s := openTestStore(t, dir)
	s.SetOpenFilesBudget(budget)
	return s
}

// noTails makes every read of s go to the segment files (tests of file pins: tails
// would answer reads of new bytes from memory).
func noTails(s *Store) { s.files.tails.left.Store(0) }

// TestConformanceTinyFileBudget runs the storage conformance suite with four open
// files at most, so nearly every operation reopens its files through the cache.
func TestConformanceTinyFileBudget(t *testing.T) {
	storagetest.Run(t,
		func(t *testing.T) kernel.Storage { return openBudgetStore(t, t.TempDir(), 4) },
		storagetest.WithReopen(func(t *testing.T, old kernel.Storage) kernel.Storage {
			s := old.(*Store)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openBudgetStore(t, s.dir, 4)
		}))
}

// readAll reads l from offset 0 to its end, returns the bytes and checks the batches'
// offsets are contiguous.
func readAll(t *testing.T, l kernel.Log) []byte {
	t.Helper()
	var out []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rr, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		b, err := storagetest.ReadAll(rr)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
		bs, err := storagetest.ParseAll(b)
		if err != nil || len(bs) == 0 {
			t.Fatalf("parse at %d: %v (%d batches)", off, err, len(bs))
		}
		if bs[0].Base != off {
			t.Fatalf("read at %d starts at %d", off, bs[0].Base)
		}
		off = bs[len(bs)-1].Last + 1
		out = append(out, b...)
	}
	return out
}

// TestManyPartitionsWithinFileBudget appends to and reads from many more partitions
// than the budget has files for, before and after a restart.
func TestManyPartitionsWithinFileBudget(t *testing.T) {
	const parts, budget = 200, 16
	dir := t.TempDir()
	s := openBudgetStore(t, dir, budget)
	cfg := storagetest.DefaultConfig()
	var want [parts][]byte
	logs := make([]kernel.Log, parts)
	for i := range logs {
		logs[i] = mustOpen(t, s, kernel.TopicPartition{Topic: "many", Partition: int32(i)}, [16]byte{1}, cfg)
		if n := s.OpenFiles(); n > budget {
			t.Fatalf("%d files open after opening %d partitions, budget %d", n, i+1, budget)
		}
	}
	for round := range 3 {
		for i, l := range logs {
			b := storagetest.Batch(0, int64(1000+round), 1+i%3, 20)
			res, err := l.AppendLeader(b)
			if err != nil {
				t.Fatalf("append to %d: %v", i, err)
			}
			want[i] = append(want[i], b...)
			_ = res
		}
	}
	for i, l := range logs {
		if got := readAll(t, l); !bytes.Equal(got, want[i]) {
			t.Fatalf("partition %d reads %d bytes, want %d", i, len(got), len(want[i]))
		}
	}
	if n := s.OpenFiles(); n > budget {
		t.Fatalf("%d files open, budget %d", n, budget)
	}
	if s.files.evictions.Load() == 0 {
		t.Fatal("no file was closed for the budget")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBudgetStore(t, dir, budget)
	for i := range logs {
		l := mustOpen(t, s, kernel.TopicPartition{Topic: "many", Partition: int32(i)}, [16]byte{1}, cfg)
		if got := readAll(t, l); !bytes.Equal(got, want[i]) {
			t.Fatalf("after restart partition %d reads %d bytes, want %d", i, len(got), len(want[i]))
		}
	}
	if n := s.OpenFiles(); n > budget {
		t.Fatalf("%d files open after restart, budget %d", n, budget)
	}
}

// TestTinySegmentsWithinFileBudget is segment.bytes=100: every batch rolls a segment,
// so the log has thousands of sealed segments; the open files stay within the budget
// and the whole log reads back.
func TestTinySegmentsWithinFileBudget(t *testing.T) {
	const batchesN, budget = 2000, 32
	s := openBudgetStore(t, t.TempDir(), budget)
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 100
	l := mustOpen(t, s, rtp, [16]byte{2}, cfg)
	var want []byte
	for i := range batchesN {
		b := storagetest.Batch(0, int64(i), 1, 40)
		if _, err := l.AppendLeader(b); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		want = append(want, b...)
		if n := s.OpenFiles(); n > budget {
			t.Fatalf("%d files open after %d batches, budget %d", n, i+1, budget)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := len(l.(*Log).segs); got < batchesN/2 {
		t.Fatalf("%d segments, want one per batch or so", got)
	}
	if got := readAll(t, l); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
	if n := s.OpenFiles(); n > budget {
		t.Fatalf("%d files open after reading, budget %d", n, budget)
	}
}

// TestPinnedReadSurvivesEviction holds a ReadResult (as a fetch response waiting for
// sendfile) while other partitions churn through the cache: its descriptor stays open
// and still reads the bytes it pointed at.
func TestPinnedReadSurvivesEviction(t *testing.T) {
	const budget = 8
	s := openBudgetStore(t, t.TempDir(), budget)
	noTails(s)
	cfg := storagetest.DefaultConfig()
	l := mustOpen(t, s, rtp, [16]byte{3}, cfg)
	batch := storagetest.Batch(0, 7, 3, 50)
	if _, err := l.AppendLeader(batch); err != nil {
		t.Fatal(err)
	}
	rr, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil || len(rr.Chunks) != 1 {
		t.Fatalf("read: %v, %d chunks", err, len(rr.Chunks))
	}
	for i := range 50 {
		o := mustOpen(t, s, kernel.TopicPartition{Topic: "churn", Partition: int32(i)}, [16]byte{4}, cfg)
		if _, err := o.AppendLeader(storagetest.Batch(0, 1, 1, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if s.files.evictions.Load() == 0 {
		t.Fatal("nothing was evicted")
	}
	c := rr.Chunks[0]
	got := make([]byte, c.N)
	if _, err := c.File.ReadAt(got, c.Off); err != nil {
		t.Fatalf("pinned descriptor: %v", err)
	}
	if !bytes.Equal(got, batch) {
		t.Fatal("pinned descriptor reads other bytes")
	}
	rr.Release()
	if got := readAll(t, l); !bytes.Equal(got, batch) {
		t.Fatal("log reads other bytes after release")
	}
}

// TestHeldReadsCopyPastHalfTheBudget holds one ReadResult per partition, as a fetch
// over many partitions does until its response is written: results pin descriptors up
// to half the budget (at least maxPinned), later ones carry copied bytes, so the
// descriptors stay bounded however many partitions one fetch names.
func TestHeldReadsCopyPastHalfTheBudget(t *testing.T) {
	const parts, budget = 300, 200 // held pins limited to 100
	s := openBudgetStore(t, t.TempDir(), budget)
	noTails(s)
	cfg := storagetest.DefaultConfig()
	want := make([][]byte, parts)
	logs := make([]kernel.Log, parts)
	for i := range logs {
		logs[i] = mustOpen(t, s, kernel.TopicPartition{Topic: "held", Partition: int32(i)}, [16]byte{6}, cfg)
		want[i] = storagetest.Batch(0, int64(i), 1, 30)
		if _, err := logs[i].AppendLeader(want[i]); err != nil {
			t.Fatal(err)
		}
	}
	held := make([]kernel.ReadResult, parts)
	copied := 0
	for i, l := range logs {
		rr, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
		if err != nil || len(rr.Chunks) != 1 {
			t.Fatalf("read %d: %v, %d chunks", i, err, len(rr.Chunks))
		}
		held[i] = rr
		if rr.Chunks[0].File == nil {
			copied++
		}
		if n := s.files.heldByReads.Load(); n > budget/2 {
			t.Fatalf("%d pins held by results after %d reads, limit %d", n, i+1, budget/2)
		}
	}
	if copied != parts-budget/2 {
		t.Fatalf("%d results copied, want %d", copied, parts-budget/2)
	}
	if n := s.OpenFiles(); n > budget {
		t.Fatalf("%d files open with every result held, budget %d", n, budget)
	}
	for i, rr := range held {
		got, err := storagetest.ReadAll(rr)
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("partition %d reads %d bytes (%v), want its batch", i, len(got), err)
		}
		rr.Release()
	}
	if n := s.files.heldByReads.Load(); n != 0 {
		t.Fatalf("%d pins still counted after every release", n)
	}
	// With the pins given back, reads pin (zero-copy) again.
	rr, err := logs[0].Read(0, 1<<20, logs[0].LogEndOffset(), true)
	if err != nil || len(rr.Chunks) != 1 || rr.Chunks[0].File == nil {
		t.Fatalf("read after release: %v, %+v", err, rr.Chunks)
	}
	rr.Release()
}

// TestFileCacheHammer runs appends, reads (holding some results a while) and flushes
// on many partitions from several goroutines with a budget far below what they use.
func TestFileCacheHammer(t *testing.T) {
	const parts, budget, workers, loops = 40, 6, 6, 300
	s := openBudgetStore(t, t.TempDir(), budget)
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 2048
	logs := make([]kernel.Log, parts)
	for i := range logs {
		logs[i] = mustOpen(t, s, kernel.TopicPartition{Topic: "hammer", Partition: int32(i)}, [16]byte{5}, cfg)
	}
	var mu sync.Mutex
	appended := make([]int64, parts) // records appended per partition
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			var held []kernel.ReadResult
			defer func() {
				for _, rr := range held {
					rr.Release()
				}
			}()
			for range loops {
				i := r.IntN(parts)
				l := logs[i]
				switch r.IntN(4) {
				case 0, 1:
					mu.Lock() // one appender per log at a time keeps counts exact
					_, err := l.AppendLeader(storagetest.Batch(0, 1, 2, 30))
					if err == nil {
						appended[i] += 2
					}
					mu.Unlock()
					if err != nil {
						errs <- fmt.Errorf("append %d: %w", i, err)
						return
					}
				case 2:
					leo := l.LogEndOffset()
					if leo == 0 {
						continue
					}
					rr, err := l.Read(int64(r.IntN(int(leo))), 4096, leo, true)
					if err != nil {
						errs <- fmt.Errorf("read %d: %w", i, err)
						return
					}
					b, err := storagetest.ReadAll(rr)
					if err == nil {
						_, err = storagetest.ParseAll(b)
					}
					if err != nil {
						rr.Release()
						errs <- fmt.Errorf("read %d: %w", i, err)
						return
					}
					if len(held) < 3 {
						held = append(held, rr)
					} else {
						rr.Release()
					}
				case 3:
					if err := l.Flush(); err != nil {
						errs <- fmt.Errorf("flush %d: %w", i, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, l := range logs {
		if l.LogEndOffset() != appended[i] {
			t.Fatalf("partition %d: LEO %d, appended %d", i, l.LogEndOffset(), appended[i])
		}
		readAll(t, l)
	}
	if n := s.OpenFiles(); n > budget {
		t.Fatalf("%d files open at rest, budget %d", n, budget)
	}
}

// TestLongTopicNameRemoveAndRecreate: a 249-character topic (Kafka's longest) is
// removed and re-created, and re-created while this store missed the deletion.
func TestLongTopicNameRemoveAndRecreate(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	tp := kernel.TopicPartition{Topic: string(bytes.Repeat([]byte("t"), 249)), Partition: 1}
	cfg := storagetest.DefaultConfig()
	l := mustOpen(t, s, tp, [16]byte{1}, cfg)
	if _, err := l.AppendLeader(storagetest.Batch(0, 1, 3, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(tp); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, tp.String())); !os.IsNotExist(err) {
		t.Fatalf("partition directory still there: %v", err)
	}
	l = mustOpen(t, s, tp, [16]byte{2}, cfg)
	if l.LogEndOffset() != 0 {
		t.Fatalf("re-created topic starts at %d", l.LogEndOffset())
	}
	if _, err := l.AppendLeader(storagetest.Batch(0, 1, 2, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Re-created again while the store was down: the old directory is moved aside.
	s = openTestStore(t, dir)
	l = mustOpen(t, s, tp, [16]byte{3}, cfg)
	if l.LogEndOffset() != 0 {
		t.Fatalf("topic re-created while down starts at %d", l.LogEndOffset())
	}
	if _, err := os.Stat(filepath.Join(dir, strayDirName([16]byte{2}, tp.Partition))); err != nil {
		t.Fatalf("old incarnation not kept aside: %v", err)
	}
	if _, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(tp); err != nil {
		t.Fatalf("remove again: %v", err)
	}
}
