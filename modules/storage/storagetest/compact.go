package storagetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/compact"
)

// The compaction section: every Log of a compacted topic must implement compact.Log
// with the segment log's semantics (the same cleanable end, dirty ratio, grouping and
// the rules of compact.Filter).

var compactionTests = []struct {
	name string
	fn   func(t *testing.T, s kernel.Storage)
}{
	{"CompactLatestPerKey", testCompactLatestPerKey},
	{"CompactTimestamps", testCompactTimestamps},
	{"CompactTombstones", testCompactTombstones},
	{"CompactActiveSegmentAndHW", testCompactActiveAndHW},
	{"CompactFirstUnstableOffset", testCompactFirstUnstable},
	{"CompactMinLag", testCompactMinLag},
	{"CompactDirtyRatio", testCompactDirtyRatio},
	{"CompactAndDelete", testCompactAndDelete},
	{"CompactPolicyChange", testCompactPolicyChange},
	{"CompactTruncate", testCompactTruncate},
	{"CompactDeleteRecords", testCompactDeleteRecords},
	{"CompactSmallMap", testCompactSmallMap},
	{"CompactMapTooSmall", testCompactMapTooSmall},
	{"CompactModel", testCompactModel},
	{"CompactHammer", testCompactHammer},
}

// CompactConfig is DefaultConfig for a compacted topic with small segments (1 KiB),
// delete.retention.ms 1000, min.cleanable.dirty.ratio 0.5 and no max lag.
func CompactConfig() kernel.LogConfig {
	cfg := DefaultConfig()
	cfg.CleanupPolicy = "compact"
	cfg.SegmentBytes = 1024
	cfg.IndexIntervalBytes = 1
	cfg.SegmentIndexBytes = 4096
	cfg.DeleteRetentionMs = 1000
	cfg.MinCleanableDirtyRatio = 0.5
	cfg.MaxCompactionLagMs = math.MaxInt64
	return cfg
}

