package segmentlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// storeBenchSizes are the partition counts of the store-level benchmarks.
var storeBenchSizes = []int{500, 2000}

// openManyLogs opens n partitions in a store in dir and appends one batch to each
// (unflushed, as in a broker between flushes) when write is set.
func openManyLogs(b *testing.B, dir string, n int, write bool) *Store {
	b.Helper()
	s, err := OpenStore(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := storagetest.DefaultConfig()
	batch := storagetest.Batch(0, time.Now().UnixMilli(), 1, 100)
	for i := range n {
		l, err := s.Open(kernel.TopicPartition{Topic: "bench", Partition: int32(i)}, [16]byte{1}, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if write {
			if _, err := l.AppendLeader(batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s
}

// BenchmarkStoreClose is an orderly stop of a store of N open partitions: each with
// one unflushed batch (written), or reopened after a clean stop and left idle (idle).
func BenchmarkStoreClose(b *testing.B) {
	for _, n := range storeBenchSizes {
		for _, write := range []bool{true, false} {
			name := fmt.Sprintf("N=%d/idle", n)
			if write {
				name = fmt.Sprintf("N=%d/written", n)
			}
			b.Run(name, func(b *testing.B) {
				dir := b.TempDir()
				if !write {
					if err := openManyLogs(b, dir, n, true).Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					s := openManyLogs(b, dir, n, write)
					b.StartTimer()
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/partition")
			})
		}
	}
}

// BenchmarkStoreRemoveAll removes every one of N open partitions (a bulk topic
// deletion), from 8 goroutines as replication's apply does.
func BenchmarkStoreRemoveAll(b *testing.B) {
	for _, n := range storeBenchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := b.TempDir()
				s := openManyLogs(b, dir, n, true)
				b.StartTimer()
				parallelEach(n, 8, func(i int) {
					if err := s.Remove(kernel.TopicPartition{Topic: "bench", Partition: int32(i)}); err != nil {
						b.Error(err)
					}
				})
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/partition")
		})
	}
}

// BenchmarkStoreOpenParallel opens N existing partitions (cleanly closed, one batch
// each) from 8 goroutines, as replication's apply does at startup.
func BenchmarkStoreOpenParallel(b *testing.B) {
	benchParallelOpens(b, func(b *testing.B, n int) string {
		dir := b.TempDir()
		if err := openManyLogs(b, dir, n, true).Close(); err != nil {
			b.Fatal(err)
		}
		return dir
	})
}

// BenchmarkStoreCreateParallel opens N new partitions from 8 goroutines, as
// replication's apply does for a CreateTopics.
func BenchmarkStoreCreateParallel(b *testing.B) {
	benchParallelOpens(b, nil)
}

// benchParallelOpens times opening N partitions of a store from 8 goroutines, per
// partition: in the directory setup returns (once per size), or in a fresh empty
// one each time when setup is nil. Opening the store and closing it are not timed.
func benchParallelOpens(b *testing.B, setup func(b *testing.B, n int) string) {
	for _, n := range storeBenchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var dir string
			if setup != nil {
				dir = setup(b, n)
			}
			cfg := storagetest.DefaultConfig()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				d := dir
				if setup == nil {
					d = b.TempDir()
				}
				s, err := OpenStore(d, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				parallelEach(n, 8, func(i int) {
					if _, err := s.Open(kernel.TopicPartition{Topic: "bench", Partition: int32(i)}, [16]byte{1}, cfg); err != nil {
						b.Error(err)
					}
				})
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/partition")
		})
	}
}
