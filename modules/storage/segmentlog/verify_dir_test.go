package segmentlog

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// verifyAll runs VerifyPartition on rtp's directory under dir and returns its problems.
func verifyAll(t *testing.T, dir string) []Problem {
	t.Helper()
	var ps []Problem
	if _, err := VerifyPartition(filepath.Join(dir, rtp.String()), func(p Problem) { ps = append(ps, p) }); err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestVerifyPartition damages a clean log of 10 batches (segments 0, 8 and 16, 4
// batches each) in each way and checks what the verifier reports, that CutDamage
// leaves a log the verifier finds clean, and that the store then opens it with the
// good prefix readable and appends working.
func TestVerifyPartition(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		want    string // substring of the batch problem; "" = clean
		pos     int64  // its position
		off     int64  // first offset lost
		end     int64  // last offset lost (-1: to the log end)
		leo     int64  // log end after repair
		damaged int    // .damaged files after repair
	}{
		{name: "clean", damage: func(*testing.T, string) {}, leo: 20},
		{name: "flipped byte", damage: func(t *testing.T, dir string) {
			flipByte(t, segPath(dir, 8), batchSize+40) // in the second batch's records
		}, want: "crc", pos: batchSize, off: 10, end: 15, leo: 10, damaged: 4},
		{name: "truncated batch", damage: func(t *testing.T, dir string) {
			if err := os.Truncate(segPath(dir, 8), 2*batchSize+20); err != nil {
				t.Fatal(err)
			}
		}, want: "less than a batch header", pos: 2 * batchSize, off: 12, end: 15, leo: 12, damaged: 4},
		{name: "truncated records", damage: func(t *testing.T, dir string) {
			if err := os.Truncate(segPath(dir, 16), batchSize+70); err != nil {
				t.Fatal(err)
			}
		}, want: "runs past the end", pos: batchSize, off: 18, end: -1, leo: 18, damaged: 1},
		{name: "bad length", damage: func(t *testing.T, dir string) {
			f, err := os.OpenFile(segPath(dir, 0), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], 0x7fffffff)
			if _, err := f.WriteAt(b[:], 3*batchSize+8); err != nil {
				t.Fatal(err)
			}
		}, want: "runs past the end", pos: 3 * batchSize, off: 6, end: 7, leo: 6, damaged: 7},
		{name: "base offset (not under the CRC)", damage: func(t *testing.T, dir string) {
			flipByte(t, segPath(dir, 8), batchSize+2)
		}, want: "past the next segment's base", pos: batchSize, off: 10, end: 15, leo: 10, damaged: 4},
		{name: "first batch of a segment", damage: func(t *testing.T, dir string) {
			flipByte(t, segPath(dir, 8), 30)
		}, want: "crc", pos: 0, off: 8, end: 15, leo: 8, damaged: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := cleanLog(t, 10)
			tc.damage(t, dir)
			ps := verifyAll(t, dir)
			var batch []Problem
			for _, p := range ps {
				if p.Batch {
					batch = append(batch, p)
				} else {
					t.Errorf("unexpected index problem: %s", p)
				}
			}
			if tc.want == "" {
				if len(batch) > 0 {
					t.Fatalf("clean log reported %v", batch)
				}
			} else {
				if len(batch) != 1 {
					t.Fatalf("got %d batch problems %v, want 1", len(batch), batch)
				}
				p := batch[0]
				if !strings.Contains(strings.ToLower(p.What), tc.want) || p.Position != tc.pos || p.Offset != tc.off || p.End != tc.end {
					t.Fatalf("problem %s (pos %d, offsets %d..%d), want %q at %d, offsets %d..%d", p, p.Position, p.Offset, p.End, tc.want, tc.pos, tc.off, tc.end)
				}
				if err := CutDamage(filepath.Join(dir, rtp.String()), p); err != nil {
					t.Fatal(err)
				}
				if ps := verifyAll(t, dir); len(ps) > 0 {
					t.Fatalf("after CutDamage: %v", ps)
				}
			}
			if n := len(segFiles(t, filepath.Join(dir, rtp.String()), damagedSuffix)); n != tc.damaged {
				t.Errorf("%d .damaged files, want %d", n, tc.damaged)
			}
			l := mustOpen(t, openTestStore(t, dir), rtp, [16]byte{}, recoveryConfig())
			if l.LogEndOffset() != tc.leo {
				t.Fatalf("LEO after repair %d, want %d", l.LogEndOffset(), tc.leo)
			}
			checkLog(t, l, 0)
			checkIndexes(t, l.(*Log))
			if res, err := l.AppendLeader(storagetest.Batch(0, 5000, 2, 30)); err != nil || res.BaseOffset != tc.leo {
				t.Fatalf("append after repair: %+v, %v", res, err)
			}
		})
	}
}