// Keyed builds one batch of records key=value at timestamps ts, ts+1, ... from
// alternating keys and values; a value "<nil>" is a tombstone.
func Keyed(ts int64, kv ...string) []byte {
	var recs []recordbatch.Record
	for i := 0; i+1 < len(kv); i += 2 {
		r := recordbatch.Record{Key: []byte(kv[i]), TimestampDelta: int64(i / 2)}
		if kv[i+1] != "<nil>" {
			r.Value = []byte(kv[i+1])
		}
		recs = append(recs, r)
	}
	return recordbatch.Build(recordbatch.Options{BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, recs...)
}

// Rec is one record as read back from a log.
type Rec struct {
	Offset    int64
	Key       string
	Value     string
	Tombstone bool
	Ts        int64
	// The batch's fields.
	PID           int64
	Transactional bool
	Control       bool
	Commit        bool // a COMMIT marker (Control)
	BatchBase     int64
	BatchLast     int64
}

func (r Rec) String() string {
	switch {
	case r.Control:
		return fmt.Sprintf("marker(pid %d commit %v)@%d", r.PID, r.Commit, r.Offset)
	case r.Tombstone:
		return fmt.Sprintf("%s@%d=<tombstone>", r.Key, r.Offset)
	}
	return fmt.Sprintf("%s@%d=%s", r.Key, r.Offset, r.Value)
}

// ReadRecords reads every record (markers included, as Control records) from offset
// from to the log end, checking that offsets strictly increase and that every batch
// passes its CRC. An empty batch yields no record.
func ReadRecords(l kernel.Log, from int64) ([]Rec, error) {
	var out []Rec
	off, last := from, int64(-1)
	d := recordbatch.Decoder{Compacted: true}
	for off < l.LogEndOffset() {
		rr, err := l.Read(off, 1<<20, math.MaxInt64, true)
		if err != nil {
			return nil, err
		}
		b, err := ReadAll(rr)
		rr.Release()
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			break
		}
		err = recordbatch.Split(b, func(h recordbatch.Header, batch []byte) error {
			if err := recordbatch.CheckCRC(batch); err != nil {
				return fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
			}
			if h.LastOffset() < off {
				return fmt.Errorf("read at %d returned batch %d..%d", off, h.BaseOffset, h.LastOffset())
			}
			off = h.LastOffset() + 1
			if h.IsControl() {
				m, err := recordbatch.ParseMarker(batch)
				if err != nil {
					return err
				}
				if h.BaseOffset <= last {
					return fmt.Errorf("offset %d after %d", h.BaseOffset, last)
				}
				last = h.BaseOffset
				out = append(out, Rec{Offset: h.BaseOffset, Ts: h.MaxTimestamp, PID: h.ProducerID, Transactional: true, Control: true, Commit: m.Commit, BatchBase: h.BaseOffset, BatchLast: h.LastOffset()})
				return nil
			}
			_, err := d.Records(batch, func(r *recordbatch.Record) error {
				if r.Offset <= last {
					return fmt.Errorf("offset %d after %d", r.Offset, last)
				}
				last = r.Offset
				out = append(out, Rec{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value), Tombstone: r.Value == nil, Ts: r.Timestamp,
					PID: h.ProducerID, Transactional: h.IsTransactional(), BatchBase: h.BaseOffset, BatchLast: h.LastOffset()})
				return nil
			})
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readRecs(t *testing.T, l kernel.Log) []Rec {
	t.Helper()
	recs, err := ReadRecords(l, l.LogStartOffset())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// latestByKey is the model of a compacted log: the latest record per key.
func latestByKey(recs []Rec) map[string]Rec {
	m := map[string]Rec{}
	for _, r := range recs {
		if !r.Control {
			m[r.Key] = r
		}
	}
	return m
}

func below(recs []Rec, off int64) []Rec {
	var out []Rec
	for _, r := range recs {
		if r.Offset < off {
			out = append(out, r)
		}
	}
	return out
}

func atOrAbove(recs []Rec, off int64) []Rec {
	var out []Rec
	for _, r := range recs {
		if r.Offset >= off {
			out = append(out, r)
		}
	}
	return out
}

func compactLog(t *testing.T, l kernel.Log) compact.Log {
	t.Helper()
	cl, ok := l.(compact.Log)
	if !ok {
		t.Fatalf("%T does not implement compact.Log", l)
	}
	return cl
}

// cleanOnce runs one pass at nowMs with a 1 MiB map.
func cleanOnce(t *testing.T, l kernel.Log, nowMs int64) compact.Result {
	t.Helper()
	res, err := compactLog(t, l).Clean(context.Background(), &compact.Env{Map: compact.NewOffsetMap(1<<20, 0.9), NowMs: nowMs})
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	return res
}

// produceVersions appends versions × keys one-record batches, key i at version v
// "k<i>"="v<v>" (timestamp ts), then tombstones for the keys listed, then one more
// batch so that everything before it is sealed, and moves the high watermark to the
// log end.
func produceVersions(t *testing.T, l kernel.Log, ts int64, keys, versions int, tombstones ...int) {
	t.Helper()
	for v := 0; v < versions; v++ {
		for k := 0; k < keys; k++ {
			mustLeader(t, l, Keyed(ts, fmt.Sprintf("k%d", k), fmt.Sprintf("v%d", v)))
		}
	}
	for _, k := range tombstones {
		mustLeader(t, l, Keyed(ts, fmt.Sprintf("k%d", k), "<nil>"))
	}
	seal(t, l, ts)
}

// seal appends enough filler records (key "tail") to roll a new segment of
// CompactConfig's size, so that everything before them is in sealed segments, and
// moves the high watermark to the log end.
func seal(t *testing.T, l kernel.Log, ts int64) {
	t.Helper()
	b := Keyed(ts, "tail", "x")
	for range 1024/len(b) + 2 {
		mustLeader(t, l, Keyed(ts, "tail", "x"))
	}
	l.SetHighWatermark(l.LogEndOffset())
}

func eqRecs(t *testing.T, what string, got, want []Rec) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// checkCompacted checks after a pass that the latest value of every key is what it
// was before (want), that every kept record is one of before's at its offset, and
// that below firstDirty each key has at most one record, its latest there.
func checkCompacted(t *testing.T, l kernel.Log, before []Rec, firstDirty int64) []Rec {
	t.Helper()
	after := readRecs(t, l)
	if got, want := latestByKey(after), latestByKey(before); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("latest values changed:\n got %v\nwant %v", got, want)
	}
	byOff := map[int64]Rec{}
	for _, r := range before {
		byOff[r.Offset] = r
	}
	for _, r := range after {
		if o, ok := byOff[r.Offset]; !ok || o.String() != r.String() || o.Ts != r.Ts {
			t.Fatalf("record %v (ts %d) after the clean was %v (ts %d) before", r, r.Ts, o, o.Ts)
		}
	}
	latestBelow := latestByKey(below(before, firstDirty))
	for _, r := range below(after, firstDirty) {
		if !r.Control && latestBelow[r.Key].Offset != r.Offset {
			t.Fatalf("record %v kept below the first dirty offset %d; the latest there is %v", r, firstDirty, latestBelow[r.Key])
		}
	}
	return after
}

// checkReadsAcrossGaps reads at every offset from the log start to the log end and
// checks the first record returned is the first kept one at or after it.
func checkReadsAcrossGaps(t *testing.T, l kernel.Log, recs []Rec) {
	t.Helper()
	i := 0
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off++ {
		for i < len(recs) && recs[i].Offset < off {
			i++
		}
		got, err := ReadRecords(l, off)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		got = atOrAbove(got, off)
		if i == len(recs) {
			if len(got) != 0 {
				t.Fatalf("read at %d: %v past the last record", off, got[0])
			}
			continue
		}
		if len(got) == 0 || got[0].Offset != recs[i].Offset {
			t.Fatalf("read at %d: first record %v, want %v", off, got, recs[i])
		}
	}
}

func testCompactLatestPerKey(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, CompactConfig())
	produceVersions(t, l, 1000, 10, 20, 3, 7)
	before := readRecs(t, l)
	size := l.Size()
	leo := l.LogEndOffset()
	res := cleanOnce(t, l, 5000)
	if res.RecordsRemoved == 0 || res.FirstDirty <= 100 {
		t.Fatalf("pass: %+v", res)
	}
	after := checkCompacted(t, l, before, res.FirstDirty)
	if l.Size() >= size || l.LogEndOffset() != leo || l.LogStartOffset() != 0 {
		t.Fatalf("size %d (was %d), offsets %d..%d (were 0..%d)", l.Size(), size, l.LogStartOffset(), l.LogEndOffset(), leo)
	}
	for _, k := range []string{"k3", "k7"} {
		if r := latestByKey(after)[k]; !r.Tombstone {
			t.Fatalf("tombstone of %s missing after the first clean: %v", k, r)
		}
	}
	checkReadsAcrossGaps(t, l, after)
	// The progress outlives the handle: a reopened log has nothing to clean.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, s, tp0, CompactConfig())
	eqRecs(t, "after reopening the handle", readRecs(t, l), after)
	if c, ok := compactLog(t, l).Cleanable(5000); ok {
		t.Fatalf("cleanable again after reopening: %+v", c)
	}
	if res2 := cleanOnce(t, l, 5000); res2.RecordsRemoved != 0 || res2.FirstDirty != res.FirstDirty {
		t.Fatalf("second pass: %+v, first dirty was %d", res2, res.FirstDirty)
	}
	// Appends after a clean go on at the log end.
	if r := mustLeader(t, l, Keyed(1000, "k0", "again")); r.BaseOffset != leo {
		t.Fatalf("append after clean at %d, want %d", r.BaseOffset, leo)
	}
}

func testCompactTimestamps(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, CompactConfig())
	// "big" first carries the largest timestamp, then is superseded; the others have
	// increasing timestamps, 10 keys in turn.
	mustLeader(t, l, Keyed(1_000_000, "big", "old"))
	for i := range 120 {
		mustLeader(t, l, Keyed(int64(2000+10*i), fmt.Sprintf("k%d", i%10), fmt.Sprintf("v%d", i)))
	}
	mustLeader(t, l, Keyed(5000, "big", "new"))
	seal(t, l, 6000)
	before := readRecs(t, l)
	if ts, off, ok := l.MaxTimestamp(); !ok || ts != 1_000_000 || off != 0 {
		t.Fatalf("MaxTimestamp before = %d %d %v", ts, off, ok)
	}
	res := cleanOnce(t, l, 10_000)
	after := checkCompacted(t, l, before, res.FirstDirty)
	// MaxTimestamp: the largest of the kept batches (all hold one record here).
	wantTs, wantOff := int64(-1), int64(0)
	for _, r := range after {
		if r.Ts > wantTs {
			wantTs, wantOff = r.Ts, r.Offset
		}
	}
	if ts, off, ok := l.MaxTimestamp(); !ok || ts != wantTs || off != wantOff {
		t.Fatalf("MaxTimestamp after = %d at %d, %v; want %d at %d", ts, off, ok, wantTs, wantOff)
	}
	// OffsetForTimestamp: the first kept record at or after the time.
	for ts := int64(0); ts <= 7000; ts += 5 {
		var want *Rec
		for i := range after {
			if after[i].Ts >= ts {
				want = &after[i]
				break
			}
		}
		off, rts, ok, err := l.OffsetForTimestamp(ts)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			if ok {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %d; want none", ts, off, rts)
			}
			continue
		}
		if !ok || off != want.Offset || rts != want.Ts {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %v at %d", ts, off, rts, ok, want, want.Ts)
		}
	}
	if off, _, ok, err := l.OffsetForTimestamp(1_000_000); err != nil || ok {
		t.Fatalf("OffsetForTimestamp of the superseded record: %d %v %v", off, ok, err)
	}
}

