package segmentlog

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// Concurrent Opens of one partition open it once and all get the same Log; opens of
// different partitions and Removes race without losing either.
func TestStoreConcurrentOpenRemove(t *testing.T) {
	s, err := OpenStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := storagetest.DefaultConfig()
	tp := kernel.TopicPartition{Topic: "t", Partition: 0}
	const n = 16
	logs := make([]kernel.Log, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.Open(tp, [16]byte{1}, cfg)
			if err != nil {
				t.Error(err)
			}
			logs[i] = l
		}()
	}
	wg.Wait()
	for i := range logs {
		if logs[i] != logs[0] {
			t.Fatalf("open %d returned another Log", i)
		}
	}
	if _, err := logs[0].AppendLeader(storagetest.Batch(0, 1, 3, 10)); err != nil {
		t.Fatal(err)
	}

	// Open and Remove of the same partitions from many goroutines: each ends either
	// open (and usable) or removed, never a Log whose directory is gone.
	for i := range 32 {
		wg.Add(2)
		p := kernel.TopicPartition{Topic: "r", Partition: int32(i)}
		go func() {
			defer wg.Done()
			if _, err := s.Open(p, [16]byte{2}, cfg); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := s.Remove(p); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range 32 {
		p := kernel.TopicPartition{Topic: "r", Partition: int32(i)}
		l, err := s.Open(p, [16]byte{2}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 10)); err != nil {
			t.Fatalf("append to %v after the race: %v", p, err)
		}
	}

	// A removed partition re-created: starts empty, and the checkpoint file no longer
	// holds the old incarnation's entry once the new one is open.
	if err := s.Remove(tp); err != nil {
		t.Fatal(err)
	}
	l, err := s.Open(tp, [16]byte{3}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.LogEndOffset(); got != 0 {
		t.Fatalf("re-created partition's log end %d, want 0", got)
	}
	rps, err := readCheckpoint(filepath.Join(s.dir, recoveryCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := rps[tp]; ok && v != 0 {
		t.Fatalf("recovery point checkpoint holds %v=%d of the removed incarnation", tp, v)
	}
}

// Open racing Close: the store closes every log an Open finished, and the next open
// of the directory is clean.
func TestStoreCloseDuringOpens(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := storagetest.DefaultConfig()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.Open(kernel.TopicPartition{Topic: "c", Partition: int32(i)}, [16]byte{1}, cfg)
			if err == kernel.ErrLogClosed {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			l.AppendLeader(storagetest.Batch(0, 1, 1, 10)) // may lose the race with Close
		}()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean shutdown marker after Close: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("leftover %s", e.Name())
		}
	}
}

// An idle log's close rewrites no producer snapshot, and a written one's does; a short
// log writes none at all (the next open replays it), and its producer state survives.
func TestCloseSkipsUnchangedSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := storagetest.DefaultConfig()
	tp := kernel.TopicPartition{Topic: "s", Partition: 0}
	open := func() (*Store, kernel.Log) {
		s, err := OpenStore(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Open(tp, [16]byte{1}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s, l
	}
	snapStat := func(leo int64) os.FileInfo {
		fi, err := os.Stat(filepath.Join(dir, tp.String(), snapshotName(leo)))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	s, l := open()
	if _, err := l.AppendLeader(storagetest.ProducerBatch(7, 0, 0, 1, 1, false)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, tp.String(), snapshotName(1))); !os.IsNotExist(err) {
		t.Fatalf("a one-record log was snapshotted at close (%v)", err)
	}
	s, l = open()
	if st, ok := l.(*Log).prod.Producer(7); !ok || st.LastSequence != 0 {
		t.Fatalf("producer state after a stop without a snapshot: %+v, %v", st, ok)
	}
	if _, err := l.AppendLeader(storagetest.Batch(0, 1, snapshotSkipRecords+1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	leo := int64(snapshotSkipRecords + 2)
	before := snapStat(leo)
	// Renamed over by a rewrite: a new inode.
	s, _ = open()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := snapStat(leo); !os.SameFile(before, after) {
		t.Fatal("the close of an idle log rewrote its producer snapshot")
	}
	s, l = open()
	if _, err := l.AppendLeader(storagetest.Batch(0, 1, snapshotSkipRecords+1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snapStat(leo + snapshotSkipRecords + 1)
}

// The checkpoint files are Kafka's text format, sorted by topic and partition, and
// read back as written.
func TestCheckpointFormat(t *testing.T) {
	m := map[kernel.TopicPartition]int64{
		{Topic: "b", Partition: 10}: 7, {Topic: "b", Partition: 2}: 0, {Topic: "a", Partition: 0}: -1,
	}
	const want = "0\n3\na 0 -1\nb 2 0\nb 10 7\n"
	if got := string(formatCheckpoint(m)); got != want {
		t.Fatalf("formatted %q, want %q", got, want)
	}
	path := filepath.Join(t.TempDir(), recoveryCheckpointFile)
	if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := readCheckpoint(path)
	if err != nil || !maps.Equal(back, m) {
		t.Fatalf("read back %v (%v), want %v", back, err, m)
	}
}

// A short tail after a head that retention deleted is not replayable into the whole
// producer state (the deleted segments' producers live only in it), unless a snapshot
// covers the first remaining segment: the snapshot is kept.
func TestSnapshotNeedlessKeepsDeletedHeadsProducers(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 150
	l := mustOpen(t, s, kernel.TopicPartition{Topic: "head", Partition: 0}, [16]byte{9}, cfg).(*Log)
	if _, err := l.AppendLeader(storagetest.ProducerBatch(7, 0, 0, 1, 1, false)); err != nil {
		t.Fatal(err)
	}
	for len(l.segs) < 2 {
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 100)); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	leo := l.leo.Load()
	if !l.snapshotNeedless(leo) {
		t.Fatalf("a %d-record log from offset 0 needs a snapshot", leo)
	}
	// As if retention deleted the first segment and the roll's snapshot was lost.
	segs, snaps := l.segs, l.snaps
	l.segs, l.snaps = l.segs[1:], nil
	if l.snapshotNeedless(leo) {
		t.Fatal("skipped the snapshot of a log whose head (and producer 7) is gone")
	}
	l.snaps = []int64{l.segs[0].base}
	if !l.snapshotNeedless(leo) {
		t.Fatal("a snapshot at the first segment makes the short tail replayable")
	}
	l.segs, l.snaps = segs, snaps
}

// A flush that only moves a recovery point leaves the checkpoint files for the
// recovery checkpoint interval; a log start move has them written at the next pass.
func TestRecoveryPointCheckpointWaits(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	if err := s.writeCheckpoints(); err != nil { // the open's entries
		t.Fatal(err)
	}
	fill(t, l, 6) // rolls segments: the flush pass would move the recovery point
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	const every = time.Minute
	now := time.Now()
	if !s.rpDirty.Load() || s.dirty.Load() {
		t.Fatalf("after a flush: rpDirty %v dirty %v, want true false", s.rpDirty.Load(), s.dirty.Load())
	}
	if s.checkpointsDue(now, every) {
		t.Fatal("a recovery point move is due at once")
	}
	if !s.checkpointsDue(now.Add(every), every) {
		t.Fatal("a recovery point move is not due after the interval")
	}
	mustOpen(t, s, otherTP, [16]byte{}, recoveryConfig())
	if err := s.Remove(otherTP); err != nil {
		t.Fatal(err)
	}
	if !s.checkpointsDue(now, every) {
		t.Fatal("a removed partition is not due at the next pass")
	}
	if err := s.writeCheckpoints(); err != nil {
		t.Fatal(err)
	}
	if s.checkpointsDue(now.Add(every), every) {
		t.Fatal("due again after a write with nothing new")
	}
	// DeleteRecords writes both files before it returns (recovery points with them).
	fill(t, l, 2)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if s.rpDirty.Load() || s.dirty.Load() {
		t.Fatalf("after DeleteRecords: rpDirty %v dirty %v, want both written", s.rpDirty.Load(), s.dirty.Load())
	}
}