// TestVerifyIndexProblems damages the offset and time indexes of a sealed segment.
func TestVerifyIndexProblems(t *testing.T) {
	dir := cleanLog(t, 10)
	idx := filepath.Join(dir, rtp.String(), segmentName(8)+indexSuffix)
	b := mustReadFile(t, idx)
	if len(b) < 2*offsetEntrySize {
		t.Fatalf("index of %d bytes, want at least 2 entries", len(b))
	}
	// The first entry's position moves inside its batch.
	binary.BigEndian.PutUint32(b[4:], binary.BigEndian.Uint32(b[4:])+3)
	if err := os.WriteFile(idx, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tidx := filepath.Join(dir, rtp.String(), segmentName(0)+timeIndexSuffix)
	if err := os.WriteFile(tidx, append(mustReadFile(t, tidx), 1, 2, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := verifyAll(t, dir)
	var sawIdx, sawTime bool
	for _, p := range ps {
		switch {
		case p.Batch:
			t.Errorf("batch problem in an undamaged log: %s", p)
		case p.File == idx && strings.Contains(p.What, "not a batch start"):
			sawIdx = true
		case p.File == tidx:
			sawTime = true
		}
	}
	if !sawIdx || !sawTime {
		t.Fatalf("problems %v: want the offset index entry (%v) and the time index (%v)", ps, sawIdx, sawTime)
	}
}

// TestPartitionDirs lists partition directories and skips leftovers.
func TestPartitionDirs(t *testing.T) {
	dir := cleanLog(t, 2)
	for _, d := range []string{"0a1b-3-stray", "5c0e2f9a11d4b7e3-delete", "notapartition"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, segmentName(0)+logSuffix), nil, 0o644); err != nil && d != "notapartition" {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "notapartition", segmentName(0)+logSuffix)); err != nil {
		t.Fatal(err)
	}
	got, err := PartitionDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != filepath.Join(dir, rtp.String()) {
		t.Fatalf("PartitionDirs = %v, want only %s", got, rtp)
	}
	if IsPartitionDir(dir) {
		t.Fatal("the log dir itself taken for a partition dir")
	}
}

// FuzzVerifyPartition verifies arbitrary bytes as a partition's two segments and the
// first one's offset index: it must not panic nor fail (no I/O error), and CutDamage at
// the first damaged batch must leave a partition the verifier finds without damaged
// batches. Memory: the verifier streams batches through one buffer, whatever length a
// header claims.
func FuzzVerifyPartition(f *testing.F) {
	two := storagetest.AppendBatch(storagetest.Batch(0, 1000, 3, 10), 3, 2000, 2, 5)
	maxLen := storagetest.Batch(0, 0, 1, 1)
	binary.BigEndian.PutUint32(maxLen[8:], 0x7fffffff)
	idx := make([]byte, 8)
	binary.BigEndian.PutUint32(idx[4:], uint32(len(storagetest.Batch(0, 1000, 3, 10))))
	binary.BigEndian.PutUint32(idx[:4], 4)
	f.Add([]byte{}, []byte{}, []byte{})
	f.Add(storagetest.Batch(0, 0, 1, 1)[:20], []byte{}, storagetest.Batch(5, 0, 1, 1))
	f.Add(maxLen, []byte{}, []byte{})
	f.Add(storagetest.Batch(0, 1000, 3, 10), []byte{}, storagetest.Batch(3, 0, 1, 1))
	f.Add(two, idx, storagetest.Batch(5, 0, 1, 1))
	f.Add(two, idx, storagetest.Batch(2, 0, 1, 1)) // overlaps
	f.Fuzz(func(t *testing.T, seg0, idx0, seg5 []byte) {
		dir := t.TempDir()
		pdir := filepath.Join(dir, rtp.String())
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{
			segmentName(0) + logSuffix:   seg0,
			segmentName(0) + indexSuffix: idx0,
			segmentName(5) + logSuffix:   seg5,
		} {
			if err := os.WriteFile(filepath.Join(pdir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var first *Problem
		if _, err := VerifyPartition(pdir, func(p Problem) {
			if p.Batch && first == nil {
				first = &p
			}
		}); err != nil {
			t.Fatalf("verify: %v", err)
		}
		if first == nil {
			return
		}
		if err := CutDamage(pdir, *first); err != nil {
			t.Fatalf("cut %s: %v", first, err)
		}
		if _, err := VerifyPartition(pdir, func(p Problem) {
			if p.Batch {
				t.Errorf("after cutting at %s: %s", first, p)
			}
		}); err != nil {
			t.Fatalf("verify after cut: %v", err)
		}
	})
}
