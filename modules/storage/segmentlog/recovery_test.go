package segmentlog

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

var rtp = kernel.TopicPartition{Topic: "recover", Partition: 3}

// otherTP is a second partition for the tests that need two.
var otherTP = kernel.TopicPartition{Topic: "other", Partition: 0}

// crash closes every file of the store without flushing, sealing, checkpointing or
// writing the clean-shutdown marker: what a killed process leaves behind (the page
// cache survives, so all written bytes are there; damage is added by the test).
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.logs {
		l.mu.Lock()
		l.closed = true
		for _, sg := range l.segs {
			sg.unref()
		}
		l.mu.Unlock()
	}
	s.closed = true
}

// openRaw opens a store that the test does not close at cleanup.
func openRaw(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := OpenStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustOpen opens tp's log in s, failing the test on an error.
func mustOpen(t *testing.T, s *Store, tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig) kernel.Log {
	t.Helper()
	l, err := s.Open(tp, topicID, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func recoveryConfig() kernel.LogConfig {
	cfg := storagetest.DefaultConfig()
	cfg.IndexIntervalBytes = 1 // an index entry for (almost) every batch
	cfg.SegmentBytes = 4 * int64(len(storagetest.Batch(0, 0, 2, 30)))
	cfg.SegmentIndexBytes = 4096
	return cfg
}

// fill appends n batches of 2 records (timestamps 1000+offset) and returns the batches'
// base offsets.
func fill(t *testing.T, l kernel.Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := l.AppendLeader(storagetest.Batch(0, 1000+int64(2*i), 2, 30)); err != nil {
			t.Fatal(err)
		}
	}
}

// openPair opens a raw store on dir and in it rtp and otherTP, filled with n and m
// batches of 2 records.
func openPair(t *testing.T, dir string, n, m int) (s *Store, l, lo kernel.Log) {
	t.Helper()
	s = openRaw(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	lo = mustOpen(t, s, otherTP, [16]byte{}, recoveryConfig())
	fill(t, l, n)
	fill(t, lo, m)
	return s, l, lo
}

// openTrimmed opens a raw store on dir and returns it with rtp open in it, with topic id id, holding 20
// records in segments 0, 8 and 16 of which those before 9 are deleted (which
// checkpoints the log start).
func openTrimmed(t *testing.T, dir string, id [16]byte) *Store {
	t.Helper()
	s := openRaw(t, dir)
	l := mustOpen(t, s, rtp, id, recoveryConfig())
	fill(t, l, 10)
	if err := l.DeleteRecordsBefore(9); err != nil {
		t.Fatal(err)
	}
	return s
}

// reopenCut opens a store on dir again after a crash and checks that recovery cut rtp
// at its damaged batch, at leo, keeping the records before it intact.
func reopenCut(t *testing.T, dir string, leo int64) {
	t.Helper()
	l := mustOpen(t, openTestStore(t, dir), rtp, [16]byte{}, recoveryConfig())
	if l.LogEndOffset() != leo {
		t.Errorf("LEO after recovery %d, want %d (cut at the damaged batch)", l.LogEndOffset(), leo)
	}
	checkLog(t, l, 0)
}

// mustReadFile returns the contents of the file at path, failing the test if it cannot.
func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkRecovered checks that l ends at leo and that its records from start on and its
// indexes agree with what was written.
func checkRecovered(t *testing.T, l kernel.Log, start, leo int64) {
	t.Helper()
	if l.LogEndOffset() != leo {
		t.Fatalf("LEO %d, want %d", l.LogEndOffset(), leo)
	}
	checkLog(t, l, start)
	checkIndexes(t, l.(*Log))
}

func segFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTornWriteRecovery(t *testing.T) {
	batchSize := int64(len(storagetest.Batch(0, 0, 2, 30)))
	tests := []struct {
		name    string
		clean   bool // shut down cleanly before the damage
		damage  func(t *testing.T, pdir string)
		wantLEO int64 // 10 batches of 2 records: 20 when nothing is lost
	}{
		{"no damage", false, func(*testing.T, string) {}, 20},
		{"tail cut mid-batch", false, func(t *testing.T, pdir string) {
			logs := segFiles(t, pdir, logSuffix)
			last := logs[len(logs)-1]
			fi, _ := os.Stat(last)
			if err := os.Truncate(last, fi.Size()-batchSize/2); err != nil {
				t.Fatal(err)
			}
		}, 18},
		{"tail cut inside the header", false, func(t *testing.T, pdir string) {
			logs := segFiles(t, pdir, logSuffix)
			last := logs[len(logs)-1]
			fi, _ := os.Stat(last)
			if err := os.Truncate(last, fi.Size()-batchSize+20); err != nil {
				t.Fatal(err)
			}
		}, 18},
		{"garbled last batch", false, func(t *testing.T, pdir string) {
			logs := segFiles(t, pdir, logSuffix)
			garble(t, logs[len(logs)-1], -10)
		}, 18},
		{"zeroed tail (preallocated then lost)", false, func(t *testing.T, pdir string) {
			logs := segFiles(t, pdir, logSuffix)
			f, err := os.OpenFile(logs[len(logs)-1], os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(make([]byte, 100))
			f.Close()
		}, 20},
		{"max length prefix in first segment", false, func(t *testing.T, pdir string) {
			logs := segFiles(t, pdir, logSuffix)
			f, err := os.OpenFile(logs[0], os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], 0x7fffffff)
			f.WriteAt(b[:], batchSize+recordbatch.OffBatchLength) // second batch
			f.Close()
		}, 2},
		{"garbled offset index", false, func(t *testing.T, pdir string) {
			for _, p := range segFiles(t, pdir, indexSuffix) {
				garble(t, p, 3)
			}
		}, 20},
		{"garbled indexes after clean shutdown", true, func(t *testing.T, pdir string) {
			for _, p := range append(segFiles(t, pdir, indexSuffix), segFiles(t, pdir, timeIndexSuffix)...) {
				garble(t, p, 3)
			}
		}, 20},
		{"index pointing past the end after clean shutdown", true, func(t *testing.T, pdir string) {
			p := segFiles(t, pdir, indexSuffix)[0]
			b, _ := os.ReadFile(p)
			binary.BigEndian.PutUint32(b[len(b)-4:], 1<<30)
			os.WriteFile(p, b, 0o644)
		}, 20},
		{"missing indexes after clean shutdown", true, func(t *testing.T, pdir string) {
			for _, p := range append(segFiles(t, pdir, indexSuffix), segFiles(t, pdir, timeIndexSuffix)...) {
				os.Remove(p)
			}
		}, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openRaw(t, dir)
			l := mustOpen(t, s, rtp, [16]byte{9}, recoveryConfig())
			fill(t, l, 10)
			if tc.clean {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				crash(t, s)
			}
			pdir := filepath.Join(dir, rtp.String())
			tc.damage(t, pdir)

			s = openTestStore(t, dir)
			l = mustOpen(t, s, rtp, [16]byte{9}, recoveryConfig())
			if got := l.LogEndOffset(); got != tc.wantLEO {
				t.Fatalf("LEO %d after recovery, want %d", got, tc.wantLEO)
			}
			checkLog(t, l, 0)
			checkIndexes(t, l.(*Log))
			res, err := l.AppendLeader(storagetest.Batch(0, 9999, 2, 30))
			if err != nil || res.BaseOffset != tc.wantLEO {
				t.Fatalf("append after recovery: %+v %v", res, err)
			}
			checkLog(t, l, 0)
			checkIndexes(t, l.(*Log))
			if strings.Contains(tc.name, "clean") {
				return
			}
			for _, p := range segFiles(t, pdir, deletedSuffix) {
				t.Errorf("leftover %s", p)
			}
		})
	}
}

func garble(t *testing.T, path string, at int64) {
	t.Helper()
	b := mustReadFile(t, path)
	if len(b) == 0 {
		return
	}
	i := at
	if i < 0 {
		i += int64(len(b))
	}
	i = min(max(i, 0), int64(len(b)-1))
	for j := i; j < min(i+5, int64(len(b))); j++ {
		b[j] ^= 0xa5
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkLog reads every offset and checks it lands in the batch holding it, with whole
// valid batches only.
func checkLog(t *testing.T, l kernel.Log, from int64) {
	t.Helper()
	for off := max(from, l.LogStartOffset()); off < l.LogEndOffset(); off++ {
		rr, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b, err := storagetest.ReadAll(rr)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
		bs, err := storagetest.ParseAll(b)
		if err != nil || len(bs) == 0 {
			t.Fatalf("Read(%d): %v batches, %v", off, len(bs), err)
		}
		if bs[0].Base > off || bs[0].Last < off {
			t.Fatalf("Read(%d) starts with batch %d..%d", off, bs[0].Base, bs[0].Last)
		}
		if last := bs[len(bs)-1].Last; last != l.LogEndOffset()-1 {
			t.Fatalf("Read(%d) ends at %d, log end %d", off, last, l.LogEndOffset())
		}
	}
}

// checkIndexes checks every in-memory and on-disk index entry against the log.
// readIndexOrEmpty reads an index file; an absent one is empty, since
// index files are created at their first entry.
func readIndexOrEmpty(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkIndexes(t *testing.T, l *Log) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	var hdr [recordbatch.HeaderSize]byte
	for _, s := range l.segs {
		rel, pos, clean := parseOffsetIndex(readIndexOrEmpty(t, s.path(indexSuffix)))
		if !clean || len(rel) != s.oidx.entries() {
			t.Fatalf("segment %d: offset index file has %d entries (clean %v), memory %d", s.base, len(rel), clean, s.oidx.entries())
		}
		for i := range rel {
			h, err := s.readHeader(hdr[:], int64(pos[i]))
			if err != nil {
				t.Fatalf("segment %d: index entry %d: %v", s.base, i, err)
			}
			if h.LastOffset() != s.base+int64(rel[i]) {
				t.Fatalf("segment %d: index entry %d says %d, batch is %d..%d", s.base, i, s.base+int64(rel[i]), h.BaseOffset, h.LastOffset())
			}
		}
		ts, trel, tclean := parseTimeIndex(readIndexOrEmpty(t, s.path(timeIndexSuffix)))
		if !tclean || len(ts) != s.tidx.entries() {
			t.Fatalf("segment %d: time index file has %d entries (clean %v), memory %d", s.base, len(ts), tclean, s.tidx.entries())
		}
		for i := range trel {
			if s.base+int64(trel[i]) >= s.next {
				t.Fatalf("segment %d: time index entry %d points past the log", s.base, i)
			}
		}
	}
}

func TestCheckpointsAndMarker(t *testing.T) {
	dir := t.TempDir()
	s := openTrimmed(t, dir, [16]byte{1, 2, 3})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{recoveryCheckpointFile, "0\n1\nrecover 3 20\n"},
		{logStartCheckpointFile, "0\n1\nrecover 3 9\n"},
		{cleanShutdownFile, ""},
		{filepath.Join(rtp.String(), partitionMetadataFile), "version: 0\ntopic_id: AQIDAAAAAAAAAAAAAAAAAA\n"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil || string(b) != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.file, b, err, tc.want)
		}
	}
	// Sealed segments have trimmed indexes; names are 20-digit base offsets.
	for _, p := range segFiles(t, filepath.Join(dir, rtp.String()), logSuffix) {
		if len(filepath.Base(p)) != 24 {
			t.Errorf("segment file name %s", p)
		}
	}
	s = openTestStore(t, dir)
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker not consumed at open: %v", err)
	}
	l := mustOpen(t, s, rtp, [16]byte{1, 2, 3}, recoveryConfig())
	if l.LogStartOffset() != 9 || l.LogEndOffset() != 20 {
		t.Fatalf("start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
}

func TestReadPinsDeletedSegments(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	fill(t, l, 10)
	rr, err := l.Read(0, 1<<20, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(0); err != nil { // deletes every segment under the reader
		t.Fatal(err)
	}
	fill(t, l, 3) // reuses the name of the first segment
	b, err := storagetest.ReadAll(rr)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := storagetest.ParseAll(b)
	if err != nil || len(bs) != 10 || bs[9].Last != 19 {
		t.Fatalf("pinned read after truncate: %d batches, %v", len(bs), err)
	}
	rr.Release()
	rr.Release() // idempotent
	if got := segFiles(t, filepath.Join(s.dir, rtp.String()), deletedSuffix); len(got) != 0 {
		t.Fatalf("deleted files left after release: %v", got)
	}
}

func TestTruncateUnderPinnedRead(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	cfg := recoveryConfig()
	cfg.SegmentBytes = 1 << 20 // one segment
	l := mustOpen(t, s, rtp, [16]byte{}, cfg)
	fill(t, l, 6) // offsets 0..11
	rr, err := l.Read(0, 1<<20, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(6); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 2) // new bytes where the old tail was
	b, err := storagetest.ReadAll(rr)
	rr.Release()
	if err != nil {
		t.Fatal(err)
	}
	bs, err := storagetest.ParseAll(b)
	if err != nil || len(bs) != 6 || bs[5].Last != 11 {
		t.Fatalf("pinned read changed under truncate: %d batches, %v", len(bs), err)
	}
	checkRecovered(t, l, 0, 10)
}

// TestIOErrorFailsOpen: an unreadable segment is an I/O failure, not a torn tail: the
// open fails and nothing is truncated or deleted.
func TestIOErrorFailsOpen(t *testing.T) {
	dir := t.TempDir()
	s := openRaw(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	fill(t, l, 10)
	crash(t, s)
	pdir := filepath.Join(dir, rtp.String())
	logs := segFiles(t, pdir, logSuffix)
	// A directory where a later segment's index should be: reading it fails with EISDIR.
	idx := strings.TrimSuffix(logs[1], logSuffix) + indexSuffix
	if err := os.Remove(idx); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(idx, 0o755); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, dir)
	if _, err := s.Open(rtp, [16]byte{}, recoveryConfig()); err == nil || errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("open over an unreadable index: %v, want an I/O error", err)
	}
	if got := segFiles(t, pdir, logSuffix); len(got) != len(logs) {
		t.Fatalf("segments deleted after an I/O error: %v", got)
	}
}

// A Truncate lowers the recovery point; the checkpoint must say so before the log is
// written again, or a crash makes the next open trust (and skip checking) segments
// appended after the cut that were never flushed.
func TestTruncatePersistsRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	s := openRaw(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	fill(t, l, 10) // segments 0, 8, 16; LEO 20
	checkpointFlushed(t, s, l, dir)
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 8) // back to LEO 20, never flushed
	if l.LogEndOffset() != 20 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	crash(t, s)
	// The unflushed batch at 8 did not survive the crash intact.
	garble(t, filepath.Join(dir, rtp.String(), segmentName(8)+logSuffix), 17)
	reopenCut(t, dir, 8)
}

// A partition directory left by an older incarnation of a topic (the broker missed its
// deletion) must not be served as the re-created topic's log, nor block its open, nor
// lend it the old log start offset; the old data is kept aside.
func TestOlderTopicIDMovedAside(t *testing.T) {
	dir := t.TempDir()
	s := openTrimmed(t, dir, [16]byte{1, 2, 3})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, dir)
	newID := [16]byte{7}
	l, err := s.Open(rtp, newID, recoveryConfig())
	if err != nil {
		t.Fatalf("open with the re-created topic's id: %v", err)
	}
	if l.LogStartOffset() != 0 || l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("re-created topic: start %d end %d size %d, want an empty log at 0", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
	if id, ok, err := readPartitionMetadata(filepath.Join(dir, rtp.String())); err != nil || !ok || id != newID {
		t.Fatalf("partition.metadata = %x %v %v, want %x", id, ok, err, newID)
	}
	stray := filepath.Join(dir, strayDirName([16]byte{1, 2, 3}, rtp.Partition))
	if got := segFiles(t, stray, logSuffix); len(got) == 0 {
		t.Fatalf("old segments not kept in %s", stray)
	}
	for _, d := range s.Dirs()[0].Partitions {
		if d.TP != rtp {
			t.Errorf("Dirs lists %v", d.TP)
		}
	}
	if res, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 1)); err != nil || res.BaseOffset != 0 {
		t.Fatalf("append: %+v %v", res, err)
	}
}

