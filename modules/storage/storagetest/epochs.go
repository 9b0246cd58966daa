package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// Leader epochs, Reset and the high watermark (kernel.Log's replication methods).

// epochBatch is Batch(0, 1000, n, 10) in leader epoch epoch.
func epochBatch(epoch int32, n int) []byte {
	return SetLeaderEpoch(Batch(0, 1000, n, 10), epoch)
}

func ep(pairs ...int64) []kernel.EpochEntry {
	var out []kernel.EpochEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, kernel.EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

// wantEpochs checks l.Epochs() against pairs of (epoch, start offset).
func wantEpochs(t *testing.T, what string, l kernel.Log, pairs ...int64) {
	t.Helper()
	got, want := l.Epochs(), ep(pairs...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: Epochs() = %v, want %v", what, got, want)
	}
}

func wantEndOffset(t *testing.T, l kernel.Log, requested, epoch int32, end int64) {
	t.Helper()
	if e, off := l.EndOffsetForEpoch(requested); e != epoch || off != end {
		t.Fatalf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", requested, e, off, epoch, end)
	}
}

func mustAssign(t *testing.T, l kernel.Log, epoch int32, start int64) {
	t.Helper()
	if err := l.AssignEpoch(epoch, start); err != nil {
		t.Fatalf("AssignEpoch(%d, %d): %v", epoch, start, err)
	}
}

// testEpochsFromAppends: every kind of append adds the newer leader epochs of the
// batches it appends, and only those; a failed or duplicate append adds nothing.
func testEpochsFromAppends(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	wantEpochs(t, "empty log", l)
	wantEndOffset(t, l, 0, -1, -1)
	mustLeader(t, l, epochBatch(-1, 2)) // 0-1: no leader epoch
	wantEpochs(t, "batch without epoch", l)
	mustLeader(t, l, epochBatch(1, 2)) // 2-3
	wantEpochs(t, "leader batch", l, 1, 2)
	mustLeader(t, l, epochBatch(1, 2)) // 4-5
	mustLeader(t, l, epochBatch(0, 2)) // 6-7
	wantEpochs(t, "same and older epochs", l, 1, 2)

	seq := seqOf(7, 0, 0, 2)
	res, err := l.AppendProducer(SetLeaderEpoch(ProducerBatch(7, 0, 0, 2, 1000, false), 3), seq)
	if err != nil || res.BaseOffset != 8 {
		t.Fatalf("producer batch: %+v, %v", res, err)
	}
	wantEpochs(t, "producer batch", l, 1, 2, 3, 8)
	// A retry stamped by a newer leader is a duplicate: nothing appended, nothing added.
	res, err = l.AppendProducer(SetLeaderEpoch(ProducerBatch(7, 0, 0, 2, 1000, false), 4), seq)
	if err != nil || !res.Duplicate {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	_, err = l.AppendProducer(SetLeaderEpoch(ProducerBatch(7, 0, 5, 1, 1000, false), 4), seqOf(7, 0, 5, 1))
	wantErr(t, "sequence gap", err, kernel.ErrOutOfOrderSequence)
	wantEpochs(t, "duplicate and rejected producer batches", l, 1, 2, 3, 8)

	// Follower batches carry offsets (here with a gap) and several epochs at once.
	var multi []byte
	multi = append(multi, SetLeaderEpoch(Batch(20, 1000, 2, 5), 5)...) // 20-21
	multi = append(multi, SetLeaderEpoch(Batch(22, 1000, 1, 5), 5)...) // 22
	multi = append(multi, SetLeaderEpoch(Batch(23, 1000, 2, 5), 6)...) // 23-24
	if _, err := l.AppendFollower(multi); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, "follower batches", l, 1, 2, 3, 8, 5, 20, 6, 23)
	// All or nothing: a follower append whose second batch is below the log end adds
	// neither batch's epoch.
	bad := append(SetLeaderEpoch(Batch(25, 1000, 1, 5), 7), SetLeaderEpoch(Batch(25, 1000, 1, 5), 8)...)
	if _, err := l.AppendFollower(bad); !errors.Is(err, kernel.ErrInvalidOffset) {
		t.Fatalf("overlapping follower batches: %v", err)
	}
	wantEpochs(t, "failed follower append", l, 1, 2, 3, 8, 5, 20, 6, 23)
	// A transaction marker carries the leader's epoch like any batch.
	if res := mustLeader(t, l, SetLeaderEpoch(Marker(7, 0, true, 0, 1000), 9)); res.BaseOffset != 25 {
		t.Fatalf("marker at %d", res.BaseOffset)
	}
	wantEpochs(t, "marker", l, 1, 2, 3, 8, 5, 20, 6, 23, 9, 25)
	wantEndOffset(t, l, 9, 9, 26)
	wantEndOffset(t, l, 5, 5, 23)
	// Epochs returns a copy.
	es := l.Epochs()
	es[0].Epoch, es[0].StartOffset = 100, 100
	wantEpochs(t, "after changing the copy", l, 1, 2, 3, 8, 5, 20, 6, 23, 9, 25)
}

// testAssignEpoch: the explicit assignment of a new leader, with its rules.
func testAssignEpoch(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	mustAssign(t, l, 2, 0)
	wantEpochs(t, "first assignment", l, 2, 0)
	wantEndOffset(t, l, 2, 2, 0)
	wantErr(t, "above the log end", l.AssignEpoch(3, 1), kernel.ErrInvalidOffset)
	// Not newer than the latest: ignored, whatever the offset.
	for _, e := range []int32{2, 1, -1} {
		if err := l.AssignEpoch(e, 50); err != nil {
			t.Fatalf("AssignEpoch(%d, 50): %v, want nil (ignored)", e, err)
		}
	}
	wantEpochs(t, "ignored assignments", l, 2, 0)
	mustLeader(t, l, epochBatch(2, 2)) // 0-1
	mustLeader(t, l, epochBatch(2, 2)) // 2-3
	wantEpochs(t, "appends in the assigned epoch", l, 2, 0)
	// A new leader assigns its epoch at its log end before it appends.
	mustAssign(t, l, 4, 4)
	wantEpochs(t, "second leader", l, 2, 0, 4, 4)
	wantEndOffset(t, l, 4, 4, 4)
	wantEndOffset(t, l, 2, 2, 4)
	wantErr(t, "below the latest start", l.AssignEpoch(5, 3), kernel.ErrInvalidOffset)
	mustLeader(t, l, epochBatch(4, 2)) // 4-5
	mustLeader(t, l, epochBatch(3, 2)) // 6-7: an older epoch adds nothing
	wantEpochs(t, "appends after the assignment", l, 2, 0, 4, 4)
	wantEndOffset(t, l, 4, 4, 8)
	// Two leaders in a row without appends: both start at the log end.
	mustAssign(t, l, 5, 8)
	mustAssign(t, l, 6, 8)
	wantEpochs(t, "two empty epochs", l, 2, 0, 4, 4, 5, 8, 6, 8)
	wantEndOffset(t, l, 5, 5, 8)
	wantEndOffset(t, l, 6, 6, 8)

	// An empty cache still rejects a start below the log start.
	l2 := mustOpen(t, s, kernel.TopicPartition{Topic: tp0.Topic, Partition: 1}, DefaultConfig())
	mustLeader(t, l2, epochBatch(-1, 4))
	if err := l2.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "below the log start", l2.AssignEpoch(1, 1), kernel.ErrInvalidOffset)
	wantErr(t, "negative start", l2.AssignEpoch(1, -1), kernel.ErrInvalidOffset)
	mustAssign(t, l2, 1, 2)
	wantEpochs(t, "at the log start", l2, 1, 2)
}

