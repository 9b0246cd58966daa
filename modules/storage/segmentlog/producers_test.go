package segmentlog

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/producers"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// producerConfig rolls a segment every few batches, so snapshots are written.
func producerConfig() kernel.LogConfig {
	cfg := recoveryConfig()
	cfg.SegmentBytes = 3 * int64(len(storagetest.ProducerBatch(1, 0, 0, 2, 1000, false)))
	return cfg
}

type producerView struct {
	producers []kernel.ProducerState
	aborted   []kernel.AbortedTxn
	fuo       int64
	fuoOK     bool
	leo       int64
}

func viewOf(l kernel.Log) producerView {
	v := producerView{producers: l.Producers(), aborted: l.AbortedTxns(nil, 0, 1<<62), leo: l.LogEndOffset()}
	v.fuo, v.fuoOK = l.FirstUnstableOffset()
	return v
}

func (v producerView) String() string {
	return fmt.Sprintf("leo %d fuo %d/%v producers %v aborted %v", v.leo, v.fuo, v.fuoOK, v.producers, v.aborted)
}

// workload appends idempotent and transactional batches of several producers with
// commits and aborts across many segments, ending with one transaction open.
func workload(t *testing.T, l kernel.Log) {
	t.Helper()
	seqs := map[int64]int32{}
	prod := func(pid int64, txn bool) {
		t.Helper()
		s := seqs[pid]
		if _, err := l.AppendProducer(storagetest.ProducerBatch(pid, 0, s, 2, 1000+int64(s), txn), kernel.SeqRange{First: s, Last: s + 1}); err != nil {
			t.Fatalf("produce %d seq %d: %v", pid, s, err)
		}
		seqs[pid] = s + 2
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		if _, err := l.AppendLeader(storagetest.Marker(pid, 0, commit, 1, 2000)); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 4 {
		prod(1, false)
		prod(2, true)
		prod(3, true)
		prod(2, true)
		marker(2, round%2 == 0)
		prod(1, false)
		marker(3, false)
	}
	prod(4, true)
	prod(1, false)
}

func txnIndexEntries(t *testing.T, dir string) []producers.Aborted {
	t.Helper()
	var out []producers.Aborted
	for _, f := range segFiles(t, dir, txnIndexSuffix) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		as, torn, err := producers.ParseTxnIndex(b)
		if err != nil || torn {
			t.Fatalf("%s: torn %v, %v", f, torn, err)
		}
		out = append(out, as...)
	}
	return out
}

func checkTxnIndexMatches(t *testing.T, dir string, l kernel.Log) {
	t.Helper()
	var got []kernel.AbortedTxn
	for _, a := range txnIndexEntries(t, dir) {
		got = append(got, a.AbortedTxn)
	}
	if want := l.AbortedTxns(nil, 0, 1<<62); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf(".txnindex files hold %v, log reports %v", got, want)
	}
}

func TestProducerStateRecovery(t *testing.T) {
	for _, tc := range []struct {
		name  string
		prep  func(t *testing.T, s *Store, dir string)
		clean bool
	}{
		{"CleanClose", func(t *testing.T, s *Store, _ string) {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"CrashAfterAppends", func(t *testing.T, s *Store, _ string) { crash(t, s) }, false},
		{"CrashNoSnapshots", func(t *testing.T, s *Store, dir string) {
			crash(t, s)
			for _, f := range segFiles(t, dir, snapshotSuffix) {
				os.Remove(f)
			}
		}, false},
		{"CrashCorruptSnapshots", func(t *testing.T, s *Store, dir string) {
			crash(t, s)
			for _, f := range segFiles(t, dir, snapshotSuffix) {
				garble(t, f, 8)
			}
		}, false},
		{"CorruptNewestSnapshot", func(t *testing.T, s *Store, dir string) {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			snaps := segFiles(t, dir, snapshotSuffix)
			slices.Sort(snaps)
			if err := os.WriteFile(snaps[len(snaps)-1], []byte("garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			s := openRaw(t, root)
			l := mustOpen(t, s, rtp, [16]byte{}, producerConfig())
			workload(t, l)
			dir := filepath.Join(root, rtp.String())
			if n := len(segFiles(t, dir, logSuffix)); n < 5 {
				t.Fatalf("only %d segments", n)
			}
			want := viewOf(l)
			if len(want.aborted) < 5 || !want.fuoOK {
				t.Fatalf("workload: %v", want)
			}
			tc.prep(t, s, dir)
			s2 := openTestStore(t, root)
			l2 := mustOpen(t, s2, rtp, [16]byte{}, producerConfig())
			if got := viewOf(l2); got.String() != want.String() {
				t.Fatalf("after reopen:\n%v\nwant\n%v", got, want)
			}
			checkTxnIndexMatches(t, dir, l2)
			if n := len(segFiles(t, dir, snapshotSuffix)); n > snapshotsKept {
				t.Fatalf("%d snapshots", n)
			}
			// The last batch of producer 1 is still recognised as a duplicate.
			ps, _ := l2.Producer(1)
			res, err := l2.AppendProducer(storagetest.ProducerBatch(1, 0, ps.LastSequence-1, 2, 1000, false), kernel.SeqRange{First: ps.LastSequence - 1, Last: ps.LastSequence})
			if err != nil || !res.Duplicate || res.LastOffset != want.leo-1 {
				t.Fatalf("retry after reopen: %+v, %v", res, err)
			}
		})
	}
}

func TestTxnIndexLayout(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root)
	l := mustOpen(t, s, rtp, [16]byte{}, storagetest.DefaultConfig())
	for _, b := range [][]byte{
		storagetest.Batch(0, 1000, 3, 10),                   // 0-2
		storagetest.ProducerBatch(77, 1, -1, 2, 1000, true), // 3-4: txn of 77
		storagetest.ProducerBatch(78, 0, -1, 1, 1000, true), // 5: txn of 78
		storagetest.Marker(77, 1, false, 9, 1000),           // 6: abort 77
	} {
		if _, err := l.AppendLeader(b); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, rtp.String(), segmentName(0)+".txnindex"))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 34)
	binary.BigEndian.PutUint16(want[0:], 0)  // version
	binary.BigEndian.PutUint64(want[2:], 77) // producer id
	binary.BigEndian.PutUint64(want[10:], 3) // first offset
	binary.BigEndian.PutUint64(want[18:], 6) // last offset (the marker)
	binary.BigEndian.PutUint64(want[26:], 5) // last stable offset: 78's txn is open at 5
	if string(b) != string(want) {
		t.Fatalf(".txnindex = %x, want %x", b, want)
	}
}