func testCompactTombstones(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, CompactConfig())
	produceVersions(t, l, 1000, 4, 5, 1, 2)
	res := cleanOnce(t, l, 5000) // the horizon is 5000 + delete.retention.ms = 6000
	if r := latestByKey(readRecs(t, l))["k1"]; !r.Tombstone {
		t.Fatalf("tombstone of k1 gone at the first clean: %v", r)
	}
	// New data for another pass, before and after the horizon.
	more := func() {
		for i := range 40 {
			mustLeader(t, l, Keyed(1000, fmt.Sprintf("x%d", i%5), "y"))
		}
		seal(t, l, 1000)
	}
	more()
	res = cleanOnce(t, l, 5999)
	if res.TombstonesRemoved != 0 {
		t.Fatalf("tombstones removed before their horizon: %+v", res.Stats)
	}
	got := latestByKey(readRecs(t, l))
	for _, k := range []string{"k1", "k2"} {
		if r, ok := got[k]; !ok || !r.Tombstone {
			t.Fatalf("tombstone of %s gone before its horizon: %v", k, r)
		}
	}
	more()
	res = cleanOnce(t, l, 6000)
	got = latestByKey(readRecs(t, l))
	for _, k := range []string{"k1", "k2"} {
		if r, ok := got[k]; ok {
			t.Fatalf("tombstone of %s still there after its horizon: %v (%+v)", k, r, res.Stats)
		}
	}
	if res.TombstonesRemoved != 2 {
		t.Fatalf("TombstonesRemoved %d, want 2", res.TombstonesRemoved)
	}
	if r := got["k0"]; r.Value != "v4" {
		t.Fatalf("k0 = %v, want v4", r)
	}
}