// After a crash, a partition that the next run never opens is not recovered by it; the
// clean-shutdown marker that run writes must not vouch for that partition.
func TestMarkerDoesNotVouchForUnrecoveredPartitions(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openPair(t, dir, 6, 2) // rtp: segments 0 and 8; LEO 12
	if err := s.writeCheckpoints(); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	// The last batch of rtp did not reach the disk intact.
	garble(t, filepath.Join(dir, rtp.String(), segmentName(8)+logSuffix), int64(len(storagetest.Batch(0, 0, 2, 30)))+17)

	s = openRaw(t, dir) // this run opens only the other partition
	if _, err := s.Open(otherTP, [16]byte{}, recoveryConfig()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	reopenCut(t, dir, 10)
}

// A crash part way through a Remove must not let the removed partition's state reach
// a re-created topic of the same name: not its checkpointed log start (the crash came
// before the checkpoint write), not a half-deleted directory.
func TestCrashDuringRemove(t *testing.T) {
	dir := t.TempDir()
	s := openTrimmed(t, dir, [16]byte{1})
	crash(t, s)
	// The crash came after the directory left but before the checkpoints were
	// rewritten, with part of the renamed directory still there.
	partial := filepath.Join(dir, rtp.String()+".00000000000000ab"+deleteDirSuffix)
	if err := os.Rename(filepath.Join(dir, rtp.String()), partial); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(partial, partitionMetadataFile)); err != nil {
		t.Fatal(err)
	}

	s = openTestStore(t, dir)
	if _, err := os.Stat(partial); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover of an unfinished remove still there: %v", err)
	}
	l := mustOpen(t, s, rtp, [16]byte{2}, recoveryConfig())
	if l.LogStartOffset() != 0 || l.LogEndOffset() != 0 {
		t.Fatalf("re-created partition: start %d end %d, want 0 0", l.LogStartOffset(), l.LogEndOffset())
	}
	// And a finished Remove leaves nothing behind.
	fill(t, l, 1)
	if err := s.Remove(rtp); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			t.Errorf("left after Remove: %s", e.Name())
		}
	}
}