// testEndOffsetForEpoch: the answers OffsetForLeaderEpoch gives (Kafka's
// LeaderEpochFileCache.endOffsetFor).
func testEndOffsetForEpoch(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	for _, r := range []int32{-1, 0, 5} {
		wantEndOffset(t, l, r, -1, -1)
	}
	mustLeader(t, l, epochBatch(-1, 5)) // 0-4: no epoch
	mustLeader(t, l, epochBatch(2, 5))  // 5-9
	mustLeader(t, l, epochBatch(4, 10)) // 10-19
	mustLeader(t, l, epochBatch(7, 5))  // 20-24
	mustLeader(t, l, epochBatch(7, 5))  // 25-29
	wantEpochs(t, "setup", l, 2, 5, 4, 10, 7, 20)
	tests := []struct {
		name      string
		requested int32
		epoch     int32
		end       int64
	}{
		{"latest", 7, 7, 30},
		{"below all", 1, 1, 5},
		{"zero, below all", 0, 0, 5},
		{"first", 2, 2, 10},
		{"middle", 4, 4, 20},
		{"between first and middle", 3, 2, 10},
		{"between middle and latest", 5, 4, 20},
		{"just below latest", 6, 4, 20},
		{"newer than all", 8, -1, -1},
		{"negative", -1, -1, -1},
		{"very negative", -7, -1, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantEndOffset(t, l, tc.requested, tc.epoch, tc.end)
		})
	}
	mustLeader(t, l, epochBatch(7, 5))
	wantEndOffset(t, l, 7, 7, 35)
}

