package segmentlog

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// tinySegments is a config whose every batch rolls a segment (segment.bytes below one
// batch), so each append writes a producer snapshot.
func tinySegments() kernel.LogConfig {
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 100
	cfg.SegmentIndexBytes = 4096
	return cfg
}

// TestSnapshotsManyRolls rolls a log of tiny segments many times and checks that the
// partition directory keeps exactly the newest snapshotsKept producer snapshots (the
// offsets kept in memory agree with the files), through head deletion, a truncation
// and a reopen.
func TestSnapshotsManyRolls(t *testing.T) {
	dir := t.TempDir()
	s := openRaw(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, tinySegments())
	const n = 600
	for i := range n {
		if _, err := l.AppendLeader(storagetest.Batch(0, 1000+int64(i), 1, 10)); err != nil {
			t.Fatal(err)
		}
	}
	pdir := filepath.Join(dir, rtp.String())
	check := func(what string, want []int64) {
		t.Helper()
		got, err := listSnapshots(pdir)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: snapshots on disk %v, want %v", what, got, want)
		}
		l.(*Log).mu.RLock()
		mem := slices.Clone(l.(*Log).snaps)
		l.(*Log).mu.RUnlock()
		if !slices.Equal(mem, want) {
			t.Fatalf("%s: snapshots in memory %v, want %v", what, mem, want)
		}
	}
	// The segment rolled for batch i starts at i: the last rolls were at n-3..n-1.
	check("after rolls", []int64{n - 3, n - 2, n - 1})
	if err := l.DeleteRecordsBefore(n - 1); err != nil {
		t.Fatal(err)
	}
	check("after head deletion", []int64{n - 1})
	if err := l.Truncate(n - 1); err != nil {
		t.Fatal(err)
	}
	check("after truncation", []int64{n - 1})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{}, tinySegments())
	check("after reopen", []int64{n - 1})
	if _, err := l.AppendLeader(storagetest.Batch(0, 5000, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendLeader(storagetest.Batch(0, 5001, 1, 10)); err != nil {
		t.Fatal(err)
	}
	check("after more rolls", []int64{n - 1, n}) // 599 went into the empty active segment
}

// BenchmarkRollSnapshot measures one segment roll (and its producer snapshot) in a
// partition that already has segs segments: the cost must not grow with segs.
func BenchmarkRollSnapshot(b *testing.B) {
	for _, segs := range []int{100, 3000} {
		b.Run(fmt.Sprintf("segments=%d", segs), func(b *testing.B) {
			s := openBenchStore(b)
			l, err := s.Open(rtp, [16]byte{}, tinySegments())
			if err != nil {
				b.Fatal(err)
			}
			batch := storagetest.Batch(0, 1000, 1, 10)
			for range segs {
				if _, err := l.AppendLeader(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				if _, err := l.AppendLeader(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