func testCompactActiveAndHW(t *testing.T, s kernel.Storage) {
	cfg := CompactConfig()
	l := mustOpen(t, s, tp0, cfg)
	produceVersions(t, l, 1000, 5, 10)
	// Nothing replicated: nothing cleanable.
	l.SetHighWatermark(0)
	before := readRecs(t, l)
	if c, ok := compactLog(t, l).Cleanable(5000); ok {
		t.Fatalf("cleanable with the high watermark at 0: %+v", c)
	}
	if res := cleanOnce(t, l, 5000); res.RecordsRemoved != 0 {
		t.Fatalf("cleaned above the high watermark: %+v", res)
	}
	eqRecs(t, "high watermark 0", readRecs(t, l), before)
	// The high watermark in the middle: nothing at or above it changes.
	hw := l.LogEndOffset() / 2
	l.SetHighWatermark(hw)
	res := cleanOnce(t, l, 5000)
	if res.FirstDirty > hw {
		t.Fatalf("first dirty offset %d above the high watermark %d", res.FirstDirty, hw)
	}
	after := checkCompacted(t, l, before, res.FirstDirty)
	eqRecs(t, "at or above the high watermark", atOrAbove(after, hw), atOrAbove(before, hw))
	// The active segment is never cleaned, however much it holds.
	cfg.SegmentBytes = 1 << 30
	l.SetConfig(cfg)
	active := l.LogEndOffset()
	for v := range 20 {
		for k := range 5 {
			mustLeader(t, l, Keyed(1000, fmt.Sprintf("k%d", k), fmt.Sprintf("w%d", v)))
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	before = readRecs(t, l)
	for {
		res = cleanOnce(t, l, 5000)
		if res.FirstDirty > active {
			t.Fatalf("first dirty offset %d inside the active segment (from %d at most)", res.FirstDirty, active)
		}
		if res.BytesRead == 0 || res.RecordsRemoved == 0 {
			break
		}
	}
	after = checkCompacted(t, l, before, res.FirstDirty)
	eqRecs(t, "the active segment", atOrAbove(after, active), atOrAbove(before, active))
}

func testCompactFirstUnstable(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, CompactConfig())
	produceVersions(t, l, 1000, 5, 4)
	// An open transaction, then more superseding records behind it.
	txn := recordbatch.Build(recordbatch.Options{ProducerID: 9, ProducerEpoch: 0, BaseSequence: 0, BaseTimestamp: 1000, Transactional: true},
		recordbatch.Record{Key: []byte("k0"), Value: []byte("txn")})
	fu := mustAppendProducer(t, l, txn, seqOf(9, 0, 0, 1)).BaseOffset
	produceVersions(t, l, 1000, 5, 4)
	before := readRecs(t, l)
	res := cleanOnce(t, l, 5000)
	if res.FirstDirty > fu {
		t.Fatalf("first dirty offset %d past the open transaction at %d", res.FirstDirty, fu)
	}
	after := checkCompacted(t, l, before, res.FirstDirty)
	eqRecs(t, "at or above the first unstable offset", atOrAbove(after, fu), atOrAbove(before, fu))
	// Once committed, the rest is cleanable.
	mustLeader(t, l, Marker(9, 0, true, 0, 1000))
	seal(t, l, 1000)
	before = readRecs(t, l)
	res = cleanOnce(t, l, 5000)
	if res.FirstDirty <= fu {
		t.Fatalf("first dirty offset %d after the commit, want past %d", res.FirstDirty, fu)
	}
	checkCompacted(t, l, before, res.FirstDirty)
}

func mustAppendProducer(t *testing.T, l kernel.Log, b []byte, seq kernel.SeqRange) kernel.AppendResult {
	t.Helper()
	res, err := l.AppendProducer(b, seq)
	if err != nil || res.Duplicate {
		t.Fatalf("AppendProducer: %+v, %v", res, err)
	}
	return res
}

func testCompactMinLag(t *testing.T, s kernel.Storage) {
	cfg := CompactConfig()
	cfg.MinCompactionLagMs = 1000
	l := mustOpen(t, s, tp0, cfg)
	produceVersions(t, l, 1000, 5, 10)
	young := l.LogEndOffset()
	produceVersions(t, l, 100_000, 5, 10)
	before := readRecs(t, l)
	res := cleanOnce(t, l, 100_500) // the second half is younger than the lag
	if res.FirstDirty > young {
		t.Fatalf("first dirty offset %d past the young records at %d", res.FirstDirty, young)
	}
	if res.RecordsRemoved == 0 {
		t.Fatalf("nothing cleaned below the lag: %+v", res)
	}
	after := checkCompacted(t, l, before, res.FirstDirty)
	eqRecs(t, "records younger than min.compaction.lag.ms", atOrAbove(after, young), atOrAbove(before, young))
	res = cleanOnce(t, l, 200_000)
	if res.FirstDirty <= young {
		t.Fatalf("first dirty offset %d once the lag passed, want past %d", res.FirstDirty, young)
	}
	checkCompacted(t, l, before, res.FirstDirty)
}

func testCompactDirtyRatio(t *testing.T, s kernel.Storage) {
	cfg := CompactConfig()
	l := mustOpen(t, s, tp0, cfg)
	cl := compactLog(t, l)
	if c, ok := cl.Cleanable(5000); ok {
		t.Fatalf("an empty log is cleanable: %+v", c)
	}
	// Many distinct keys: the cleaned part stays large.
	for i := range 150 {
		mustLeader(t, l, Keyed(1000, fmt.Sprintf("key-%03d", i), "value"))
	}
	seal(t, l, 1000)
	if c, ok := cl.Cleanable(5000); !ok || c.DirtyRatio != 1 || c.DirtyBytes == 0 || c.Due {
		t.Fatalf("a log never cleaned: %+v, %v", c, ok)
	}
	cleanOnce(t, l, 5000)
	if c, ok := cl.Cleanable(5000); ok {
		t.Fatalf("cleanable right after a pass: %+v", c)
	}
	// A little more: below min.cleanable.dirty.ratio.
	seal(t, l, 1000)
	c, ok := cl.Cleanable(5000)
	if ok || c.DirtyRatio <= 0 || c.DirtyRatio >= cfg.MinCleanableDirtyRatio {
		t.Fatalf("a little dirty: %+v, %v (min ratio %v)", c, ok, cfg.MinCleanableDirtyRatio)
	}
	ratio := c.DirtyRatio
	cfg.MinCleanableDirtyRatio = ratio
	l.SetConfig(cfg)
	if c, ok := cl.Cleanable(5000); !ok || c.DirtyRatio != ratio {
		t.Fatalf("at the ratio: %+v, %v", c, ok)
	}
	cfg.MinCleanableDirtyRatio = 0.9
	cfg.MaxCompactionLagMs = 1000 // the oldest dirty record is 4000 ms old: due
	l.SetConfig(cfg)
	if c, ok := cl.Cleanable(5000); !ok || !c.Due {
		t.Fatalf("past max.compaction.lag.ms: %+v, %v", c, ok)
	}
	if c, ok := cl.Cleanable(1500); ok || c.Due {
		t.Fatalf("before max.compaction.lag.ms: %+v, %v", c, ok)
	}
}

func testCompactAndDelete(t *testing.T, s kernel.Storage) {
	cfg := CompactConfig()
	cfg.CleanupPolicy = "compact,delete"
	cfg.RetentionMs = 10_000
	l := mustOpen(t, s, tp0, cfg)
	re := enforcer(t, l)
	now := time.Now().UnixMilli()
	// Old records of their own keys (kept by compaction, in segments of their own),
	// then new versions of other keys.
	pad := string(make([]byte, 100))
	for i := range 40 {
		mustLeader(t, l, Keyed(now-60_000, fmt.Sprintf("old-%d", i), pad))
	}
	old := l.LogEndOffset()
	produceVersions(t, l, now, 10, 10)
	before := readRecs(t, l)
	res := cleanOnce(t, l, now)
	checkCompacted(t, l, before, res.FirstDirty)
	if err := re.EnforceRetention(time.UnixMilli(now)); err != nil {
		t.Fatal(err)
	}
	// The old keys' segments go (compaction kept them, retention does not); the
	// latest value of every new key stays.
	if ls := l.LogStartOffset(); ls < old/2 {
		t.Fatalf("log start %d after retention; want at least %d", ls, old/2)
	}
	recs := readRecs(t, l)
	want := latestByKey(atOrAbove(before, l.LogStartOffset()))
	if got := latestByKey(recs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after retention:\n got %v\nwant %v", got, want)
	}
	for k := range 10 {
		if r := want[fmt.Sprintf("k%d", k)]; r.Value != "v9" {
			t.Fatalf("k%d = %v after retention, want v9", k, r)
		}
	}
	// Cleaning goes on after retention moved the log start.
	produceVersions(t, l, now, 10, 10)
	before = readRecs(t, l)
	res = cleanOnce(t, l, now)
	checkCompacted(t, l, before, res.FirstDirty)
}

func testCompactPolicyChange(t *testing.T, s kernel.Storage) {
	cfg := CompactConfig()
	cfg.CleanupPolicy = "delete"
	l := mustOpen(t, s, tp0, cfg)
	cl := compactLog(t, l)
	produceVersions(t, l, 1000, 5, 10)
	before := readRecs(t, l)
	if c, ok := cl.Cleanable(5000); ok {
		t.Fatalf("a delete log is cleanable: %+v", c)
	}
	if res := cleanOnce(t, l, 5000); res.RecordsRemoved != 0 || res.BytesRead != 0 {
		t.Fatalf("a delete log was cleaned: %+v", res)
	}
	eqRecs(t, "cleanup.policy=delete", readRecs(t, l), before)
	// delete -> compact: cleaning starts.
	cfg.CleanupPolicy = "compact"
	l.SetConfig(cfg)
	if _, ok := cl.Cleanable(5000); !ok {
		t.Fatal("not cleanable after the change to compact")
	}
	res := cleanOnce(t, l, 5000)
	if res.RecordsRemoved == 0 {
		t.Fatalf("nothing cleaned after the change to compact: %+v", res)
	}
	checkCompacted(t, l, before, res.FirstDirty)
	// compact -> delete: it stops.
	cfg.CleanupPolicy = "delete"
	l.SetConfig(cfg)
	produceVersions(t, l, 1000, 5, 10)
	before = readRecs(t, l)
	if c, ok := cl.Cleanable(5000); ok {
		t.Fatalf("cleanable after the change to delete: %+v", c)
	}
	if res := cleanOnce(t, l, 5000); res.RecordsRemoved != 0 {
		t.Fatalf("cleaned after the change to delete: %+v", res)
	}
	eqRecs(t, "back to delete", readRecs(t, l), before)
}

// gapBefore returns the offset just before the first kept record from recs[i:] (i >= 1)
// below limit that follows a gap: an offset compaction removed.
func gapBefore(t *testing.T, recs []Rec, i int, limit int64) int64 {
	t.Helper()
	for ; i < len(recs) && recs[i].Offset < limit; i++ {
		if recs[i].Offset > recs[i-1].Offset+1 {
			return recs[i].Offset - 1
		}
	}
	t.Fatalf("no gap in the cleaned part: %v", recs)
	return -1
}

func testCompactTruncate(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, CompactConfig())
	produceVersions(t, l, 1000, 10, 10)
	res := cleanOnce(t, l, 5000)
	cleaned := readRecs(t, l)
	// Cut inside the cleaned part, at an offset in the gap before a kept record.
	at := gapBefore(t, cleaned, 1, res.FirstDirty)
	if err := l.Truncate(at); err != nil {
		t.Fatal(err)
	}
	kept := below(cleaned, at)
	if leo := l.LogEndOffset(); leo > at || leo <= kept[len(kept)-1].Offset {
		t.Fatalf("log end %d after Truncate(%d); last kept record %v", leo, at, kept[len(kept)-1])
	}
	eqRecs(t, "after the truncation", readRecs(t, l), kept)
	// The first dirty offset came down with the log end: the new records are mapped and
	// supersede the kept ones.
	produceVersions(t, l, 1000, 10, 3)
	before := readRecs(t, l)
	res = cleanOnce(t, l, 5000)
	after := checkCompacted(t, l, before, res.FirstDirty)
	if r := latestByKey(after)["k0"]; r.Value != "v2" {
		t.Fatalf("k0 = %v after truncate and clean, want v2", r)
	}
	for _, r := range below(after, res.FirstDirty) {
		if r.Key == "k0" && r.Value != "v2" {
			t.Fatalf("superseded %v still below the first dirty offset %d", r, res.FirstDirty)
		}
	}
	checkReadsAcrossGaps(t, l, after)
}

