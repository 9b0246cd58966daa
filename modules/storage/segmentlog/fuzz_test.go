package segmentlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// FuzzRecoverSegment writes arbitrary bytes as the only segment of a partition that was
// not shut down cleanly, opens it, and checks that recovery keeps only whole, valid
// batches with increasing offsets, that the file was cut to exactly those, and that the
// log still takes appends.
func FuzzRecoverSegment(f *testing.F) {
	f.Add([]byte{})
	f.Add(storagetest.Batch(0, 0, 1, 1)[:20])
	maxLen := storagetest.Batch(0, 0, 1, 1)
	maxLen[8], maxLen[9], maxLen[10], maxLen[11] = 0x7f, 0xff, 0xff, 0xff
	f.Add(maxLen)
	f.Add(storagetest.Batch(0, 1000, 3, 10))
	f.Add(storagetest.AppendBatch(storagetest.Batch(0, 1000, 3, 10), 3, 2000, 2, 5))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		pdir := filepath.Join(dir, rtp.String())
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		seg := filepath.Join(pdir, segmentName(0)+logSuffix)
		if err := os.WriteFile(seg, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s := openTestStore(t, dir)
		l, err := s.Open(rtp, [16]byte{}, recoveryConfig())
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		kept := l.Size()
		rr, err := l.Read(0, 1<<30, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		b, err := storagetest.ReadAll(rr)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
		bs, err := storagetest.ParseAll(b)
		if err != nil {
			t.Fatalf("recovered log holds a bad batch: %v", err)
		}
		if int64(len(b)) != kept {
			t.Fatalf("read %d bytes of a %d-byte log", len(b), kept)
		}
		next := int64(0)
		for _, bi := range bs {
			if bi.Base < next || bi.Last < bi.Base {
				t.Fatalf("offsets go back: batch %d..%d after %d", bi.Base, bi.Last, next)
			}
			next = bi.Last + 1
		}
		if l.LogEndOffset() != next {
			t.Fatalf("LEO %d, batches end at %d", l.LogEndOffset(), next)
		}
		if int64(len(data)) < kept || string(data[:kept]) != string(b) {
			t.Fatal("recovery kept bytes that are not a prefix of the segment")
		}
		checkIndexes(t, l.(*Log))
		if next < 1<<40 {
			if _, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 1)); err != nil {
				t.Fatalf("append after recovery: %v", err)
			}
		}
	})
}