// openFDs counts this process's descriptors open on files under dir.
func openFDs(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// A sealed segment keeps one descriptor (its .log, for reads), not three: the index
// files are closed once synced, after a flush and at open, and reopened by Truncate.
func TestSealedSegmentsHoldOneDescriptor(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	fill(t, l, 40) // 10 segments of 4 batches; the last one active
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	lg := l.(*Log)
	want := len(lg.segs) + 2
	if got := openFDs(t, dir); got != want {
		t.Fatalf("%d descriptors open for %d segments after a flush, want %d", got, len(lg.segs), want)
	}
	// Truncating into a sealed segment reopens its indexes; the log keeps working.
	if err := l.Truncate(13); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 8)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, 0)
	checkIndexes(t, lg)
	if got, want := openFDs(t, dir), len(lg.segs)+2; got != want {
		t.Fatalf("%d descriptors open for %d segments after a truncate, want %d", got, len(lg.segs), want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openFDs(t, dir); got != 0 {
		t.Fatalf("%d descriptors open after Close", got)
	}
	// At open, sealed segments get one descriptor too, and the active
	// segment's indexes are not opened until their next entry.
	l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	if got, want := openFDs(t, dir), len(l.(*Log).segs); got != want {
		t.Fatalf("%d descriptors open after reopening %d segments, want %d", got, len(l.(*Log).segs), want)
	}
	checkLog(t, l, 0)
}

// TestRetentionOfActivePinnedRead: retention of the active segment rolls a new segment
// at the log end and renames the old files away; a read pinning them stays readable
// until it is released, and the files are unlinked then.
func TestRetentionOfActivePinnedRead(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	noTails(s)
	cfg := recoveryConfig()
	cfg.SegmentBytes = 1 << 20 // one segment
	l := mustOpen(t, s, rtp, [16]byte{}, cfg)
	fill(t, l, 6) // offsets 0..11, max timestamp 1011
	rr, err := l.Read(0, 1<<20, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RetentionMs = 1000
	l.SetConfig(cfg)
	if err := l.(*Log).EnforceRetention(time.UnixMilli(1011 + 1001)); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 12 || l.LogEndOffset() != 12 || l.Size() != 0 {
		t.Fatalf("start %d end %d size %d; want 12 12 0", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
	pdir := filepath.Join(s.dir, rtp.String())
	if got := segFiles(t, pdir, logSuffix); len(got) != 1 || filepath.Base(got[0]) != segmentName(12)+logSuffix {
		t.Fatalf("segment files after retention: %v", got)
	}
	if got := segFiles(t, pdir, deletedSuffix); len(got) == 0 {
		t.Fatal("the pinned segment's files were unlinked under the reader")
	}
	fill(t, l, 2) // new bytes in the new segment
	b, err := storagetest.ReadAll(rr)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := storagetest.ParseAll(b)
	if err != nil || len(bs) != 6 || bs[0].Base != 0 || bs[5].Last != 11 {
		t.Fatalf("pinned read after retention: %d batches, %v", len(bs), err)
	}
	rr.Release()
	if got := segFiles(t, pdir, deletedSuffix); len(got) != 0 {
		t.Fatalf("deleted files left after release: %v", got)
	}
	checkRecovered(t, l, 12, 16)
}

// TestCrashAfterRetentionOfActive: a crash after the active segment was retained away,
// even before the checkpoints were written, recovers an empty log at the old log end:
// the deleted records do not come back and the next append gets the old next offset.
func TestCrashAfterRetentionOfActive(t *testing.T) {
	dir := t.TempDir()
	s := openRaw(t, dir)
	cfg := recoveryConfig()
	l := mustOpen(t, s, rtp, [16]byte{}, cfg)
	fill(t, l, 10) // segments 0, 8, 16; LEO 20
	oldCkpts := checkpointFlushed(t, s, l, dir)
	cfg.RetentionBytes = 0
	l.SetConfig(cfg)
	if err := l.(*Log).EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	for _, stale := range []bool{false, true} {
		if stale { // as if the crash came before the checkpoint write
			restore(t, dir, oldCkpts)
		}
		s = openRaw(t, dir)
		l = mustOpen(t, s, rtp, [16]byte{}, cfg)
		if l.LogStartOffset() != 20 || l.LogEndOffset() != 20 || l.Size() != 0 {
			t.Fatalf("stale checkpoints %v: start %d end %d size %d; want 20 20 0", stale, l.LogStartOffset(), l.LogEndOffset(), l.Size())
		}
		crash(t, s)
	}
	s = openTestStore(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{}, cfg)
	if res, err := l.AppendLeader(storagetest.Batch(0, 5000, 2, 30)); err != nil || res.BaseOffset != 20 {
		t.Fatalf("append after recovery: %+v %v; want base 20", res, err)
	}
	checkLog(t, l, 20)
}

// TestIndexFilesCreatedAtFirstEntry: a new partition costs one file (its
// .log) until an index gains an entry; an absent index reads as empty across
// a clean close and a crash.
func TestIndexFilesCreatedAtFirstEntry(t *testing.T) {
	dir := t.TempDir()
	pdir := filepath.Join(dir, rtp.String())
	cfg := storagetest.DefaultConfig()
	cfg.IndexIntervalBytes = 1 << 20
	s := openRaw(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{9}, cfg)
	noIndexes := func(when string, sufs ...string) {
		t.Helper()
		for _, suf := range sufs {
			if got := segFiles(t, pdir, suf); len(got) != 0 {
				t.Fatalf("%s: %v exist", when, got)
			}
		}
	}
	noIndexes("new partition", indexSuffix, timeIndexSuffix)
	fill(t, l, 3)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	noIndexes("three small batches", indexSuffix, timeIndexSuffix)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openRaw(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{9}, cfg)
	// Close writes the segment's largest timestamp to the time index, as
	// Kafka does; the offset index stays absent.
	noIndexes("clean reopen", indexSuffix)
	if got := segFiles(t, pdir, timeIndexSuffix); len(got) != 1 {
		t.Fatalf("time indexes after close: %v", got)
	}
	checkLog(t, l, 0)
	checkIndexes(t, l.(*Log))
	crash(t, s)

	s = openTestStore(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{9}, recoveryConfig())
	if got := l.LogEndOffset(); got != 6 {
		t.Fatalf("LEO %d after crash, want 6", got)
	}
	fill(t, l, 6)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(segFiles(t, pdir, indexSuffix)) == 0 || len(segFiles(t, pdir, timeIndexSuffix)) == 0 {
		t.Fatal("no index files after indexed appends")
	}
	checkLog(t, l, 0)
	checkIndexes(t, l.(*Log))
}

// A partition.metadata torn by a crash (written in place, see
// writePartitionMetadata) reads as absent and is written again at open; one
// whose topic_id line is whole but wrong fails the open, as the directory's
// topic cannot be told.
func TestTornPartitionMetadata(t *testing.T) {
	id := [16]byte{4, 5, 6}
	for _, tc := range []struct {
		name, content string
		ok            bool
	}{
		{"empty", "", true},
		{"version only", "version: 0\n", true},
		{"torn id", "version: 0\ntopic_id: BAUGAAAA", true},
		{"bad id", "version: 0\ntopic_id: !!\n", false},
		{"short id", "version: 0\ntopic_id: BAUG\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openRaw(t, dir)
			fill(t, mustOpen(t, s, rtp, id, recoveryConfig()), 3)
			crash(t, s)
			meta := filepath.Join(dir, rtp.String(), partitionMetadataFile)
			if err := os.WriteFile(meta, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			s = openTestStore(t, dir)
			l, err := s.Open(rtp, id, recoveryConfig())
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "bad topic_id") {
					t.Fatalf("open with %q: %v, want a bad topic_id error", tc.content, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := l.LogEndOffset(); got != 6 {
				t.Fatalf("LEO %d, want 6 (the data stays)", got)
			}
			if got, ok, err := readPartitionMetadata(filepath.Dir(meta)); err != nil || !ok || got != id {
				t.Fatalf("partition.metadata after open = %x %v %v, want %x", got, ok, err, id)
			}
		})
	}
}