func testCompactDeleteRecords(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, CompactConfig())
	produceVersions(t, l, 1000, 10, 10)
	res := cleanOnce(t, l, 5000)
	cleaned := readRecs(t, l)
	at := gapBefore(t, cleaned, len(cleaned)/3, math.MaxInt64)
	if err := l.DeleteRecordsBefore(at); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != at {
		t.Fatalf("log start %d, want %d", l.LogStartOffset(), at)
	}
	got, err := ReadRecords(l, at)
	if err != nil {
		t.Fatal(err)
	}
	eqRecs(t, "read at the new log start (in a gap)", atOrAbove(got, at), atOrAbove(cleaned, at))
	if _, err := l.Read(at-1, 1<<20, math.MaxInt64, true); !errors.Is(err, kernel.ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	produceVersions(t, l, 1000, 10, 3)
	before, err := ReadRecords(l, at)
	if err != nil {
		t.Fatal(err)
	}
	before = atOrAbove(before, at)
	res2 := cleanOnce(t, l, 5000)
	if res2.FirstDirty <= res.FirstDirty {
		t.Fatalf("first dirty offset %d after a second pass, was %d", res2.FirstDirty, res.FirstDirty)
	}
	after, err := ReadRecords(l, at)
	if err != nil {
		t.Fatal(err)
	}
	after = atOrAbove(after, at)
	if got, want := latestByKey(after), latestByKey(before); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("latest values after DeleteRecordsBefore and a clean:\n got %v\nwant %v", got, want)
	}
}

