package storagetest

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// ProducerBatch builds a batch of n records (n >= 1) from producer pid/epoch starting
// at sequence seq (-1: no sequence, as coordinator writes), timestamps ts.., marked
// transactional when txn.
func ProducerBatch(pid int64, epoch int16, seq int32, n int, ts int64, txn bool) []byte {
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: []byte(fmt.Sprintf("value-%d", i))}
	}
	return recordbatch.Build(recordbatch.Options{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, BaseTimestamp: ts, Transactional: txn}, recs...)
}

// Marker builds a COMMIT or ABORT marker of producer pid/epoch.
func Marker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, ts int64) []byte {
	return recordbatch.BuildMarker(pid, epoch, recordbatch.Marker{Commit: commit, CoordinatorEpoch: coordinatorEpoch}, ts)
}

func seqOf(pid int64, epoch int16, first int32, n int) kernel.SeqRange {
	return kernel.SeqRange{First: first, Last: int32((int64(first) + int64(n) - 1) % (math.MaxInt32 + 1)), ProducerID: pid, Epoch: epoch}
}

// produce appends one idempotent batch with AppendProducer.
func produce(l kernel.Log, pid int64, epoch int16, seq int32, n int, txn bool) (kernel.AppendResult, error) {
	return l.AppendProducer(ProducerBatch(pid, epoch, seq, n, 1000, txn), seqOf(pid, epoch, seq, n))
}