// testEpochsTruncate: Truncate cuts the entries at the new log end; a moving log start
// (DeleteRecordsBefore, retention) cuts their head.
func testEpochsTruncate(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(len(epochBatch(0, 2))) // one batch per segment
	l := mustOpen(t, s, tp0, cfg)
	for _, e := range []int32{1, 1, 3, 3, 5, 5} { // bases 0 2 4 6 8 10, LEO 12
		mustLeader(t, l, epochBatch(e, 2))
	}
	wantEpochs(t, "setup", l, 1, 0, 3, 4, 5, 8)
	if err := l.Truncate(10); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, "truncate inside the last epoch", l, 1, 0, 3, 4, 5, 8)
	if err := l.Truncate(9); err != nil { // drops batch 8-9, the last of epoch 5
		t.Fatal(err)
	}
	wantEpochs(t, "truncate to an epoch's start", l, 1, 0, 3, 4)
	wantEndOffset(t, l, 3, 3, 8)
	wantEndOffset(t, l, 5, -1, -1)
	mustLeader(t, l, epochBatch(6, 2)) // 8-9
	wantEpochs(t, "append after truncate", l, 1, 0, 3, 4, 6, 8)

	for _, tc := range []struct {
		start int64
		want  []int64
	}{
		{1, []int64{1, 1, 3, 4, 6, 8}},
		{4, []int64{3, 4, 6, 8}},
		{5, []int64{3, 5, 6, 8}},
		{9, []int64{6, 9}},
	} {
		if err := l.DeleteRecordsBefore(tc.start); err != nil {
			t.Fatal(err)
		}
		wantEpochs(t, fmt.Sprintf("log start %d", tc.start), l, tc.want...)
	}
	wantEndOffset(t, l, 3, 3, 9)          // below every entry now: the first entry's start
	if err := l.Truncate(9); err != nil { // at the log start: emptied there
		t.Fatal(err)
	}
	wantEpochs(t, "truncated to the log start", l)
	if l.LogStartOffset() != 9 || l.LogEndOffset() != 9 {
		t.Fatalf("start %d end %d, want 9 9", l.LogStartOffset(), l.LogEndOffset())
	}
	// A former leader that assigned its epoch at the log end and appended nothing is
	// truncated at its log end when it diverges: nothing is cut, but that epoch goes
	// (Kafka's truncateTo), or its fetches would name it and diverge forever.
	mustLeader(t, l, epochBatch(6, 1)) // 9
	mustAssign(t, l, 8, 10)
	wantEpochs(t, "epoch assigned at the log end", l, 6, 9, 8, 10)
	if err := l.Truncate(10); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, "truncated at the log end", l, 6, 9)
	if l.LogEndOffset() != 10 {
		t.Fatalf("log end %d after a truncation at it, want 10", l.LogEndOffset())
	}
	if err := l.Truncate(9); err != nil { // back to the state the rest expects
		t.Fatal(err)
	}

	re, ok := l.(RetentionEnforcer)
	if !ok {
		return
	}
	mustLeader(t, l, epochBatch(6, 2)) // 9-10
	mustLeader(t, l, epochBatch(7, 2)) // 11-12
	wantEpochs(t, "before retention", l, 6, 9, 7, 11)
	cfg.RetentionBytes = cfg.SegmentBytes // the active segment only
	l.SetConfig(cfg)
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 11 {
		t.Fatalf("log start %d after size retention, want 11", l.LogStartOffset())
	}
	wantEpochs(t, "size retention", l, 7, 11)
	cfg.RetentionBytes = 0 // the active segment too: the log is emptied at its end
	l.SetConfig(cfg)
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 13)
	wantEpochs(t, "retention of the active segment", l, 7, 13)
	wantEndOffset(t, l, 7, 7, 13)
	wantEndOffset(t, l, 6, 6, 13)
}