func testCompactSmallMap(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, CompactConfig())
	for v := range 3 {
		for k := range 100 {
			mustLeader(t, l, Keyed(1000, fmt.Sprintf("key-%03d", k), fmt.Sprintf("v%d", v)))
		}
	}
	seal(t, l, 1000)
	before := readRecs(t, l)
	m := compact.NewOffsetMap(40*24, 0.9) // 40 slots: 36 keys a pass
	if m.Capacity() >= 100 {
		t.Fatalf("map capacity %d", m.Capacity())
	}
	cl := compactLog(t, l)
	passes := 0
	var res compact.Result
	for {
		prev := res.FirstDirty
		var err error
		res, err = cl.Clean(context.Background(), &compact.Env{Map: m, NowMs: 5000})
		if err != nil {
			t.Fatal(err)
		}
		if res.MapKeys > m.Capacity() {
			t.Fatalf("%d keys mapped, capacity %d", res.MapKeys, m.Capacity())
		}
		if passes > 0 && res.FirstDirty == prev {
			break
		}
		passes++
		if passes > 100 {
			t.Fatal("no end to the passes")
		}
		checkCompacted(t, l, before, res.FirstDirty)
	}
	if passes < 3 {
		t.Fatalf("%d passes for 100 keys x 3 with room for %d keys", passes, m.Capacity())
	}
	after := checkCompacted(t, l, before, res.FirstDirty)
	n := 0
	for _, r := range below(after, res.FirstDirty) {
		if r.Key != "tail" {
			n++
		}
	}
	if n != 100 {
		t.Fatalf("%d records below the first dirty offset %d, want one per key (100)", n, res.FirstDirty)
	}
}

