package offsets

import (
	"sync/atomic"
	"testing"
)

// BenchmarkCommit measures durable (SyncWrites) commits; see BENCH.md.
func BenchmarkCommit(b *testing.B) {
	c := Committed{Offset: 12345, LeaderEpoch: 3, Metadata: "", CommitTimestamp: 1700000000000}
	b.Run("single", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			c.Offset = int64(i)
			if err := s.Commit("bench-group", "orders", int32(i%64), c); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
	b.Run("batch50", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		es := make([]Entry, 50)
		for i := 0; b.Loop(); i++ {
			for p := range es {
				es[p] = Entry{Group: "bench-group", Topic: "orders", Partition: int32(p), Committed: c}
				es[p].Committed.Offset = int64(i)
			}
			if err := s.CommitBatch(es); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(50*b.N)/b.Elapsed().Seconds(), "commits/s")
	})
	// Many connections committing at once: badger groups their fsyncs.
	b.Run("parallel", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		var next atomic.Int64
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				if err := s.Commit("bench-group", "orders", int32(i%64), Committed{Offset: i}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
}