// testReset: Reset empties the log at any offset, forgetting producers, epochs and the
// high watermark; appends, reads and producers start over there. A read held across
// it keeps its bytes.
func testReset(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2 * int64(len(epochBatch(0, 2)))
	l := mustOpen(t, s, tp0, cfg)
	mustProduce(t, l, 7, 0, 0, 2, true) // 0-1, an open transaction
	mustProduce(t, l, 8, 0, 0, 2, true) // 2-3
	mustLeader(t, l, Marker(8, 0, false, 0, 1000))
	for _, e := range []int32{1, 2, 2} {
		mustLeader(t, l, epochBatch(e, 2))
	}
	leo := l.LogEndOffset()
	l.SetHighWatermark(leo)
	rr, err := l.Read(0, 1<<20, leo, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(-1); err == nil {
		t.Fatal("Reset(-1) succeeded")
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("a failed Reset changed the log end to %d", l.LogEndOffset())
	}
	if err := l.Reset(100); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 100)
	wantEpochs(t, "after reset", l)
	wantEndOffset(t, l, 2, -1, -1)
	if _, ok := l.Producer(7); ok || len(l.Producers()) != 0 {
		t.Fatalf("producers after reset: %+v", l.Producers())
	}
	if off, ok := l.FirstUnstableOffset(); ok {
		t.Fatalf("open transaction at %d after reset", off)
	}
	if ab := l.AbortedTxns(nil, 0, 1000); len(ab) != 0 {
		t.Fatalf("aborted transactions after reset: %+v", ab)
	}
	if hw := l.HighWatermark(); hw != 100 {
		t.Fatalf("HighWatermark %d after reset, want 100", hw)
	}
	// The held read still has the old, whole batches.
	raw, err := ReadAll(rr)
	rr.Release()
	if err != nil {
		t.Fatal(err)
	}
	if bs, err := ParseAll(raw); err != nil || len(bs) != 6 || bs[5].Last != leo-1 {
		t.Fatalf("read held across reset: %d batches, %v", len(bs), err)
	}

	res := mustLeader(t, l, epochBatch(3, 2))
	if res.BaseOffset != 100 || res.LogStartOffset != 100 {
		t.Fatalf("append after reset: %+v", res)
	}
	wantEpochs(t, "append after reset", l, 3, 100)
	eqBases(t, "read after reset", read(t, l, 100, 1<<20, 200, true), 100)
	// Producer 7 is unknown now: it may start at any sequence, and no transaction is
	// open.
	if res := mustProduce(t, l, 7, 0, 40, 1, false); res.BaseOffset != 102 {
		t.Fatalf("producer after reset at %d", res.BaseOffset)
	}
	for i := 0; i < 3; i++ { // roll a segment or two
		mustLeader(t, l, epochBatch(3, 2))
	}
	// Down to an offset below the log start, then to the log end.
	if err := l.Reset(10); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 10)
	mustLeader(t, l, epochBatch(4, 2))
	if err := l.Reset(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 12)
	wantEpochs(t, "reset at the log end", l)
	if res := mustLeader(t, l, epochBatch(4, 1)); res.BaseOffset != 12 {
		t.Fatalf("append at %d", res.BaseOffset)
	}
}

