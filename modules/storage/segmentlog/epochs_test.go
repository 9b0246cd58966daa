package segmentlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/epochs"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// fillEpochs appends one recovery-sized batch (2 records) per epoch given.
func fillEpochs(t *testing.T, l kernel.Log, es ...int32) {
	t.Helper()
	for _, e := range es {
		ts := 1000 + l.LogEndOffset()
		if _, err := l.AppendLeader(storagetest.SetLeaderEpoch(storagetest.Batch(0, ts, 2, 30), e)); err != nil {
			t.Fatal(err)
		}
	}
}

func epochFile(dir string) string { return filepath.Join(dir, rtp.String(), epochCheckpointFile) }

// writeEpochFile replaces rtp's leader-epoch checkpoint under dir with content.
func writeEpochFile(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(epochFile(dir), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readEpochFile(t *testing.T, dir string) string {
	t.Helper()
	return string(mustReadFile(t, epochFile(dir)))
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func epochsString(es []kernel.EpochEntry) string { return string(epochs.Encode(es)) }

// epochsOf is the checkpoint file of a log of 2-record batches in these epochs, or
// "" for none (the file is not written before the first flush).
func epochsOf(batchEpochs []int32) string {
	if len(batchEpochs) == 0 {
		return ""
	}
	var es []kernel.EpochEntry
	for i, e := range batchEpochs {
		if len(es) == 0 || e > es[len(es)-1].Epoch {
			es = append(es, kernel.EpochEntry{Epoch: e, StartOffset: int64(2 * i)})
		}
	}
	return epochsString(es)
}

// readEpochFileOrEmpty is readEpochFile with an absent file read as "".
func readEpochFileOrEmpty(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(epochFile(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEpochCheckpointFile: the file is Kafka's format, written when a flush moves the
// recovery point past a new entry (not on every append, not at an assignment at the
// log end), lazily after a head truncation, and at once after a truncation.
func TestEpochCheckpointFile(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	noFile := func(when string) {
		t.Helper()
		if _, err := os.Stat(epochFile(dir)); err == nil {
			t.Fatalf("%s wrote an epoch checkpoint", when)
		}
	}
	noFile("opening a new, empty log")
	if err := l.AssignEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	noFile("an assignment at the log end")
	fillEpochs(t, l, 1, 1, 3)
	noFile("appends not flushed")
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := readEpochFile(t, dir), "0\n2\n1 0\n3 4\n"; got != want {
		t.Fatalf("checkpoint %q, want %q", got, want)
	}
	ino := inode(t, epochFile(dir))
	fillEpochs(t, l, 3, 3, 2, -1, 3)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if inode(t, epochFile(dir)) != ino {
		t.Fatal("appends in the same epoch rewrote the checkpoint")
	}
	if err := l.AssignEpoch(5, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if inode(t, epochFile(dir)) != ino {
		t.Fatal("an assignment at the log end rewrote the checkpoint")
	}
	if got := l.Epochs(); len(got) != 3 || got[2] != (kernel.EpochEntry{Epoch: 5, StartOffset: 16}) {
		t.Fatalf("Epochs() = %v after AssignEpoch(5, 16)", got)
	}
	if err := l.DeleteRecordsBefore(1); err != nil {
		t.Fatal(err)
	}
	if inode(t, epochFile(dir)) != ino {
		t.Fatal("a head truncation wrote the checkpoint at once")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := readEpochFile(t, dir), "0\n3\n1 1\n3 4\n5 16\n"; got != want {
		t.Fatalf("checkpoint after a flush %q, want %q", got, want)
	}
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if got, want := readEpochFile(t, dir), "0\n1\n1 1\n"; got != want {
		t.Fatalf("checkpoint after Truncate %q, want %q", got, want)
	}
}

// TestEpochRecovery: after a crash the entries are rebuilt from the checkpoint file
// below the recovered range and from the batch headers above it, whatever state the
// file is in.
func TestEpochRecovery(t *testing.T) {
	// 10 batches of 2 records, segments at 0, 8, 16; LEO 20.
	all := []int32{1, 1, 1, 1, 3, 3, 3, 3, 5, 7}
	full := []kernel.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 8}, {Epoch: 5, StartOffset: 16}, {Epoch: 7, StartOffset: 18}}
	tests := []struct {
		name string
		// flushedAt: how many batches were flushed and checkpointed before the rest;
		// -1: none.
		flushedAt int
		damage    func(t *testing.T, dir string, l kernel.Log)
		want      []kernel.EpochEntry
		wantLEO   int64
	}{
		{"intact", 10, func(*testing.T, string, kernel.Log) {}, full, 20},
		{"never flushed", -1, func(*testing.T, string, kernel.Log) {}, full, 20},
		{"missing", 6, func(t *testing.T, dir string, _ kernel.Log) {
			if err := os.Remove(epochFile(dir)); err != nil {
				t.Fatal(err)
			}
		}, full, 20},
		{"corrupt", 6, func(t *testing.T, dir string, _ kernel.Log) {
			writeEpochFile(t, dir, "0\n2\n1 0\nx\x00y\n")
		}, full, 20},
		{"empty, torn by a crash in an unsynced replacement", 10, func(t *testing.T, dir string, _ kernel.Log) {
			writeEpochFile(t, dir, "")
		}, full, 20},
		{"another version", 10, func(t *testing.T, dir string, _ kernel.Log) {
			writeEpochFile(t, dir, "1\n0\n")
		}, full, 20},
		{"unreadable", 10, func(t *testing.T, dir string, _ kernel.Log) {
			if err := os.Remove(epochFile(dir)); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(epochFile(dir), 0o755); err != nil {
				t.Fatal(err)
			}
		}, full, 20},
		{"ahead of the log after a torn tail", 6, func(t *testing.T, dir string, _ kernel.Log) {
			// The last batch (epoch 7 at 18) did not reach the disk whole.
			garble(t, filepath.Join(dir, rtp.String(), segmentName(16)+logSuffix), int64(len(storagetest.Batch(0, 0, 2, 30)))+30)
		}, full[:3], 18},
		{"entries past the log end", -1, func(t *testing.T, dir string, _ kernel.Log) {
			writeEpochFile(t, dir, "0\n5\n1 0\n3 8\n5 16\n7 18\n9 100\n")
		}, full, 20},
		{"behind the log", 6, func(t *testing.T, dir string, _ kernel.Log) {
			// As it was at the flush: the writes for epochs 5 and 7 were lost.
			writeEpochFile(t, dir, "0\n2\n1 0\n3 8\n")
		}, full, 20},
		{"behind and stale above the recovery point", 6, func(t *testing.T, dir string, _ kernel.Log) {
			writeEpochFile(t, dir, "0\n3\n1 0\n3 8\n4 10\n")
		}, full, 20},
		{"log start moved, file not rewritten", 6, func(t *testing.T, dir string, l kernel.Log) {
			if err := l.DeleteRecordsBefore(10); err != nil { // checkpoints the log start
				t.Fatal(err)
			}
			if got := readEpochFile(t, dir); got != epochsOf(all[:6]) {
				t.Fatalf("file %q: the head truncation was written at once", got)
			}
		}, []kernel.EpochEntry{{Epoch: 3, StartOffset: 10}, {Epoch: 5, StartOffset: 16}, {Epoch: 7, StartOffset: 18}}, 20},
		{"log start at the log end, file not rewritten", -1, func(t *testing.T, _ string, l kernel.Log) {
			if err := l.DeleteRecordsBefore(20); err != nil {
				t.Fatal(err)
			}
		}, nil, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openRaw(t, dir)
			l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
			if tc.flushedAt >= 0 {
				fillEpochs(t, l, all[:tc.flushedAt]...)
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := s.writeCheckpoints(); err != nil {
					t.Fatal(err)
				}
				fillEpochs(t, l, all[tc.flushedAt:]...)
			} else {
				fillEpochs(t, l, all...)
			}
			// The file holds the entries below the recovery point (epochAdded).
			if got, want := readEpochFileOrEmpty(t, dir), epochsOf(all[:max(tc.flushedAt, 0)]); got != want {
				t.Fatalf("checkpoint before the crash %q, want %q", got, want)
			}
			tc.damage(t, dir, l)
			crash(t, s)

			s = openTestStore(t, dir)
			l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
			if l.LogEndOffset() != tc.wantLEO {
				t.Fatalf("LEO %d after recovery, want %d", l.LogEndOffset(), tc.wantLEO)
			}
			if got := l.Epochs(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("Epochs() = %v after recovery, want %v", got, tc.want)
			}
			if tc.name == "unreadable" {
				// The rewrite at open failed (logged); it is retried once the path is
				// usable again.
				mustRemove(t, epochFile(dir))
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			wantFile := epochsString(tc.want)
			if tc.name == "entries past the log end" {
				// Stale entries past the log end alone do not make open rewrite
				// the file (loadEpochs).
				wantFile = "0\n5\n1 0\n3 8\n5 16\n7 18\n9 100\n"
			}
			if got := readEpochFile(t, dir); got != wantFile {
				t.Fatalf("checkpoint after recovery %q, want %q", got, wantFile)
			}
			checkLog(t, l, 0)
			// And the next epoch goes on from there.
			fillEpochs(t, l, 8)
			if es := l.Epochs(); es[len(es)-1] != (kernel.EpochEntry{Epoch: 8, StartOffset: tc.wantLEO}) {
				t.Fatalf("after an append in epoch 8: %v", es)
			}
		})
	}
}

// TestResetCrash: what each step of Reset leaves on disk (see reset.go) recovers to a
// consistent log: the old one, a prefix of it, or an empty one.
func TestResetCrash(t *testing.T) {
	old := []kernel.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 8}, {Epoch: 5, StartOffset: 16}}
	type state struct {
		start, end int64
		epochs     []kernel.EpochEntry
		producers  int
	}
	tests := []struct {
		name string
		// crashAt leaves the disk as a crash in Reset(100) would; l is the crashed log.
		crashAt func(t *testing.T, dir string, l *Log, ckpts map[string][]byte)
		want    state
	}{
		{"after step 1 (epoch checkpoint removed)", func(t *testing.T, dir string, l *Log, _ map[string][]byte) {
			mustRemove(t, epochFile(dir))
		}, state{0, 20, old, 1}},
		{"after step 2 (snapshots removed)", func(t *testing.T, dir string, l *Log, _ map[string][]byte) {
			mustRemove(t, epochFile(dir))
			for _, p := range segFiles(t, filepath.Join(dir, rtp.String()), snapshotSuffix) {
				mustRemove(t, p)
			}
		}, state{0, 20, old, 1}},
		{"during step 3 (newest segment renamed)", func(t *testing.T, dir string, l *Log, _ map[string][]byte) {
			mustRemove(t, epochFile(dir))
			for _, p := range segFiles(t, filepath.Join(dir, rtp.String()), snapshotSuffix) {
				mustRemove(t, p)
			}
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
				p := filepath.Join(dir, rtp.String(), segmentName(16)+suf)
				if err := os.Rename(p, p+deletedSuffix); err != nil {
					t.Fatal(err)
				}
			}
		}, state{0, 16, old[:2], 0}},
		{"after step 3 (every segment renamed)", func(t *testing.T, dir string, l *Log, _ map[string][]byte) {
			mustRemove(t, epochFile(dir))
			pdir := filepath.Join(dir, rtp.String())
			for _, p := range segFiles(t, pdir, snapshotSuffix) {
				mustRemove(t, p)
			}
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				for _, p := range segFiles(t, pdir, suf) {
					if err := os.Rename(p, p+deletedSuffix); err != nil {
						t.Fatal(err)
					}
				}
			}
		}, state{0, 0, nil, 0}},
		{"after step 4 (new segment, old checkpoints)", func(t *testing.T, dir string, l *Log, ckpts map[string][]byte) {
			if err := l.Reset(100); err != nil {
				t.Fatal(err)
			}
			restore(t, dir, ckpts)
			mustRemove(t, epochFile(dir))
		}, state{100, 100, nil, 0}},
		{"after step 4, the epoch checkpoint's removal lost", func(t *testing.T, dir string, l *Log, ckpts map[string][]byte) {
			was := readEpochFile(t, dir)
			if err := l.Reset(100); err != nil {
				t.Fatal(err)
			}
			restore(t, dir, ckpts)
			writeEpochFile(t, dir, was)
		}, state{100, 100, nil, 0}},
		{"after step 6 with appends", func(t *testing.T, dir string, l *Log, _ map[string][]byte) {
			if err := l.Reset(100); err != nil {
				t.Fatal(err)
			}
			fillEpochs(t, l, 2, 2)
		}, state{100, 104, []kernel.EpochEntry{{Epoch: 2, StartOffset: 100}}, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openRaw(t, dir)
			l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
			fillEpochs(t, l, 1, 1, 1, 1, 3, 3, 3, 3) // segments 0 and 8 (a snapshot at the roll)
			if _, err := l.AppendProducer(storagetest.SetLeaderEpoch(storagetest.ProducerBatch(7, 0, 0, 2, 1000, true), 5), kernel.SeqRange{First: 0, Last: 1}); err != nil {
				t.Fatal(err)
			}
			fillEpochs(t, l, 5) // segment 16; LEO 20
			ckpts := checkpointFlushed(t, s, l, dir)
			l.SetHighWatermark(20)
			tc.crashAt(t, dir, l.(*Log), ckpts)
			crash(t, s)

			s = openTestStore(t, dir)
			l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
			got := state{l.LogStartOffset(), l.LogEndOffset(), l.Epochs(), len(l.Producers())}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("recovered %+v, want %+v", got, tc.want)
			}
			if hw := l.HighWatermark(); hw < got.start || hw > got.end {
				t.Fatalf("HighWatermark %d outside the log", hw)
			}
			checkLog(t, l, 0)
			for _, p := range segFiles(t, filepath.Join(dir, rtp.String()), deletedSuffix) {
				t.Errorf("leftover %s", p)
			}
			for _, off := range mustSnapshots(t, filepath.Join(dir, rtp.String())) {
				if off > got.end {
					t.Errorf("snapshot %d past the log end %d", off, got.end)
				}
			}
			if res, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 1)); err != nil || res.BaseOffset != got.end {
				t.Fatalf("append after recovery: %+v %v", res, err)
			}
		})
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// checkpointFlushed flushes l, writes s's checkpoints and returns the recovery and log
// start checkpoint files in dir as written, for restore.
func checkpointFlushed(t *testing.T, s *Store, l kernel.Log, dir string) map[string][]byte {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.writeCheckpoints(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range []string{recoveryCheckpointFile, logStartCheckpointFile} {
		files[name] = mustReadFile(t, filepath.Join(dir, name))
	}
	return files
}

func restore(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResetFiles: a Reset leaves one empty segment named by the new offset, no
// snapshot of the old log, an empty epoch checkpoint and the new offsets checkpointed;
// files a held read pins go when it is released.
func TestResetFiles(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, producerConfig())
	workload(t, l) // producer snapshots, .txnindex files, several segments
	rr, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(1000); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, rtp.String())
	if got := segFiles(t, pdir, logSuffix); len(got) != 1 || filepath.Base(got[0]) != segmentName(1000)+logSuffix {
		t.Fatalf("segments after reset: %v", got)
	}
	for _, suf := range []string{snapshotSuffix, txnIndexSuffix} {
		if got := segFiles(t, pdir, suf); len(got) != 0 {
			t.Fatalf("%s files after reset: %v", suf, got)
		}
	}
	if got := readEpochFile(t, dir); got != "0\n0\n" {
		t.Fatalf("epoch checkpoint %q after reset", got)
	}
	for _, name := range []string{recoveryCheckpointFile, logStartCheckpointFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == logStartCheckpointFile && string(b) != "0\n1\nrecover 3 1000\n" {
			t.Fatalf("%s = %q", name, b)
		}
		if name == recoveryCheckpointFile && !strings.HasPrefix(string(b), "0\n1\nrecover 3 ") {
			t.Fatalf("%s = %q", name, b)
		}
	}
	if len(segFiles(t, pdir, deletedSuffix)) == 0 {
		t.Fatal("pinned files unlinked under the reader")
	}
	rr.Release()
	if got := segFiles(t, pdir, deletedSuffix); len(got) != 0 {
		t.Fatalf("leftovers after release: %v", got)
	}
	checkIndexes(t, l.(*Log))
}

// TestEpochsAtClose: a clean Close writes the entries below the log end (a clean open
// trusts the file that far) and skips an assignment at the log end (open drops it).
func TestEpochsAtClose(t *testing.T) {
	dir := t.TempDir()
	s := openRaw(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	fillEpochs(t, l, 1, 1, 2)
	if err := l.AssignEpoch(4, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The write takes the whole cache, the assignment at the log end too: open
	// drops it.
	if got, want := readEpochFile(t, dir), "0\n3\n1 0\n2 4\n4 6\n"; got != want {
		t.Fatalf("checkpoint after Close %q, want %q", got, want)
	}
	ino := inode(t, epochFile(dir))

	s = openRaw(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	if got := fmt.Sprint(l.Epochs()); got != "[{1 0} {2 4}]" {
		t.Fatalf("Epochs() after a clean reopen = %s", got)
	}
	if err := l.AssignEpoch(6, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if inode(t, epochFile(dir)) != ino {
		t.Fatal("closing an idle partition after an assignment rewrote the checkpoint")
	}
}
