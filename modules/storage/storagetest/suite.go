package storagetest

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// RetentionEnforcer is implemented by a Log that applies retention on demand. The
// storage modules run it from their background loop; tests call it directly with the
// clock they want.
type RetentionEnforcer interface {
	EnforceRetention(now time.Time) error
}

// Option configures Run.
type Option func(*options)

type options struct {
	reopen func(t *testing.T, s kernel.Storage) kernel.Storage
}

// WithReopen enables the persistence tests: reopen cleanly shuts s down and returns a
// new Storage over the same data.
func WithReopen(fn func(t *testing.T, s kernel.Storage) kernel.Storage) Option {
	return func(o *options) { o.reopen = fn }
}

// DefaultConfig is a LogConfig with Kafka's defaults, retention off.
func DefaultConfig() kernel.LogConfig {
	return kernel.LogConfig{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		IndexIntervalBytes: 4096,
		SegmentIndexBytes:  10 << 20,
		RetentionMs:        -1,
		RetentionBytes:     -1,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
		FileDeleteDelayMs:  60000,
		CleanupPolicy:      "delete",
	}
}

var testTopicID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// Run runs the conformance suite. open returns a fresh, empty Storage for one test and
// registers its own cleanup.
func Run(t *testing.T, open func(t *testing.T) kernel.Storage, opts ...Option) {
	var o options
	for _, fn := range opts {
		fn(&o)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s kernel.Storage)
	}{
		{"AppendRead", testAppendRead},
		{"MaxOffset", testMaxOffset},
		{"MaxBytesAndMinOneBatch", testMaxBytes},
		{"ReadBoundsModel", testReadModel},
		{"OutOfRange", testOutOfRange},
		{"OffsetForTimestamp", testOffsetForTimestamp},
		{"MaxTimestamp", testMaxTimestamp},
		{"DeleteRecordsBefore", testDeleteRecords},
		{"Truncate", testTruncate},
		{"AppendFollower", testAppendFollower},
		{"RetentionBySize", testRetentionBySize},
		{"RetentionByTime", testRetentionByTime},
		{"RetentionOfActive", testRetentionOfActive},
		{"RetentionCompactOnly", testRetentionCompactOnly},
		{"ConfigChange", testConfigChange},
		{"OpenTwice", testOpenTwice},
		{"ReopenWithNewTopicID", testReopenWithNewTopicID},
		{"RemoveAndDirs", testRemoveAndDirs},
		{"Close", testClose},
		{"Hammer", testHammer},
		{"ProducerSequences", testProducerSequences},
		{"ProducerEpochs", testProducerEpochs},
		{"ProducerTransactions", testProducerTransactions},
		{"ProducerEmptyAppend", testProducerEmptyAppend},
		{"ProducerTruncate", testProducerTruncate},
		{"ProducerExpiry", testProducerExpiry},
		{"ProducerAtomicMultiBatch", testProducerAtomicMultiBatch},
		{"ProducerLogStart", testProducerLogStart},
		{"ProducerConcurrentRetries", testProducerConcurrentRetries},
		{"EpochsFromAppends", testEpochsFromAppends},
		{"AssignEpoch", testAssignEpoch},
		{"EndOffsetForEpoch", testEndOffsetForEpoch},
		{"EpochsTruncate", testEpochsTruncate},
		{"Reset", testReset},
		{"HighWatermark", testHighWatermark},
	}
	reopens := []struct {
		name string
		fn   func(t *testing.T, s kernel.Storage, reopen func(*testing.T, kernel.Storage) kernel.Storage)
	}{
		{"Reopen", testReopen},
		{"ProducerReopen", testProducerReopen},
		{"EpochsReopen", testEpochsReopen},
		{"ReopenAfterRetentionOfActive", testReopenAfterRetentionOfActive},
	}
	// run runs fn as a parallel subtest on a fresh storage; one that needs reopening is
	// skipped for an implementation that is not persistent (o.reopen nil).
	run := func(name string, persistent bool, fn func(t *testing.T, s kernel.Storage)) {
		t.Run(name, func(t *testing.T) {
			if persistent && o.reopen == nil {
				t.Skip("implementation is not persistent")
			}
			t.Parallel()
			fn(t, open(t))
		})
	}
	for _, tc := range tests {
		run(tc.name, false, tc.fn)
	}
	for _, tc := range compactionTests {
		run(tc.name, false, tc.fn)
	}
	for _, tc := range reopens {
		run(tc.name, true, func(t *testing.T, s kernel.Storage) { tc.fn(t, s, o.reopen) })
	}
}

