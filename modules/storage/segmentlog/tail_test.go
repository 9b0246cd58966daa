package segmentlog

import (
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// readTail reads l from offset and returns how many chunks came from files and from
// tails, and the bytes.
func readTail(t *testing.T, l kernel.Log, offset int64) (fileChunks, tailChunks int, b []byte) {
	t.Helper()
	rr, err := l.Read(offset, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rr.Chunks {
		if c.File != nil {
			fileChunks++
		} else {
			tailChunks++
		}
	}
	if b, err = storagetest.ReadAll(rr); err != nil {
		t.Fatal(err)
	}
	return fileChunks, tailChunks, b
}

// Reads of just-appended bytes come from the tail, pin nothing and are the bytes the
// file holds; a truncation drops the tail, so re-appended offsets are read as they are
// now; sealing and closing give the budget back.
func TestTailServesNewBytes(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	cfg := storagetest.DefaultConfig()
	l := mustOpen(t, s, rtp, [16]byte{}, cfg)
	fill(t, l, 3) // offsets 0..5
	files, tails, b := readTail(t, l, 2)
	if files != 0 || tails != 1 {
		t.Fatalf("read of new bytes: %d file chunks, %d tail chunks; want 0, 1", files, tails)
	}
	bs, err := storagetest.ParseAll(b)
	if err != nil || len(bs) != 2 || bs[0].Base != 2 || bs[1].Last != 5 {
		t.Fatalf("tail read: %+v, %v", bs, err)
	}
	// The same range through the file, for the bytes.
	active := l.(*Log).active()
	fromFile := make([]byte, len(b))
	if _, err := active.log.ReadAt(fromFile, active.size-int64(len(b))); err != nil || string(fromFile) != string(b) {
		t.Fatalf("tail bytes differ from the file's (%v)", err)
	}
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendLeader(storagetest.Batch(0, 5000, 3, 30)); err != nil { // offsets 4..6, new timestamps
		t.Fatal(err)
	}
	_, _, b = readTail(t, l, 4)
	if bs, err := storagetest.ParseAll(b); err != nil || len(bs) != 1 || bs[0].Base != 4 || bs[0].Last != 6 || bs[0].MaxTs != 5002 {
		t.Fatalf("after truncation and a new append: %+v, %v", bs, err)
	}
	if left := s.files.tails.left.Load(); left >= defaultTailBudget {
		t.Fatalf("budget left %d: the tail reserved nothing", left)
	}
	lg := l.(*Log)
	lg.mu.Lock()
	err = lg.roll(lg.leo.Load())
	lg.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if left := s.files.tails.left.Load(); left != defaultTailBudget {
		t.Fatalf("budget left %d after the roll sealed the only tail, want %d", left, defaultTailBudget)
	}
	if files, tails, _ := readTail(t, l, 0); files == 0 || tails != 0 {
		t.Fatalf("sealed segment read: %d file chunks, %d tail chunks", files, tails)
	}
}

// With the budget spent, reads go to the file and are still right; big appends are
// never kept.
func TestTailBudgetSpent(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	s.files.tails.left.Store(tailMin - 1)
	l := mustOpen(t, s, rtp, [16]byte{}, storagetest.DefaultConfig())
	fill(t, l, 2)
	if files, tails, b := readTail(t, l, 0); files != 1 || tails != 0 || len(b) == 0 {
		t.Fatalf("spent budget: %d file chunks, %d tail chunks, %d bytes", files, tails, len(b))
	}
	s2 := openTestStore(t, t.TempDir())
	l2 := mustOpen(t, s2, rtp, [16]byte{}, storagetest.DefaultConfig())
	if _, err := l2.AppendLeader(storagetest.Batch(0, 1000, 1, tailMax)); err != nil {
		t.Fatal(err)
	}
	if files, tails, _ := readTail(t, l2, 0); files != 1 || tails != 0 || s2.files.tails.left.Load() != defaultTailBudget {
		t.Fatalf("append bigger than a tail: %d file chunks, %d tail chunks, budget left %d", files, tails, s2.files.tails.left.Load())
	}
}