func testCompactMapTooSmall(t *testing.T, s kernel.Storage) {
	l := mustOpen(t, s, tp0, CompactConfig())
	var kv []string
	for k := range 30 {
		kv = append(kv, fmt.Sprintf("k%d", k), "v")
	}
	for range 3 {
		mustLeader(t, l, Keyed(1000, kv...))
	}
	seal(t, l, 1000)
	before := readRecs(t, l)
	size := l.Size()
	m := compact.NewOffsetMap(10*24, 0.9) // room for 9 keys; a batch has 30
	_, err := compactLog(t, l).Clean(context.Background(), &compact.Env{Map: m, NowMs: 5000})
	if !errors.Is(err, compact.ErrMapTooSmall) {
		t.Fatalf("Clean with a map too small: %v, want ErrMapTooSmall", err)
	}
	eqRecs(t, "after a failed pass", readRecs(t, l), before)
	if l.Size() != size {
		t.Fatalf("size %d after a failed pass, was %d", l.Size(), size)
	}
	// The log is as it was: a large enough map cleans it from the start.
	res := cleanOnce(t, l, 5000)
	if res.RecordsRemoved < 60 {
		t.Fatalf("pass after the failure: %+v", res)
	}
	checkCompacted(t, l, before, res.FirstDirty)
}