func mustOpen(t *testing.T, s kernel.Storage, tp kernel.TopicPartition, cfg kernel.LogConfig) kernel.Log {
	t.Helper()
	l, err := s.Open(tp, testTopicID, cfg)
	if err != nil {
		t.Fatalf("Open(%v): %v", tp, err)
	}
	return l
}

var tp0 = kernel.TopicPartition{Topic: "conformance", Partition: 0}

// appendN appends count batches of n records each (timestamps ts, ts+1, ...) and
// returns the size of one batch.
func appendN(t *testing.T, l kernel.Log, count, n int, ts int64) int64 {
	t.Helper()
	var size int64
	for i := 0; i < count; i++ {
		b := Batch(12345, ts+int64(i*n), n, 10)
		size = int64(len(b))
		if _, err := l.AppendLeader(b); err != nil {
			t.Fatalf("AppendLeader #%d: %v", i, err)
		}
	}
	return size
}

// read reads and parses, failing the test on errors.
func read(t *testing.T, l kernel.Log, off, maxBytes, maxOffset int64, minOne bool) []BatchInfo {
	t.Helper()
	rr, err := l.Read(off, maxBytes, maxOffset, minOne)
	if err != nil {
		t.Fatalf("Read(%d, %d, %d, %v): %v", off, maxBytes, maxOffset, minOne, err)
	}
	if rr.Release == nil {
		t.Fatalf("Read(%d): nil Release", off)
	}
	defer rr.Release()
	b, err := ReadAll(rr)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != rr.Size {
		t.Fatalf("Read(%d): Size %d, chunks hold %d bytes", off, rr.Size, len(b))
	}
	bs, err := ParseAll(b)
	if err != nil {
		t.Fatalf("Read(%d): %v", off, err)
	}
	// NextOffset, when the log gives it, is past the last batch read and not past
	// the log's end.
	if n := len(bs); n > 0 && rr.NextOffset != 0 && (rr.NextOffset <= bs[n-1].Last || rr.NextOffset > l.LogEndOffset()) {
		t.Fatalf("Read(%d): NextOffset %d, the last batch read ends at %d, the log at %d", off, rr.NextOffset, bs[n-1].Last, l.LogEndOffset())
	}
	return bs
}

func bases(bs []BatchInfo) []int64 {
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.Base
	}
	return out
}

func eqBases(t *testing.T, what string, bs []BatchInfo, want ...int64) {
	t.Helper()
	got := bases(bs)
	if fmt.Sprint(got) != fmt.Sprint(want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s: batch base offsets %v, want %v", what, got, want)
	}
}

func testAppendRead(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	for i, want := range []kernel.AppendResult{{BaseOffset: 0, LastOffset: 2}, {BaseOffset: 3, LastOffset: 5}, {BaseOffset: 6, LastOffset: 8}} {
		b := Batch(999, 1000, 3, 20)
		res, err := l.AppendLeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != want.BaseOffset || res.LastOffset != want.LastOffset || res.LogStartOffset != 0 {
			t.Fatalf("append #%d: %+v, want base %d last %d", i, res, want.BaseOffset, want.LastOffset)
		}
		if res.LogAppendTime <= 0 {
			t.Fatalf("append #%d: LogAppendTime %d", i, res.LogAppendTime)
		}
	}
	if got := l.LogEndOffset(); got != 9 {
		t.Fatalf("LogEndOffset %d, want 9", got)
	}
	if got := l.LogStartOffset(); got != 0 {
		t.Fatalf("LogStartOffset %d, want 0", got)
	}
	if l.Size() <= 0 {
		t.Fatalf("Size %d", l.Size())
	}
	tests := []struct {
		name string
		off  int64
		want []int64
	}{
		{"from start", 0, []int64{0, 3, 6}},
		{"mid first batch", 2, []int64{0, 3, 6}},
		{"second batch", 3, []int64{3, 6}},
		{"last record", 8, []int64{6}},
		{"log end", 9, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eqBases(t, tc.name, read(t, l, tc.off, 1<<20, l.LogEndOffset(), false), tc.want...)
		})
	}
	// Multiple batches in one append.
	var multi []byte
	multi = AppendBatch(multi, 0, 2000, 2, 5)
	multi = AppendBatch(multi, 0, 2002, 1, 5)
	res, err := l.AppendLeader(multi)
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 9 || res.LastOffset != 11 {
		t.Fatalf("multi-batch append: %+v, want 9..11", res)
	}
	eqBases(t, "after multi", read(t, l, 9, 1<<20, 12, false), 9, 11)
}

func testMaxOffset(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	appendN(t, l, 4, 2, 1000) // bases 0 2 4 6
	tests := []struct {
		name      string
		off, maxO int64
		want      []int64
	}{
		{"bound at batch start", 0, 4, []int64{0, 2}},
		{"bound inside batch", 0, 5, []int64{0, 2, 4}},
		{"bound at offset", 2, 2, nil},
		{"bound zero", 0, 0, nil},
		{"bound past end", 0, 100, []int64{0, 2, 4, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eqBases(t, tc.name, read(t, l, tc.off, 1<<20, tc.maxO, true), tc.want...)
		})
	}
}

