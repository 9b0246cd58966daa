package segmentlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/compact"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

type seen struct {
	offset int64
	key    string
	value  *string
}

func (s seen) String() string {
	if s.value == nil {
		return fmt.Sprintf("%s@%d=<tombstone>", s.key, s.offset)
	}
	return fmt.Sprintf("%s@%d=%s", s.key, s.offset, *s.value)
}

// readLog reads every data record from the log start (storagetest.ReadRecords checks
// offsets strictly increase and CRCs).
func readLog(t *testing.T, l kernel.Log) []seen {
	t.Helper()
	recs, err := storagetest.ReadRecords(l, l.LogStartOffset())
	if err != nil {
		t.Fatal(err)
	}
	var out []seen
	for _, r := range recs {
		if r.Control {
			continue
		}
		s := seen{offset: r.Offset, key: r.Key}
		if !r.Tombstone {
			v := r.Value
			s.value = &v
		}
		out = append(out, s)
	}
	return out
}

// latest is the model: the latest record per key of what was produced.
func latest(recs []seen) map[string]seen {
	m := map[string]seen{}
	for _, r := range recs {
		m[r.key] = r
	}
	return m
}

func cleanNow(t *testing.T, l kernel.Log, nowMs int64) compact.Result {
	t.Helper()
	cl, ok := l.(compact.Log)
	if !ok {
		t.Fatal("log does not implement compact.Log")
	}
	env := &compact.Env{Map: compact.NewOffsetMap(1<<20, 0.9), NowMs: nowMs}
	res, err := cl.Clean(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// produceVersions appends versions × keys records, key i at version v = "k<i>"="v<v>",
// then tombstones for the keys listed, then one more batch so that everything before
// it is in sealed segments.
func produceVersions(t *testing.T, l kernel.Log, keys, versions int, tombstones ...int) {
	t.Helper()
	for v := 0; v < versions; v++ {
		for k := 0; k < keys; k++ {
			if _, err := l.AppendLeader(storagetest.Keyed(1000, fmt.Sprintf("k%d", k), fmt.Sprintf("v%d", v))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range tombstones {
		if _, err := l.AppendLeader(storagetest.Keyed(1000, fmt.Sprintf("k%d", k), "<nil>")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AppendLeader(storagetest.Keyed(1000, "tail", "x")); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
}

// openCompacted opens a store in a fresh directory (closed at the end of the test)
// with partition c-0 compacted (storagetest.CompactConfig).
func openCompacted(t *testing.T) (*Store, kernel.Log) {
	t.Helper()
	s := openRaw(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	return s, mustOpen(t, s, kernel.TopicPartition{Topic: "c", Partition: 0}, [16]byte{1}, storagetest.CompactConfig())
}

func TestCleanKeepsLatestPerKeyAndOffsets(t *testing.T) {
	s, l := openCompacted(t)
	tp := kernel.TopicPartition{Topic: "c", Partition: 0}
	produceVersions(t, l, 10, 20, 3, 7)
	before := readLog(t, l)
	want := latest(before)
	sizeBefore := l.Size()

	res := cleanNow(t, l, 5000)
	if res.RecordsRemoved == 0 {
		t.Fatalf("nothing removed: %+v", res)
	}
	after := readLog(t, l)
	if got := latest(after); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("latest values changed:\n got %v\nwant %v", got, want)
	}
	// Below the first dirty offset every key appears once, as its latest version
	// below that offset (the rest, the uncleaned head, is as produced).
	latestBelow := latest(func() (out []seen) {
		for _, r := range before {
			if r.offset < res.FirstDirty {
				out = append(out, r)
			}
		}
		return out
	}())
	for _, r := range after {
		if r.offset < res.FirstDirty && latestBelow[r.key].offset != r.offset {
			t.Fatalf("record %v kept below the first dirty offset %d, latest there is %v", r, res.FirstDirty, latestBelow[r.key])
		}
	}
	if res.FirstDirty <= 100 {
		t.Fatalf("first dirty offset %d: most of the log should be cleaned", res.FirstDirty)
	}
	if l.Size() >= sizeBefore {
		t.Fatalf("size %d not below %d", l.Size(), sizeBefore)
	}
	// Tombstones are there until their horizon (first clean at 5000 + 1000).
	for _, k := range []string{"k3", "k7"} {
		if r, ok := latest(after)[k]; !ok || r.value != nil {
			t.Fatalf("tombstone of %s missing after the first clean: %+v", k, r)
		}
	}
	cleanNow(t, l, 5500) // before the horizon: still there
	if _, ok := latest(readLog(t, l))["k3"]; !ok {
		t.Fatal("tombstone removed before delete.retention.ms")
	}
	// New appends make the log dirty again; after the horizon the tombstones go.
	produceVersions(t, l, 10, 3)
	res = cleanNow(t, l, 7000)
	got := latest(readLog(t, l))
	if res.TombstonesRemoved != 0 {
		// k3 and k7 got new values in the 3 new versions, superseding the tombstones.
		t.Fatalf("tombstones counted as removed though superseded: %+v", res.Stats)
	}
	if v := got["k3"].value; v == nil || *v != "v2" {
		t.Fatalf("k3 = %v, want v2", v)
	}

	// A restart serves the same.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, s, tp, [16]byte{1}, storagetest.CompactConfig())
	if again := latest(readLog(t, l)); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Fatalf("after reopen:\n got %v\nwant %v", again, got)
	}
}

func TestCleanRemovesTombstonesAfterHorizon(t *testing.T) {
	_, l := openCompacted(t)
	produceVersions(t, l, 4, 5, 1, 2)
	for i := 0; i < 20; i++ { // the tombstones into sealed segments
		if _, err := l.AppendLeader(storagetest.Keyed(1000, "f", "y")); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	cleanNow(t, l, 5000)
	if r, ok := latest(readLog(t, l))["k1"]; !ok || r.value != nil {
		t.Fatalf("tombstone of k1 gone before its horizon: %v", r)
	}
	// Enough new data (other keys) for the ratio, then a clean after the horizon.
	for i := 0; i < 40; i++ {
		if _, err := l.AppendLeader(storagetest.Keyed(1000, fmt.Sprintf("x%d", i%5), "y")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AppendLeader(storagetest.Keyed(1000, "tail2", "x")); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	res := cleanNow(t, l, 6001)
	got := latest(readLog(t, l))
	for _, k := range []string{"k1", "k2"} {
		if r, ok := got[k]; ok {
			t.Fatalf("tombstone of %s still there after its horizon: %+v (stats %+v)", k, r, res.Stats)
		}
	}
	if v := got["k0"].value; v == nil || *v != "v4" {
		t.Fatalf("k0 = %v, want v4", v)
	}
}

func TestCleanNeverPassesHighWatermark(t *testing.T) {
	_, l := openCompacted(t)
	produceVersions(t, l, 5, 10)
	l.SetHighWatermark(0)
	before := readLog(t, l)
	if c, ok := l.(compact.Log).Cleanable(5000); ok {
		t.Fatalf("cleanable below the high watermark: %+v", c)
	}
	cleanNow(t, l, 5000)
	if after := readLog(t, l); len(after) != len(before) {
		t.Fatalf("cleaned above the high watermark: %d -> %d records", len(before), len(after))
	}
}

// TestCleanCrashAtEveryPoint stops a pass at each point of the swap as a crash
// would, reopens the directory, and checks the log holds either the old or the new
// segments: the latest value of every key, offsets unchanged, no duplicates.
func TestCleanCrashAtEveryPoint(t *testing.T) {
	for _, point := range []string{"written", "committed", "deleting", "renamed", "swapped"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			s := openRaw(t, dir)
			tp := kernel.TopicPartition{Topic: "c", Partition: 0}
			l := mustOpen(t, s, tp, [16]byte{1}, storagetest.CompactConfig())
			produceVersions(t, l, 10, 20, 4)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			want := latest(readLog(t, l))
			hit := false
			s.crashAt = func(p string) bool {
				if p == point && !hit {
					hit = true
					return true
				}
				return false
			}
			env := &compact.Env{Map: compact.NewOffsetMap(1<<20, 0.9), NowMs: 5000}
			if _, err := l.(compact.Log).Clean(context.Background(), env); !errors.Is(err, errInjectedCrash) {
				t.Fatalf("clean: %v, want the injected crash", err)
			}
			crash(t, s)
			s2 := openRaw(t, dir)
			defer s2.Close()
			l2 := mustOpen(t, s2, tp, [16]byte{1}, storagetest.CompactConfig())
			if got := latest(readLog(t, l2)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after a crash at %s:\n got %v\nwant %v", point, got, want)
			}
			left, _ := filepath.Glob(filepath.Join(dir, tp.String(), "*"))
			for _, f := range left {
				if strings.HasSuffix(f, cleanedSuffix) || strings.HasSuffix(f, swapSuffix) || strings.HasSuffix(f, deletedSuffix) {
					t.Fatalf("leftover %s after recovery", f)
				}
			}
			// And a clean after the restart completes the work.
			l2.SetHighWatermark(l2.LogEndOffset())
			cleanNow(t, l2, 5000)
			if got := latest(readLog(t, l2)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("clean after recovery:\n got %v\nwant %v", got, want)
			}
			if _, err := os.Stat(filepath.Join(dir, cleanerCheckpointFile)); err != nil {
				t.Fatalf("no cleaner checkpoint: %v", err)
			}
		})
	}
}

// TestCleanTruncateRightAfterLastSwap truncates the log into the part a pass just
// cleaned, between its last swap and the end of the pass: the first dirty offset must
// come down with the log end, or the records appended at the truncated offsets are
// never mapped and the old values they supersede stay below the first dirty offset.
func TestCleanTruncateRightAfterLastSwap(t *testing.T) {
	s, l := openCompacted(t)
	produceVersions(t, l, 10, 20)
	cut := int64(-1)
	s.crashAt = func(p string) bool {
		if p == "swapped" && cut < 0 {
			recs := readLog(t, l)
			cut = recs[len(recs)/2].offset
			if err := l.Truncate(cut); err != nil {
				t.Error(err)
			}
		}
		return false
	}
	cleanNow(t, l, 5000)
	if cut < 0 {
		t.Fatal("the pass did not reach its end")
	}
	s.crashAt = nil
	if leo := l.LogEndOffset(); l.(*Log).cleanerOffset() > leo {
		t.Fatalf("first dirty offset %d above the log end %d after the truncation", l.(*Log).cleanerOffset(), leo)
	}
	// New versions of every key at the truncated offsets, then a pass.
	produceVersions(t, l, 10, 1)
	res := cleanNow(t, l, 5000)
	if leo := l.LogEndOffset(); res.FirstDirty > leo {
		t.Fatalf("first dirty offset %d above the log end %d", res.FirstDirty, leo)
	}
	seenKey := map[string]seen{}
	for _, r := range readLog(t, l) {
		if r.offset >= res.FirstDirty {
			break
		}
		if prev, ok := seenKey[r.key]; ok {
			t.Fatalf("key %s twice below the first dirty offset %d: %v and %v", r.key, res.FirstDirty, prev, r)
		}
		seenKey[r.key] = r
	}
	if v := seenKey["k0"].value; v == nil || *v != "v0" {
		t.Fatalf("k0 = %v below the first dirty offset, want the new v0", seenKey["k0"])
	}
}