func mustProduce(t *testing.T, l kernel.Log, pid int64, epoch int16, seq int32, n int, txn bool) kernel.AppendResult {
	t.Helper()
	res, err := produce(l, pid, epoch, seq, n, txn)
	if err != nil || res.Duplicate {
		t.Fatalf("produce pid %d epoch %d seq %d: %+v, %v", pid, epoch, seq, res, err)
	}
	return res
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func mustLeader(t *testing.T, l kernel.Log, b []byte) kernel.AppendResult {
	t.Helper()
	res, err := l.AppendLeader(b)
	if err != nil {
		t.Fatalf("AppendLeader: %v", err)
	}
	return res
}

func testProducerSequences(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	// An unknown producer may start anywhere.
	var first [6]kernel.AppendResult
	first[0] = mustProduce(t, l, 7, 0, 40, 2, false)
	for i := 1; i < 6; i++ {
		first[i] = mustProduce(t, l, 7, 0, int32(40+2*i), 2, false)
	}
	leo := l.LogEndOffset()
	// Retries of the last five are duplicates, answered with the original append.
	for i := 1; i < 6; i++ {
		res, err := produce(l, 7, 0, int32(40+2*i), 2, false)
		if err != nil || !res.Duplicate || res.BaseOffset != first[i].BaseOffset || res.LastOffset != first[i].LastOffset || res.LogAppendTime != first[i].LogAppendTime {
			t.Fatalf("retry %d: %+v, %v; original %+v", i, res, err, first[i])
		}
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("duplicates appended: log end %d, was %d", l.LogEndOffset(), leo)
	}
	// The sixth back is out of the window: out of order.
	_, err := produce(l, 7, 0, 40, 2, false)
	wantErr(t, "6th-back retry", err, kernel.ErrOutOfOrderSequence)
	// A gap.
	_, err = produce(l, 7, 0, 53, 1, false)
	wantErr(t, "gap", err, kernel.ErrOutOfOrderSequence)
	// A partial overlap is not a duplicate.
	_, err = produce(l, 7, 0, 50, 1, false)
	wantErr(t, "overlap", err, kernel.ErrOutOfOrderSequence)
	mustProduce(t, l, 7, 0, 52, 1, false)
	ps, ok := l.Producer(7)
	if !ok || ps.ProducerID != 7 || ps.Epoch != 0 || ps.LastSequence != 52 || ps.TxnStartOffset != -1 || ps.CoordinatorEpoch != -1 {
		t.Fatalf("Producer(7) = %+v, %v", ps, ok)
	}
	// Wraparound past MaxInt32.
	mustProduce(t, l, 8, 0, math.MaxInt32-1, 3, false) // MaxInt32-1, MaxInt32, 0
	mustProduce(t, l, 8, 0, 1, 1, false)
	mustProduce(t, l, 9, 0, math.MaxInt32, 1, false)
	mustProduce(t, l, 9, 0, 0, 1, false)
	if got := l.Producers(); len(got) != 3 || got[0].ProducerID != 7 || got[2].ProducerID != 9 {
		t.Fatalf("Producers() = %+v", got)
	}
	// Batches without a producer id touch nothing.
	mustLeader(t, l, Batch(0, 1000, 1, 1))
	if len(l.Producers()) != 3 {
		t.Fatal("a batch without producer id added a producer")
	}
	if _, ok := l.Producer(12345); ok {
		t.Fatal("unknown producer reported")
	}
}

func testProducerEpochs(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	mustProduce(t, l, 1, 3, 0, 2, false)
	// A newer epoch must start at 0.
	_, err := produce(l, 1, 4, 2, 1, false)
	wantErr(t, "new epoch at 2", err, kernel.ErrOutOfOrderSequence)
	mustProduce(t, l, 1, 4, 0, 1, false)
	// An older epoch is fenced, on AppendProducer and AppendLeader, data and markers.
	_, err = produce(l, 1, 3, 2, 1, false)
	wantErr(t, "old epoch", err, kernel.ErrInvalidProducerEpoch)
	_, err = l.AppendLeader(ProducerBatch(1, 3, -1, 1, 1000, false))
	wantErr(t, "old epoch (leader)", err, kernel.ErrInvalidProducerEpoch)
	_, err = l.AppendLeader(Marker(1, 3, true, 0, 1000))
	wantErr(t, "old epoch marker", err, kernel.ErrInvalidProducerEpoch)
	// A retry of the old epoch's batch is no duplicate either.
	_, err = produce(l, 1, 3, 0, 2, false)
	wantErr(t, "old epoch retry", err, kernel.ErrInvalidProducerEpoch)
	// Followers are not checked.
	leo := l.LogEndOffset()
	fb := ProducerBatch(1, 2, 9, 1, 1000, false)
	recordbatch.SetBaseOffset(fb, leo)
	recordbatch.SetCRC(fb)
	if _, err := l.AppendFollower(fb); err != nil {
		t.Fatalf("follower append of an old epoch: %v", err)
	}
	// Coordinator writes (base sequence -1) skip the sequence check but bump the epoch.
	mustLeader(t, l, ProducerBatch(1, 5, -1, 1, 1000, false))
	if ps, _ := l.Producer(1); ps.Epoch != 5 {
		t.Fatalf("epoch after coordinator write: %+v", ps)
	}
	mustProduce(t, l, 1, 5, 0, 1, false)
}

func testProducerTransactions(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("unstable offset in an empty log")
	}
	mustLeader(t, l, Batch(0, 1000, 2, 1))    // 0-1
	a := mustProduce(t, l, 10, 0, 0, 2, true) // 2-3: txn of 10 opens at 2
	b := mustProduce(t, l, 11, 0, 0, 1, true) // 4: txn of 11 opens at 4
	if a.BaseOffset != 2 || b.BaseOffset != 4 {
		t.Fatalf("offsets %+v %+v", a, b)
	}
	if off, ok := l.FirstUnstableOffset(); !ok || off != 2 {
		t.Fatalf("FirstUnstableOffset = %d, %v; want 2", off, ok)
	}
	if ps, _ := l.Producer(10); ps.TxnStartOffset != 2 {
		t.Fatalf("Producer(10) = %+v", ps)
	}
	_, err := produce(l, 10, 0, 2, 1, false)
	wantErr(t, "non-transactional batch in a transaction", err, kernel.ErrInvalidTxnState)
	mustProduce(t, l, 10, 0, 2, 1, true)                  // 5
	ab := mustLeader(t, l, Marker(10, 0, false, 3, 1000)) // 6: abort 10
	if ab.BaseOffset != 6 {
		t.Fatalf("abort marker at %d", ab.BaseOffset)
	}
	if off, ok := l.FirstUnstableOffset(); !ok || off != 4 {
		t.Fatalf("FirstUnstableOffset after abort = %d, %v; want 4", off, ok)
	}
	mustLeader(t, l, Marker(11, 0, true, 3, 1000)) // 7: commit 11
	if ps, _ := l.Producer(11); ps.CoordinatorEpoch != 3 || ps.TxnStartOffset != -1 {
		t.Fatalf("Producer(11) = %+v", ps)
	}
	_, err = l.AppendLeader(Marker(11, 0, true, 2, 1000))
	wantErr(t, "fenced coordinator (after commit)", err, kernel.ErrTxnCoordinatorFenced)
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("unstable offset after both ended")
	}
	mustLeader(t, l, Marker(11, 0, true, 3, 1000))  // 8: retried marker, no txn: appended, nothing else
	mustLeader(t, l, Marker(99, 0, false, 0, 1000)) // 9: unknown producer, no txn
	mustProduce(t, l, 12, 0, 0, 1, true)            // 10
	mustProduce(t, l, 10, 0, 3, 1, true)            // 11: 10 opens again
	mustLeader(t, l, Marker(12, 0, false, 0, 1000)) // 12: abort 12
	mustLeader(t, l, Marker(10, 0, false, 3, 1000)) // 13: abort 10 again
	if l.LogEndOffset() != 14 {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
	all := []kernel.AbortedTxn{{ProducerID: 10, FirstOffset: 2, LastOffset: 6}, {ProducerID: 12, FirstOffset: 10, LastOffset: 12}, {ProducerID: 10, FirstOffset: 11, LastOffset: 13}}
	for _, tc := range []struct {
		from, to int64
		want     []kernel.AbortedTxn
	}{
		{0, 100, all},
		{0, 2, nil},
		{0, 3, all[:1]},
		{6, 7, all[:1]},
		{7, 11, all[1:2]},
		{7, 12, all[1:]},
		{13, 14, all[2:]},
		{14, 20, nil},
	} {
		got := l.AbortedTxns(nil, tc.from, tc.to)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("AbortedTxns(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	dst := []kernel.AbortedTxn{{ProducerID: -5}}
	if got := l.AbortedTxns(dst, 0, 100); len(got) != 4 || got[0].ProducerID != -5 {
		t.Fatalf("AbortedTxns does not append to dst: %v", got)
	}
	// A transactional coordinator write (seq -1) opens a transaction too.
	mustLeader(t, l, ProducerBatch(20, 0, -1, 1, 1000, true)) // 14
	if off, ok := l.FirstUnstableOffset(); !ok || off != 14 {
		t.Fatalf("FirstUnstableOffset = %d, %v; want 14", off, ok)
	}
}

func testProducerEmptyAppend(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	mustProduce(t, l, 3, 1, 0, 2, false) // 0-1
	res, err := l.AppendProducer(nil, seqOf(3, 1, 2, 4))
	if err != nil || res.Duplicate || res.BaseOffset != 2 || res.LastOffset != 2 {
		t.Fatalf("empty AppendProducer: %+v, %v", res, err)
	}
	if l.LogEndOffset() != 2 {
		t.Fatalf("empty AppendProducer appended: log end %d", l.LogEndOffset())
	}
	if ps, _ := l.Producer(3); ps.LastSequence != 5 {
		t.Fatalf("sequence did not move on: %+v", ps)
	}
	mustLeader(t, l, Batch(0, 1000, 3, 1)) // 2-4
	res, err = l.AppendProducer(nil, seqOf(3, 1, 2, 4))
	if err != nil || !res.Duplicate || res.BaseOffset != 2 || res.LastOffset != 2 {
		t.Fatalf("retry of the empty range: %+v, %v", res, err)
	}
	res, err = produce(l, 3, 1, 2, 4, false)
	if err != nil || !res.Duplicate || res.BaseOffset != 2 {
		t.Fatalf("retry of the input batch: %+v, %v", res, err)
	}
	mustProduce(t, l, 3, 1, 6, 1, false)
	_, err = l.AppendProducer(nil, seqOf(3, 0, 7, 1))
	wantErr(t, "empty append with an old epoch", err, kernel.ErrInvalidProducerEpoch)
	_, err = l.AppendProducer(nil, seqOf(3, 1, 9, 1))
	wantErr(t, "empty append with a gap", err, kernel.ErrOutOfOrderSequence)
	// A transformed batch: the header's range differs from seq; seq is what is kept.
	out := ProducerBatch(3, 1, 7, 1, 1000, false)
	if _, err := l.AppendProducer(out, seqOf(3, 1, 7, 3)); err != nil {
		t.Fatal(err)
	}
	if ps, _ := l.Producer(3); ps.LastSequence != 9 {
		t.Fatalf("transformed batch: %+v", ps)
	}
}

func testProducerTruncate(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	mustProduce(t, l, 1, 0, 0, 2, false)           // 0-1
	mustProduce(t, l, 2, 0, 0, 1, true)            // 2
	mustLeader(t, l, Marker(2, 0, false, 1, 1000)) // 3
	mustProduce(t, l, 1, 0, 2, 2, false)           // 4-5
	mustProduce(t, l, 2, 0, 1, 1, true)            // 6
	mustProduce(t, l, 3, 0, 0, 1, false)           // 7
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if ps, ok := l.Producer(1); !ok || ps.LastSequence != 1 {
		t.Fatalf("Producer(1) after truncate = %+v, %v", ps, ok)
	}
	if _, ok := l.Producer(3); ok {
		t.Fatal("producer only past the cut survived")
	}
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("transaction past the cut still open")
	}
	if got := l.AbortedTxns(nil, 0, 100); len(got) != 1 {
		t.Fatalf("aborted %v", got)
	}
	// The retry of the cut batch is accepted again, not a duplicate.
	if res := mustProduce(t, l, 1, 0, 2, 2, false); res.BaseOffset != 4 {
		t.Fatalf("re-append at %d", res.BaseOffset)
	}
	if err := l.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if got := l.AbortedTxns(nil, 0, 100); len(got) != 0 {
		t.Fatalf("aborted past the cut survived: %v", got)
	}
	if off, ok := l.FirstUnstableOffset(); !ok || off != 2 {
		t.Fatalf("transaction before the cut not reopened: %d %v", off, ok)
	}
	if err := l.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if len(l.Producers()) != 0 {
		t.Fatalf("producers after truncating everything: %v", l.Producers())
	}
}

func testProducerExpiry(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	cfg.ProducerIDExpirationMs = 10_000
	l := mustOpen(t, s, tp0, cfg)
	e := enforcer(t, l)
	if _, err := l.AppendProducer(ProducerBatch(1, 0, 0, 1, 1000, false), seqOf(1, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendProducer(ProducerBatch(2, 0, 0, 1, 1000, true), seqOf(2, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendProducer(ProducerBatch(3, 0, 0, 1, 5000, false), seqOf(3, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := e.EnforceRetention(time.UnixMilli(1000 + 9_999)); err != nil {
		t.Fatal(err)
	}
	if len(l.Producers()) != 3 {
		t.Fatalf("expired early: %v", l.Producers())
	}
	if err := e.EnforceRetention(time.UnixMilli(1000 + 10_000)); err != nil {
		t.Fatal(err)
	}
	if got := l.Producers(); len(got) != 2 || got[0].ProducerID != 2 || got[1].ProducerID != 3 {
		t.Fatalf("after expiry: %v", got)
	}
	// An expired producer is unknown: it may start anywhere.
	if _, err := produce(l, 1, 0, 77, 1, false); err != nil {
		t.Fatal(err)
	}
}

func testProducerAtomicMultiBatch(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	mustProduce(t, l, 1, 2, 0, 1, false)
	leo := l.LogEndOffset()
	before := l.Producers()
	set := append(ProducerBatch(4, 0, -1, 1, 1000, true), ProducerBatch(1, 1, -1, 1, 1000, false)...)
	_, err := l.AppendLeader(set)
	wantErr(t, "second batch of an old epoch", err, kernel.ErrInvalidProducerEpoch)
	set = append(ProducerBatch(1, 2, -1, 1, 1000, true), ProducerBatch(1, 2, -1, 1, 1000, false)...)
	_, err = l.AppendLeader(set)
	wantErr(t, "non-transactional after transactional", err, kernel.ErrInvalidTxnState)
	if l.LogEndOffset() != leo || fmt.Sprint(l.Producers()) != fmt.Sprint(before) {
		t.Fatalf("failed append changed the log: end %d, producers %v", l.LogEndOffset(), l.Producers())
	}
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("failed append opened a transaction")
	}
	// A valid set: both batches take effect.
	set = append(ProducerBatch(5, 0, -1, 1, 1000, true), ProducerBatch(6, 0, -1, 2, 1000, true)...)
	res := mustLeader(t, l, set)
	if off, _ := l.FirstUnstableOffset(); off != res.BaseOffset {
		t.Fatalf("FirstUnstableOffset %d, want %d", off, res.BaseOffset)
	}
	if ps, _ := l.Producer(6); ps.TxnStartOffset != res.BaseOffset+1 {
		t.Fatalf("Producer(6) = %+v", ps)
	}
}

func testProducerLogStart(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	mustProduce(t, l, 1, 0, 0, 1, false)           // 0
	mustProduce(t, l, 2, 0, 0, 1, true)            // 1
	mustLeader(t, l, Marker(2, 0, false, 0, 1000)) // 2
	mustProduce(t, l, 3, 0, 0, 1, false)           // 3
	if err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if got := l.Producers(); len(got) != 1 || got[0].ProducerID != 3 {
		t.Fatalf("producers below the log start survived: %v", got)
	}
	if got := l.AbortedTxns(nil, 0, 100); len(got) != 0 {
		t.Fatalf("aborted below the log start: %v", got)
	}
	// A producer deleted with its records may start anywhere.
	mustProduce(t, l, 1, 0, 50, 1, false)
}

func testProducerReopen(t *testing.T, s kernel.Storage, reopen func(*testing.T, kernel.Storage) kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	first := mustProduce(t, l, 1, 0, 0, 2, false)
	mustProduce(t, l, 2, 1, 0, 1, true)
	mustLeader(t, l, Marker(2, 1, false, 4, 1000))
	mustProduce(t, l, 3, 0, 0, 1, true)
	want, wantAborted := l.Producers(), l.AbortedTxns(nil, 0, 100)
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, DefaultConfig())
	if got := l.Producers(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("producers after reopen %v, want %v", got, want)
	}
	if got := l.AbortedTxns(nil, 0, 100); fmt.Sprint(got) != fmt.Sprint(wantAborted) {
		t.Fatalf("aborted after reopen %v, want %v", got, wantAborted)
	}
	if off, ok := l.FirstUnstableOffset(); !ok || off != 4 {
		t.Fatalf("FirstUnstableOffset after reopen %d %v", off, ok)
	}
	res, err := produce(l, 1, 0, 0, 2, false)
	if err != nil || !res.Duplicate || res.BaseOffset != first.BaseOffset {
		t.Fatalf("retry after reopen: %+v, %v", res, err)
	}
	mustProduce(t, l, 1, 0, 2, 1, false)
}

// testProducerConcurrentRetries: copies of the same batch sent at once are appended
// once; every other copy is answered as a duplicate of it (the check and the append
// are atomic).
func testProducerConcurrentRetries(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	const copies = 8
	for round := range 20 {
		seq := int32(round * 3)
		results := make([]kernel.AppendResult, copies)
		errs := make([]error, copies)
		var wg sync.WaitGroup
		for i := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = produce(l, 1, 0, seq, 3, false)
			}()
		}
		wg.Wait()
		appended := 0
		for i := range copies {
			if errs[i] != nil {
				t.Fatalf("round %d copy %d: %v", round, i, errs[i])
			}
			if !results[i].Duplicate {
				appended++
			}
			if results[i].BaseOffset != int64(round*3) || results[i].LastOffset != int64(round*3+2) {
				t.Fatalf("round %d copy %d: %+v", round, i, results[i])
			}
		}
		if appended != 1 {
			t.Fatalf("round %d: appended %d times", round, appended)
		}
	}
	if l.LogEndOffset() != 60 {
		t.Fatalf("log end %d, want 60", l.LogEndOffset())
	}
}