func testMaxBytes(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	size := appendN(t, l, 4, 2, 1000)
	tests := []struct {
		name     string
		maxBytes int64
		minOne   bool
		want     []int64
	}{
		{"exactly one", size, false, []int64{0}},
		{"one and a bit", size + 1, false, []int64{0}},
		{"exactly two", 2 * size, false, []int64{0, 2}},
		{"too small without minOneBatch", size - 1, false, nil},
		{"too small with minOneBatch", size - 1, true, []int64{0}},
		{"zero with minOneBatch", 0, true, []int64{0}},
		{"zero without minOneBatch", 0, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eqBases(t, tc.name, read(t, l, 0, tc.maxBytes, 100, tc.minOne), tc.want...)
		})
	}
}

func testOutOfRange(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	eqBases(t, "empty log at 0", read(t, l, 0, 1<<20, 100, true))
	appendN(t, l, 2, 2, 1000)
	for _, off := range []int64{-1, 5, 100} {
		if _, err := l.Read(off, 1<<20, 100, true); !errors.Is(err, kernel.ErrOffsetOutOfRange) {
			t.Errorf("Read(%d): %v, want ErrOffsetOutOfRange", off, err)
		}
	}
}

func testOffsetForTimestamp(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	if _, _, ok, err := l.OffsetForTimestamp(0); ok || err != nil {
		t.Fatalf("empty log: ok %v err %v", ok, err)
	}
	// offsets 0-2 at 1000-1002, 3-5 at 2000-2002, 6-8 at 3000-3002
	for _, ts := range []int64{1000, 2000, 3000} {
		if _, err := l.AppendLeader(Batch(0, ts, 3, 10)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name           string
		ts             int64
		wantOff, wantT int64
		ok             bool
	}{
		{"before all", 0, 0, 1000, true},
		{"first", 1000, 0, 1000, true},
		{"inside first batch", 1001, 1, 1001, true},
		{"between batches", 1500, 3, 2000, true},
		{"last record", 3002, 8, 3002, true},
		{"after all", 3003, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			off, ts, ok, err := l.OffsetForTimestamp(tc.ts)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok || (ok && (off != tc.wantOff || ts != tc.wantT)) {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", tc.ts, off, ts, ok, tc.wantOff, tc.wantT, tc.ok)
			}
		})
	}
}

func testMaxTimestamp(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	if _, _, ok := l.MaxTimestamp(); ok {
		t.Fatal("empty log has a max timestamp")
	}
	for _, ts := range []int64{5000, 9000, 7000, 9000} {
		if _, err := l.AppendLeader(Batch(0, ts, 3, 10)); err != nil {
			t.Fatal(err)
		}
	}
	ts, off, ok := l.MaxTimestamp()
	if !ok || ts != 9002 || off != 3 {
		t.Fatalf("MaxTimestamp = %d, %d, %v; want 9002 at batch 3", ts, off, ok)
	}
}

func testDeleteRecords(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	l := mustOpen(t, s, tp0, cfg)
	size := appendN(t, l, 1, 2, 1000)
	cfg.SegmentBytes = size // one batch per segment
	l.SetConfig(cfg)
	appendN(t, l, 4, 2, 1002) // bases 0 2 4 6 8, LEO 10
	before := l.Size()
	if err := l.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	if got := l.LogStartOffset(); got != 5 {
		t.Fatalf("LogStartOffset %d, want 5", got)
	}
	if _, err := l.Read(4, 1<<20, 100, true); !errors.Is(err, kernel.ErrOffsetOutOfRange) {
		t.Fatalf("Read below log start: %v", err)
	}
	eqBases(t, "read at log start", read(t, l, 5, 1<<20, 100, false), 4, 6, 8)
	if l.Size() >= before {
		t.Fatalf("Size %d not below %d: no segment deleted", l.Size(), before)
	}
	if err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if got := l.LogStartOffset(); got != 5 {
		t.Fatalf("log start moved down to %d", got)
	}
	if err := l.DeleteRecordsBefore(11); err == nil {
		t.Fatal("DeleteRecordsBefore past log end succeeded")
	}
	if err := l.DeleteRecordsBefore(10); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 10 || l.LogEndOffset() != 10 {
		t.Fatalf("start %d end %d, want 10 10", l.LogStartOffset(), l.LogEndOffset())
	}
	eqBases(t, "empty after delete", read(t, l, 10, 1<<20, 100, true))
	res, err := l.AppendLeader(Batch(0, 2000, 1, 1))
	if err != nil || res.BaseOffset != 10 || res.LogStartOffset != 10 {
		t.Fatalf("append after delete: %+v, %v", res, err)
	}
}