func TestProducerTruncateWithSnapshots(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root)
	l := mustOpen(t, s, rtp, [16]byte{}, producerConfig())
	dir := filepath.Join(root, rtp.String())
	workload(t, l)
	full := viewOf(l)
	cut := full.aborted[2].LastOffset // drops the third abort and everything after
	// The state at cut, from a fresh log holding the same batches up to it.
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	got := viewOf(l)
	if got.leo != cut || len(got.aborted) != 2 {
		t.Fatalf("after truncate: %v", got)
	}
	for _, off := range mustSnapshots(t, dir) {
		if off > cut {
			t.Fatalf("snapshot %d above the new log end %d", off, cut)
		}
	}
	checkTxnIndexMatches(t, dir, l)
	// A replay from the log start agrees with the rolled-back state.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range segFiles(t, dir, snapshotSuffix) {
		os.Remove(f)
	}
	s2 := openTestStore(t, root)
	l2 := mustOpen(t, s2, rtp, [16]byte{}, producerConfig())
	if again := viewOf(l2); again.String() != got.String() {
		t.Fatalf("replay from the start:\n%v\nrolled back:\n%v", again, got)
	}
}

func mustSnapshots(t *testing.T, dir string) []int64 {
	t.Helper()
	offs, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

func TestRetentionDeletesProducerFiles(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root)
	cfg := producerConfig()
	l := mustOpen(t, s, rtp, [16]byte{}, cfg)
	dir := filepath.Join(root, rtp.String())
	workload(t, l)
	if len(segFiles(t, dir, txnIndexSuffix)) == 0 || len(mustSnapshots(t, dir)) == 0 {
		t.Fatal("no producer files written")
	}
	leo := l.LogEndOffset()
	if err := l.DeleteRecordsBefore(leo - 1); err != nil {
		t.Fatal(err)
	}
	lg := l.(*Log)
	first := lg.segs[0].base
	for _, off := range mustSnapshots(t, dir) {
		if off < first {
			t.Fatalf("snapshot %d below the first segment %d", off, first)
		}
	}
	for _, f := range segFiles(t, dir, txnIndexSuffix) {
		base, _ := parseBase(filepath.Base(f)[:20])
		if base < first {
			t.Fatalf("%s left behind", f)
		}
	}
	if got := l.AbortedTxns(nil, 0, 1<<62); len(got) != 0 {
		t.Fatalf("aborted below the log start: %v", got)
	}
	// Retention of the active segment: everything goes, the log restarts empty.
	cfg.RetentionMs = 1
	l.SetConfig(cfg)
	if err := lg.EnforceRetention(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles(t, dir, txnIndexSuffix)); n != 0 {
		t.Fatalf("%d .txnindex files after full retention", n)
	}
	if len(l.Producers()) != 0 {
		t.Fatalf("producers after full retention: %v", l.Producers())
	}
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("open transaction after full retention")
	}
}

// BenchmarkAppendProducer compares AppendLeader with AppendProducer (sequence check,
// duplicate window, producer bookkeeping) for one ~1 KiB single-record batch per op.
func BenchmarkAppendProducer(b *testing.B) {
	for _, idem := range []bool{false, true} {
		name := "AppendLeader"
		if idem {
			name = "AppendProducer"
		}
		b.Run(name, func(b *testing.B) {
			l := openRetainedLog(b)
			pid := int64(1)
			if !idem {
				pid = -1
			}
			batch := recordbatch.Build(recordbatch.Options{ProducerID: pid, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()}, recordbatch.Record{Value: make([]byte, 1000)})
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				seq := int32(i)
				binary.BigEndian.PutUint32(batch[recordbatch.OffBaseSequence:], uint32(seq))
				recordbatch.SetCRC(batch)
				var err error
				if idem {
					_, err = l.AppendProducer(batch, kernel.SeqRange{First: seq, Last: seq})
				} else {
					_, err = l.AppendLeader(batch)
				}
				if err != nil {
					b.Fatal(err)
				}
				retainEvery(b, l, i)
			}
		})
	}
}