// testCompactHammer cleans one log in a loop while appenders write keyed records
// (each its own keys, with increasing versions) and readers scan it from the log
// start: every scan sees strictly increasing offsets and, per key, increasing
// versions; at the end each key's latest version is the last one written.
func testCompactHammer(t *testing.T, s kernel.Storage) {
	const (
		appenders = 3
		readers   = 2
		loops     = 300
		keys      = 7
	)
	cfg := CompactConfig()
	cfg.SegmentBytes = 512
	l := mustOpen(t, s, tp0, cfg)
	cl := compactLog(t, l)
	var wg, bg sync.WaitGroup
	var done atomic.Bool
	var passes int
	var stats compact.Stats // the cleaner goroutine's, read after bg.Wait
	errc := make(chan error, appenders+readers+1)
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range loops {
				if _, err := l.AppendLeader(Keyed(1000, fmt.Sprintf("a%d-%d", a, i%keys), fmt.Sprintf("%06d", i))); err != nil {
					errc <- fmt.Errorf("append: %w", err)
					return
				}
				l.SetHighWatermark(l.LogEndOffset())
			}
		}()
	}
	for range readers {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for !done.Load() {
				recs, err := ReadRecords(l, l.LogStartOffset())
				if err != nil {
					errc <- fmt.Errorf("scan: %w", err)
					return
				}
				last := map[string]string{}
				for _, r := range recs {
					if r.Value <= last[r.Key] {
						errc <- fmt.Errorf("scan: %v after version %s", r, last[r.Key])
						return
					}
					last[r.Key] = r.Value
				}
			}
		}()
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		m := compact.NewOffsetMap(16*24, 0.9) // a few keys a pass: many passes
		for !done.Load() {
			res, err := cl.Clean(context.Background(), &compact.Env{Map: m, NowMs: 5000})
			if err != nil {
				errc <- fmt.Errorf("clean: %w", err)
				return
			}
			passes++
			stats.Add(res.Stats)
		}
	}()
	wg.Wait()
	done.Store(true)
	bg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	t.Logf("%d passes while appending: %+v", passes, stats)
	seal(t, l, 1000)
	for range 100 {
		if res := cleanOnce(t, l, 5000); res.BytesRead == 0 {
			break
		}
	}
	got := latestByKey(readRecs(t, l))
	for a := range appenders {
		for k := range keys {
			last := loops - 1 - (loops-1-k)%keys
			key := fmt.Sprintf("a%d-%d", a, k)
			if r := got[key]; r.Value != fmt.Sprintf("%06d", last) {
				t.Fatalf("%s = %v, want version %d", key, r, last)
			}
		}
	}
}