func testTruncate(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	l := mustOpen(t, s, tp0, cfg)
	size := appendN(t, l, 1, 2, 1000)
	cfg.SegmentBytes = 2 * size
	l.SetConfig(cfg)
	appendN(t, l, 5, 2, 1002) // bases 0..10, LEO 12, two batches per segment
	tests := []struct {
		name     string
		to       int64
		wantLEO  int64
		wantRead []int64
	}{
		{"past end is a no-op", 20, 12, []int64{0, 2, 4, 6, 8, 10}},
		{"at batch boundary", 8, 8, []int64{0, 2, 4, 6}},
		{"inside a batch drops it", 5, 4, []int64{0, 2}},
		{"segment boundary", 2, 2, []int64{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := l.Truncate(tc.to); err != nil {
				t.Fatal(err)
			}
			if got := l.LogEndOffset(); got != tc.wantLEO {
				t.Fatalf("LEO %d, want %d", got, tc.wantLEO)
			}
			eqBases(t, tc.name, read(t, l, 0, 1<<20, 100, true), tc.wantRead...)
		})
	}
	res, err := l.AppendLeader(Batch(0, 5000, 2, 1))
	if err != nil || res.BaseOffset != 2 {
		t.Fatalf("append after truncate: %+v %v", res, err)
	}
	if ts, off, ok := l.MaxTimestamp(); !ok || ts != 5001 || off != 2 {
		t.Fatalf("MaxTimestamp after truncate = %d %d %v", ts, off, ok)
	}
	if err := l.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 0 || l.LogStartOffset() != 0 || l.Size() != 0 {
		t.Fatalf("after Truncate(0): start %d end %d size %d", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
	if _, _, ok := l.MaxTimestamp(); ok {
		t.Fatal("empty log has a max timestamp")
	}
	// A cut through the batch that holds the log start empties the log at the log start.
	if _, err := l.AppendLeader(Batch(0, 1, 4, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 2 || l.LogEndOffset() != 2 {
		t.Fatalf("truncate through the log start: start %d end %d, want 2 2", l.LogStartOffset(), l.LogEndOffset())
	}
	if res, err := l.AppendLeader(Batch(0, 1, 1, 1)); err != nil || res.BaseOffset != 2 {
		t.Fatalf("append after: %+v %v", res, err)
	}
}

func testAppendFollower(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	res, err := l.AppendFollower(Batch(0, 1000, 3, 1))
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 2 {
		t.Fatalf("follower append: %+v %v", res, err)
	}
	if _, err := l.AppendFollower(Batch(2, 1000, 1, 1)); !errors.Is(err, kernel.ErrInvalidOffset) {
		t.Fatalf("append below LEO: %v, want ErrInvalidOffset", err)
	}
	var overlap []byte
	overlap = AppendBatch(overlap, 3, 1000, 2, 1)
	overlap = AppendBatch(overlap, 4, 1000, 2, 1)
	if _, err := l.AppendFollower(overlap); !errors.Is(err, kernel.ErrInvalidOffset) {
		t.Fatalf("overlapping batches: %v, want ErrInvalidOffset", err)
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("failed append changed LEO to %d", l.LogEndOffset())
	}
	res, err = l.AppendFollower(Batch(10, 1000, 2, 1))
	if err != nil || res.BaseOffset != 10 || l.LogEndOffset() != 12 {
		t.Fatalf("append with gap: %+v %v LEO %d", res, err, l.LogEndOffset())
	}
	eqBases(t, "follower log", read(t, l, 0, 1<<20, 100, false), 0, 10)
	eqBases(t, "read in a gap", read(t, l, 5, 1<<20, 100, false), 10)
	eqBases(t, "read at the gap's start", read(t, l, 3, 1<<20, 100, false), 10)
	// Garbage is rejected as corrupt and changes nothing.
	bad := Batch(12, 1000, 1, 1)
	bad[len(bad)-1] ^= 0xff
	if _, err := l.AppendLeader(bad[:30]); !errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("truncated batch: %v, want ErrCorrupt", err)
	}
	if l.LogEndOffset() != 12 {
		t.Fatalf("failed append changed LEO to %d", l.LogEndOffset())
	}
}

func enforcer(t *testing.T, l kernel.Log) RetentionEnforcer {
	t.Helper()
	re, ok := l.(RetentionEnforcer)
	if !ok {
		t.Skipf("%T does not implement RetentionEnforcer", l)
	}
	return re
}

func testRetentionBySize(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	l := mustOpen(t, s, tp0, cfg)
	re := enforcer(t, l)
	size := int64(len(Batch(0, 0, 2, 10)))
	cfg.SegmentBytes = size // one batch per segment
	l.SetConfig(cfg)
	now := time.Now().UnixMilli()
	appendN(t, l, 6, 2, now) // 6 segments, LEO 12
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 0 {
		t.Fatalf("retention off deleted data: log start %d", l.LogStartOffset())
	}
	cfg.RetentionBytes = 3*size + size/2
	l.SetConfig(cfg)
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Size(), 4*size; got != want {
		t.Fatalf("Size %d after retention, want %d", got, want)
	}
	if got := l.LogStartOffset(); got != 4 {
		t.Fatalf("LogStartOffset %d, want 4", got)
	}
	cfg.RetentionBytes = size / 2 // exceeded, but removing the active segment is not needed
	l.SetConfig(cfg)
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := l.Size(); got != size {
		t.Fatalf("Size %d: retention.bytes below the active segment keeps it (%d)", got, size)
	}
	eqBases(t, "active segment", read(t, l, l.LogStartOffset(), 1<<20, 100, false), 10)
	// retention.bytes 0: the active segment's removal is needed too. The log rolls an
	// empty segment at its end and becomes empty, keeping its offsets.
	cfg.RetentionBytes = 0
	l.SetConfig(cfg)
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 12)
	res, err := l.AppendLeader(Batch(0, now, 2, 10))
	if err != nil || res.BaseOffset != 12 || res.LastOffset != 13 {
		t.Fatalf("append after active-segment retention: %+v %v; want offsets 12-13", res, err)
	}
	eqBases(t, "after active-segment retention", read(t, l, 12, 1<<20, 100, false), 12)
}

// checkEmptyAt checks that l holds no records and both its log start and log end
// offsets are leo.
func checkEmptyAt(t *testing.T, l kernel.Log, leo int64) {
	t.Helper()
	if l.LogStartOffset() != leo || l.LogEndOffset() != leo || l.Size() != 0 {
		t.Fatalf("log start %d end %d size %d; want %d %d 0", l.LogStartOffset(), l.LogEndOffset(), l.Size(), leo, leo)
	}
	eqBases(t, "empty log", read(t, l, leo, 1<<20, leo, false))
	if _, err := l.Read(leo-1, 1<<20, leo, true); !errors.Is(err, kernel.ErrOffsetOutOfRange) {
		t.Fatalf("Read(%d) below the log start: %v", leo-1, err)
	}
	if _, _, ok, err := l.OffsetForTimestamp(0); err != nil || ok {
		t.Fatalf("OffsetForTimestamp on an empty log: %v %v", ok, err)
	}
}

// testRetentionOfActive: a single burst of records past retention.ms is deleted with
// its (only, active) segment; later appends continue at the old log end.
func testRetentionOfActive(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	l := mustOpen(t, s, tp0, cfg)
	re := enforcer(t, l)
	now := time.Now()
	appendN(t, l, 3, 2, now.Add(-time.Hour).UnixMilli()) // one segment, LEO 6
	cfg.RetentionMs = time.Minute.Milliseconds()
	l.SetConfig(cfg)
	// A young active segment stays.
	if err := re.EnforceRetention(now.Add(-time.Hour + time.Second)); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 0 || l.LogEndOffset() != 6 {
		t.Fatalf("young active segment deleted: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	rr, err := l.Read(0, 1<<20, 6, true) // held across the retention
	if err != nil {
		t.Fatal(err)
	}
	if err := re.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 6)
	raw, err := ReadAll(rr)
	rr.Release()
	if err != nil {
		t.Fatalf("read held across retention: %v", err)
	}
	held, err := ParseAll(raw)
	if err != nil {
		t.Fatalf("read held across retention: %v", err)
	}
	eqBases(t, "read held across retention", held, 0, 2, 4)
	// Retention of an empty log changes nothing.
	if err := re.EnforceRetention(now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 6)
	res, err := l.AppendLeader(Batch(0, now.UnixMilli(), 2, 10))
	if err != nil || res.BaseOffset != 6 || res.LogStartOffset != 6 {
		t.Fatalf("append after retention: %+v %v; want base 6, log start 6", res, err)
	}
	if err := re.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	eqBases(t, "new records", read(t, l, 6, 1<<20, 100, false), 6)
	if ts, off, ok := l.MaxTimestamp(); !ok || off != 6 || ts != now.UnixMilli()+1 {
		t.Fatalf("MaxTimestamp after retention: %d %d %v", ts, off, ok)
	}
}

// testReopenAfterRetentionOfActive: a log emptied by retention of its active segment
// keeps its log start and log end offsets across a restart.
func testReopenAfterRetentionOfActive(t *testing.T, s kernel.Storage, reopen func(*testing.T, kernel.Storage) kernel.Storage) {
	cfg := DefaultConfig()
	size := int64(len(Batch(0, 0, 2, 10)))
	cfg.SegmentBytes = 2 * size
	l := mustOpen(t, s, tp0, cfg)
	re := enforcer(t, l)
	appendN(t, l, 5, 2, 1000) // LEO 10, 3 segments
	cfg.RetentionMs = time.Hour.Milliseconds()
	l.SetConfig(cfg)
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 10)
	wantEpochs(t, "after retention of the active segment", l, 0, 10)
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, cfg)
	checkEmptyAt(t, l, 10)
	// An entry at the log end carries no record: dropped at open (as in Kafka).
	wantEpochs(t, "reopened", l)
	res, err := l.AppendLeader(Batch(0, time.Now().UnixMilli(), 1, 1))
	if err != nil || res.BaseOffset != 10 {
		t.Fatalf("append after reopen: %+v %v; want base 10", res, err)
	}
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, cfg)
	if l.LogStartOffset() != 10 || l.LogEndOffset() != 11 {
		t.Fatalf("second reopen: start %d end %d; want 10 11", l.LogStartOffset(), l.LogEndOffset())
	}
	eqBases(t, "after second reopen", read(t, l, 10, 1<<20, 100, false), 10)
}

