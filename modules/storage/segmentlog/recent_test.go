package segmentlog

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// The ring keeps the newest recentCap batches in order, finds a batch by position and
// the scan start for an offset, across wrap-around.
func TestRecentBatches(t *testing.T) {
	var r recentBatches
	if _, ok := r.at(0); ok {
		t.Fatal("empty ring knows position 0")
	}
	if _, ok := r.startFor(0); ok {
		t.Fatal("empty ring has a start")
	}
	// Batch i: offsets [10i, 10i+4] (gaps between batches), 100 bytes at 100i.
	const total = 3*recentCap + 5
	for i := int64(0); i < total; i++ {
		r.add(recentBatch{base: 10 * i, last: 10*i + 4, pos: 100 * i, size: 100})
		oldest := max(0, i-recentCap+1)
		if r.n != int(i-oldest+1) {
			t.Fatalf("after %d adds: %d entries", i+1, r.n)
		}
		for _, j := range []int64{oldest, (oldest + i) / 2, i} {
			e, ok := r.at(100 * j)
			if !ok || e.base != 10*j || e.last != 10*j+4 {
				t.Fatalf("after %d adds: batch %d at %d: %+v %v", i+1, j, 100*j, e, ok)
			}
			if p, ok := r.startFor(10*j + 7); !ok || p != 100*j {
				t.Fatalf("after %d adds: start for %d = %d %v, want %d", i+1, 10*j+7, p, ok, 100*j)
			}
		}
		if _, ok := r.at(100*i + 50); ok {
			t.Fatal("a position inside a batch is known")
		}
		if oldest > 0 {
			if _, ok := r.at(100 * (oldest - 1)); ok {
				t.Fatal("a dropped batch is still known")
			}
			if _, ok := r.startFor(10*oldest - 1); ok {
				t.Fatal("an offset below the oldest batch has a start")
			}
		}
		if p, ok := r.startFor(1 << 40); !ok || p != 100*i {
			t.Fatalf("start for a high offset = %d %v, want the newest %d", p, ok, 100*i)
		}
	}
	r.reset()
	if _, ok := r.at(100 * (total - 1)); ok {
		t.Fatal("reset ring still knows a batch")
	}
}

// Reads served with the recent batches (the active segment right after appends, with
// gaps between follower batches, an undone truncation and more appends) return the same
// byte ranges as the same reads after a reopen, which has none and reads prefixes from
// the file.
func TestRecentBatchesReads(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := storagetest.DefaultConfig()
	cfg.IndexIntervalBytes = 1 << 20 // one index entry: every prefix comes from the ring or the file
	l := mustOpen(t, s, rtp, [16]byte{}, cfg)
	next := int64(0)
	appendN := func(k int) {
		for range k {
			n := 1 + int(next%3)
			if _, err := l.AppendFollower(storagetest.Batch(next, 1000+next, n, 20)); err != nil {
				t.Fatal(err)
			}
			next += int64(n) + next%2 // every other batch leaves a gap of one offset
		}
	}
	appendN(2*recentCap + 7)
	if err := l.Truncate(next / 2); err != nil {
		t.Fatal(err)
	}
	next = l.LogEndOffset()
	appendN(recentCap / 2)
	readAll := func(l kernel.Log) []string {
		var out []string
		for off := l.LogStartOffset(); off < l.LogEndOffset(); off++ {
			for _, limit := range []int64{1, 300, 1 << 20} {
				rr, err := l.Read(off, limit, 1<<62, true)
				if err != nil {
					t.Fatalf("read %d: %v", off, err)
				}
				b, err := storagetest.ReadAll(rr)
				rr.Release()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%d/%d:%x", off, limit, sha256.Sum256(b)))
			}
		}
		return out
	}
	if l.(*Log).active().recent == nil || l.(*Log).active().recent.n == 0 {
		t.Fatal("the active segment remembers no batches")
	}
	with := readAll(l)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTestStore(t, dir)
	l2 := mustOpen(t, s2, rtp, [16]byte{}, cfg)
	if r := l2.(*Log).active().recent; r != nil && r.n > 0 {
		t.Fatal("a reopened segment remembers batches")
	}
	without := readAll(l2)
	if !slices.Equal(with, without) {
		t.Fatalf("reads differ with and without the recent batches (%d vs %d reads)", len(with), len(without))
	}
}
