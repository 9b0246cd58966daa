package segmentlog

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// BenchmarkAppend appends one 16-record batch per op (page cache only, no fsync).
// Retention keeps the disk use bounded (runs every 4096 ops, outside the timer).
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		name      string
		valueSize int
	}{{"1KiB", 1024}, {"100B", 100}} {
		b.Run(bc.name, func(b *testing.B) {
			l := openRetainedLog(b)
			batch := storagetest.Batch(0, time.Now().UnixMilli(), 16, bc.valueSize)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.AppendLeader(batch); err != nil {
					b.Fatal(err)
				}
				retainEvery(b, l, i)
			}
		})
	}
}

// openRetainedLog opens the append benchmarks' log: 64 MiB segments, 256 MiB retained.
func openRetainedLog(b *testing.B) kernel.Log {
	s := openBenchStore(b)
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	cfg.RetentionBytes = 256 << 20
	l, err := s.Open(rtp, [16]byte{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// retainEvery runs retention on l after every 4096th append (i counts them from 0), off
// the clock, so an append benchmark's disk use stays bounded.
func retainEvery(b *testing.B, l kernel.Log, i int) {
	if i%4096 != 4095 {
		return
	}
	b.StopTimer()
	if err := l.(*Log).EnforceRetention(time.Now()); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

// BenchmarkRead reads from a page-cached, fully indexed log: each op is one Read of up
// to 64 KiB starting at a varying offset, then Release. It reports batches/op; allocs/op
// is per Read, not per batch.
func BenchmarkRead(b *testing.B) {
	s := openBenchStore(b)
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	l, err := s.Open(rtp, [16]byte{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	const batchesN = 20000
	batch := storagetest.Batch(0, 1, 4, 1024)
	for i := 0; i < batchesN; i++ {
		if _, err := l.AppendLeader(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil { // writeback done: reads hit a clean page cache
		b.Fatal(err)
	}
	leo := l.LogEndOffset()
	var batchesRead int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := int64(i*97) % leo
		rr, err := l.Read(off, 64<<10, leo, true)
		if err != nil {
			b.Fatal(err)
		}
		batchesRead += rr.Size / int64(len(batch))
		rr.Release()
	}
	b.ReportMetric(float64(batchesRead)/float64(b.N), "batches/op")
}

func openBenchStore(b *testing.B) kernel.Storage {
	s, err := OpenStore(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