func testRetentionByTime(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	l := mustOpen(t, s, tp0, cfg)
	re := enforcer(t, l)
	size := int64(len(Batch(0, 0, 2, 10)))
	cfg.SegmentBytes = size
	cfg.SegmentMs = math.MaxInt64 / 2
	l.SetConfig(cfg)
	now := time.Now()
	old := now.Add(-10 * time.Hour).UnixMilli()
	appendN(t, l, 3, 2, old)                   // 0 2 4: old
	appendN(t, l, 2, 2, now.UnixMilli()-1000)  // 6 8: recent
	appendN(t, l, 1, 2, old)                   // 10: old again, but after recent ones
	cfg.RetentionMs = time.Hour.Milliseconds() //
	l.SetConfig(cfg)
	if err := re.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	if got := l.LogStartOffset(); got != 6 {
		t.Fatalf("LogStartOffset %d, want 6 (old prefix deleted)", got)
	}
	eqBases(t, "after time retention", read(t, l, 6, 1<<20, 100, false), 6, 8, 10)
	if _, err := l.Read(4, 1<<20, 100, true); !errors.Is(err, kernel.ErrOffsetOutOfRange) {
		t.Fatalf("Read(4) after retention: %v", err)
	}
}

func testConfigChange(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	l := mustOpen(t, s, tp0, cfg)
	size := appendN(t, l, 4, 1, 1000) // one segment
	re, hasRetention := l.(RetentionEnforcer)
	if hasRetention {
		cfg.RetentionBytes = 1 // below the log size, yet keeping the active segment
		l.SetConfig(cfg)
		if err := re.EnforceRetention(time.Now()); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() != 0 {
			t.Fatal("retention deleted the active segment")
		}
	}
	// Smaller segments through Open: applies to later appends.
	cfg.SegmentBytes = size
	cfg.RetentionBytes = -1
	l2 := mustOpen(t, s, tp0, cfg)
	if l2 != l {
		t.Fatal("Open of an open log returned a different Log")
	}
	appendN(t, l, 3, 1, 2000) // each rolls a new segment
	if hasRetention {
		cfg.RetentionBytes = 2 * size
		l.SetConfig(cfg)
		if err := re.EnforceRetention(time.Now()); err != nil {
			t.Fatal(err)
		}
		if got := l.LogStartOffset(); got != 5 {
			t.Fatalf("LogStartOffset %d after shrinking retention, want 5", got)
		}
	}
	eqBases(t, "tail", read(t, l, 5, 1<<20, 100, false), 5, 6)
}