// testHighWatermark: the recorded high watermark, clamped to the log; truncation and
// Reset lower it, and it outlives a Close of the Log.
func testHighWatermark(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	wantHW := func(what string, want int64) {
		t.Helper()
		if got := l.HighWatermark(); got != want {
			t.Fatalf("%s: HighWatermark %d, want %d", what, got, want)
		}
	}
	wantHW("new log", 0)
	appendN(t, l, 5, 2, 1000) // LEO 10
	wantHW("never set", 0)
	l.SetHighWatermark(4)
	wantHW("set", 4)
	l.SetHighWatermark(100)
	wantHW("above the log end", 10)
	l.SetHighWatermark(-7)
	wantHW("negative", 0)
	l.SetHighWatermark(6)
	if err := l.DeleteRecordsBefore(8); err != nil {
		t.Fatal(err)
	}
	wantHW("below the log start", 8)
	l.SetHighWatermark(10)
	if err := l.Truncate(9); err != nil { // drops batch 8-9
		t.Fatal(err)
	}
	wantHW("after truncate", 8)
	appendN(t, l, 2, 2, 1000) // LEO 12: the new records are not replicated
	wantHW("appends after truncate", 8)
	l.SetHighWatermark(11)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, s, tp0, DefaultConfig())
	wantHW("reopened Log", 11)
	if err := l.Reset(50); err != nil {
		t.Fatal(err)
	}
	wantHW("after reset", 50)
	appendN(t, l, 1, 2, 1000)
	wantHW("appends after reset", 50)

	// Set on every HW move, read on every fetch: concurrently, and never outside the log.
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); i < 2000; i++ {
				l.SetHighWatermark(40 + i%20)
				if hw := l.HighWatermark(); hw < l.LogStartOffset() || hw > l.LogEndOffset() {
					t.Errorf("HighWatermark %d outside the log", hw)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// testEpochsReopen: entries, the high watermark and a Reset survive a restart. An
// epoch assigned at the log end with no record in it does not (Kafka drops it too: the
// leader assigns it again).
func testEpochsReopen(t *testing.T, s kernel.Storage, reopen func(*testing.T, kernel.Storage) kernel.Storage) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2 * int64(len(epochBatch(0, 2)))
	l := mustOpen(t, s, tp0, cfg)
	for _, e := range []int32{1, 1, 3, 3} { // 0-7
		mustLeader(t, l, epochBatch(e, 2))
	}
	if err := l.DeleteRecordsBefore(1); err != nil {
		t.Fatal(err)
	}
	mustAssign(t, l, 5, 8)
	l.SetHighWatermark(6)
	wantEpochs(t, "before reopen", l, 1, 1, 3, 4, 5, 8)
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, cfg)
	wantEpochs(t, "reopened", l, 1, 1, 3, 4)
	wantEndOffset(t, l, 3, 3, 8)
	if hw := l.HighWatermark(); hw != 6 {
		t.Fatalf("HighWatermark %d after reopen, want 6", hw)
	}
	mustLeader(t, l, epochBatch(5, 2)) // 8-9
	l.SetHighWatermark(9)
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, cfg)
	wantEpochs(t, "reopened again", l, 1, 1, 3, 4, 5, 8)
	if hw := l.HighWatermark(); hw != 9 {
		t.Fatalf("HighWatermark %d after reopen, want 9", hw)
	}
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, cfg)
	wantEpochs(t, "reopened after truncate", l, 1, 1)
	if hw := l.HighWatermark(); hw != 4 {
		t.Fatalf("HighWatermark %d after truncate and reopen, want 4", hw)
	}
	mustProduce(t, l, 7, 0, 0, 2, true)
	if err := l.Reset(20); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, cfg)
	checkEmptyAt(t, l, 20)
	wantEpochs(t, "reopened after reset", l)
	if _, ok := l.Producer(7); ok {
		t.Fatal("producer survived reset and reopen")
	}
	if hw := l.HighWatermark(); hw != 20 {
		t.Fatalf("HighWatermark %d after reset and reopen, want 20", hw)
	}
	if res := mustLeader(t, l, epochBatch(6, 2)); res.BaseOffset != 20 {
		t.Fatalf("append after reset and reopen at %d", res.BaseOffset)
	}
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, cfg)
	wantEpochs(t, "reopened after appending to the reset log", l, 6, 20)
}