func testOpenTwice(t *testing.T, s kernel.Storage) {
	a := mustOpen(t, s, tp0, DefaultConfig())
	b := mustOpen(t, s, tp0, DefaultConfig())
	if a != b {
		t.Fatal("two Logs for one partition")
	}
	other := mustOpen(t, s, kernel.TopicPartition{Topic: tp0.Topic, Partition: 1}, DefaultConfig())
	appendN(t, a, 1, 1, 1)
	if other.LogEndOffset() != 0 {
		t.Fatal("partitions share a log")
	}
}

// testReopenWithNewTopicID: a closed partition opened again under another (non-zero)
// topic id is a re-created topic whose deletion this storage missed; the new id wins and
// the log starts empty at 0, without the old incarnation's records or log start.
func testReopenWithNewTopicID(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	appendN(t, l, 3, 2, 1000)
	if err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	newID := [16]byte{0xfe, 1}
	l, err := s.Open(tp0, newID, DefaultConfig())
	if err != nil {
		t.Fatalf("open with the re-created topic's id: %v", err)
	}
	if l.LogStartOffset() != 0 || l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("re-created topic: start %d end %d size %d, want an empty log at 0", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
	appendN(t, l, 1, 1, 5000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The same id again keeps the data.
	l, err = s.Open(tp0, newID, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 1 {
		t.Fatalf("reopened with the same id: log end %d, want 1", l.LogEndOffset())
	}
}

func testRemoveAndDirs(t *testing.T, s kernel.Storage) {
	tp1 := kernel.TopicPartition{Topic: "other.topic_x", Partition: 7}
	l := mustOpen(t, s, tp0, DefaultConfig())
	l1 := mustOpen(t, s, tp1, DefaultConfig())
	appendN(t, l, 2, 2, 1)
	appendN(t, l1, 1, 2, 1)
	sizes := map[kernel.TopicPartition]int64{}
	dirs := s.Dirs()
	if len(dirs) == 0 {
		t.Fatal("no log dirs")
	}
	for _, d := range dirs {
		for _, p := range d.Partitions {
			sizes[p.TP] = p.Size
		}
	}
	if sizes[tp0] != l.Size() || sizes[tp1] != l1.Size() || l.Size() == 0 {
		t.Fatalf("Dirs sizes %v; logs %d %d", sizes, l.Size(), l1.Size())
	}
	if err := s.Remove(tp0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendLeader(Batch(0, 1, 1, 1)); !errors.Is(err, kernel.ErrLogClosed) {
		t.Fatalf("append to removed log: %v, want ErrLogClosed", err)
	}
	for _, d := range s.Dirs() {
		for _, p := range d.Partitions {
			if p.TP == tp0 {
				t.Fatal("removed partition still listed")
			}
		}
	}
	l = mustOpen(t, s, tp0, DefaultConfig())
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("reopened removed partition: LEO %d size %d", l.LogEndOffset(), l.Size())
	}
	if err := s.Remove(kernel.TopicPartition{Topic: "never", Partition: 0}); err != nil {
		t.Fatalf("Remove of an unknown partition: %v", err)
	}
}

func testClose(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, DefaultConfig())
	appendN(t, l, 1, 1, 1)
	rr, err := l.Read(0, 1<<20, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A held read stays readable after Close.
	b, err := ReadAll(rr)
	if err != nil {
		t.Fatalf("read held across Close: %v", err)
	}
	if bs, err := ParseAll(b); err != nil || len(bs) != 1 {
		t.Fatalf("read held across Close: %v %v", bs, err)
	}
	rr.Release()
	if _, err := l.AppendLeader(Batch(0, 1, 1, 1)); !errors.Is(err, kernel.ErrLogClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	if _, err := l.Read(0, 1, 1, true); !errors.Is(err, kernel.ErrLogClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	l2 := mustOpen(t, s, tp0, DefaultConfig())
	if l2.LogEndOffset() != 1 {
		t.Fatalf("reopened log: LEO %d, want 1", l2.LogEndOffset())
	}
}

func testReopen(t *testing.T, s kernel.Storage, reopen func(*testing.T, kernel.Storage) kernel.Storage) {
	cfg := DefaultConfig()
	size := int64(len(Batch(0, 0, 2, 10)))
	cfg.SegmentBytes = 2 * size
	cfg.IndexIntervalBytes = 1
	l := mustOpen(t, s, tp0, cfg)
	appendN(t, l, 7, 2, 1000) // LEO 14, 4 segments
	if err := l.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	wantSize := l.Size()
	s = reopen(t, s)
	l = mustOpen(t, s, tp0, cfg)
	if l.LogStartOffset() != 5 || l.LogEndOffset() != 14 || l.Size() != wantSize {
		t.Fatalf("after reopen: start %d end %d size %d; want 5 14 %d", l.LogStartOffset(), l.LogEndOffset(), l.Size(), wantSize)
	}
	eqBases(t, "after reopen", read(t, l, 5, 1<<20, 100, false), 4, 6, 8, 10, 12)
	eqBases(t, "last segment", read(t, l, 13, 1<<20, 100, false), 12)
	if off, ts, ok, err := l.OffsetForTimestamp(1009); err != nil || !ok || off != 9 || ts != 1009 {
		t.Fatalf("OffsetForTimestamp after reopen: %d %d %v %v", off, ts, ok, err)
	}
	if ts, off, ok := l.MaxTimestamp(); !ok || ts != 1013 || off != 12 {
		t.Fatalf("MaxTimestamp after reopen: %d %d %v", ts, off, ok)
	}
	res, err := l.AppendLeader(Batch(0, 5000, 1, 1))
	if err != nil || res.BaseOffset != 14 {
		t.Fatalf("append after reopen: %+v %v", res, err)
	}
}

// testHammer runs appenders, readers and a log-start mover on one log. Readers check that
// every read holds whole, valid batches with increasing offsets, even while segments
// roll and are deleted under them.
func testHammer(t *testing.T, s kernel.Storage) {
	const (
		appenders = 4
		readers   = 4
		loops     = 200
	)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 * int64(len(Batch(0, 0, 3, 50)))
	cfg.IndexIntervalBytes = 256
	l := mustOpen(t, s, tp0, cfg)
	var wg sync.WaitGroup
	var done atomic.Bool
	errc := make(chan error, appenders+readers+1)
	for a := 0; a < appenders; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := Batch(0, 0, 3, 50)
			for i := 0; i < loops; i++ {
				b := append(buf[:0:0], buf...)
				res, err := l.AppendLeader(b)
				if err != nil {
					errc <- fmt.Errorf("append: %w", err)
					return
				}
				if res.LastOffset != res.BaseOffset+2 {
					errc <- fmt.Errorf("append result %+v", res)
					return
				}
			}
		}()
	}
	var rwg sync.WaitGroup
	for r := 0; r < readers; r++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			i := int64(r)
			for !done.Load() {
				i++
				start, end := l.LogStartOffset(), l.LogEndOffset()
				off := start
				if end > start {
					off = start + i%(end-start+1)
				}
				rr, err := l.Read(off, 2048, end, true)
				if errors.Is(err, kernel.ErrOffsetOutOfRange) {
					continue // raced with the log-start mover
				}
				if err != nil {
					errc <- fmt.Errorf("read %d: %w", off, err)
					return
				}
				b, err := ReadAll(rr)
				rr.Release()
				if err != nil {
					errc <- err
					return
				}
				bs, err := ParseAll(b)
				if err != nil {
					errc <- fmt.Errorf("read %d: %w", off, err)
					return
				}
				for j, bi := range bs {
					if j == 0 && (bi.Base > off || bi.Last < off) {
						errc <- fmt.Errorf("read %d: first batch %d..%d", off, bi.Base, bi.Last)
						return
					}
					if j > 0 && bi.Base != bs[j-1].Last+1 {
						errc <- fmt.Errorf("read %d: batch %d after %d", off, bi.Base, bs[j-1].Last)
						return
					}
					if bi.Base >= end {
						errc <- fmt.Errorf("read %d: batch %d at or past bound %d", off, bi.Base, end)
						return
					}
				}
			}
		}()
	}
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for !done.Load() {
			end := l.LogEndOffset()
			if err := l.DeleteRecordsBefore(end / 2); err != nil {
				errc <- fmt.Errorf("delete records: %w", err)
				return
			}
			if re, ok := l.(RetentionEnforcer); ok {
				if err := re.EnforceRetention(time.Now()); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	wg.Wait()
	done.Store(true)
	rwg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if got, want := l.LogEndOffset(), int64(appenders*loops*3); got != want {
		t.Fatalf("LEO %d, want %d", got, want)
	}
}

// testReadModel checks Read against a brute-force model for every start offset and a
// grid of bounds, with a dense index (implementations may skip over indexed stretches)
// and a segment boundary in the middle.
func testReadModel(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	bs := int64(len(Batch(0, 0, 2, 30)))
	cfg.IndexIntervalBytes = 1
	cfg.SegmentBytes = 12 * bs
	l := mustOpen(t, s, tp0, cfg)
	for i := 0; i < 20; i++ { // bases 0, 2, ..., 38; second segment at 24
		if _, err := l.AppendLeader(Batch(0, 1000, 2, 30)); err != nil {
			t.Fatal(err)
		}
	}
	for off := int64(0); off <= 40; off++ {
		for _, maxOffset := range []int64{0, 1, 7, 8, 23, 24, 25, 39, 40} {
			for _, maxBytes := range []int64{0, bs - 1, bs, 3*bs + 1, 13 * bs, 100 * bs, math.MaxInt64} {
				for _, minOne := range []bool{false, true} {
					var want []int64
					var total int64
					for b := off / 2 * 2; b < 40 && b < maxOffset; b += 2 {
						if total+bs > maxBytes && !(total == 0 && minOne) {
							break
						}
						total += bs
						want = append(want, b)
					}
					what := fmt.Sprintf("Read(%d, %d, %d, %v)", off, maxBytes, maxOffset, minOne)
					eqBases(t, what, read(t, l, off, maxBytes, maxOffset, minOne), want...)
				}
			}
		}
	}
}
