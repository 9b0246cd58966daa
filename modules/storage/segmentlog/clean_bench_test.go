package segmentlog

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/compact"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// BenchmarkCleanerThroughput cleans a dirty log of SLUICE_BENCH_CLEAN_MB MiB (default
// 64; the figure is 1024) holding 100,000 keys (fewer below 1 GiB: about ten
// versions of each) with ~1 KiB values, written in
// batches of 100 records, and reports the cleaner's MB/s, the same bytes copied
// file to file (read, write, fsync) as copy_MB/s, their ratio, and the offset map's
// memory (SLUICE_BENCH_CLEAN_MAP_MB, default 128: log.cleaner.dedupe.buffer.size; a
// smaller map cleans in several passes, all timed). Run:
//
//	SLUICE_BENCH_CLEAN_MB=1024 go test -run '^$' -bench CleanerThroughput -benchtime 1x ./modules/storage/segmentlog/
func BenchmarkCleanerThroughput(b *testing.B) {
	mb := int64(64)
	if v, err := strconv.ParseInt(os.Getenv("SLUICE_BENCH_CLEAN_MB"), 10, 64); err == nil && v > 0 {
		mb = v
	}
	mapMB := int64(128) // log.cleaner.dedupe.buffer.size's default
	if v, err := strconv.ParseInt(os.Getenv("SLUICE_BENCH_CLEAN_MAP_MB"), 10, 64); err == nil && v > 0 {
		mapMB = v
	}
	const perBatch, valueSize = 100, 1000
	// 100,000 keys at 1 GiB (~10 versions each); smaller runs keep ~10 versions.
	keys := int(min(100_000, mb*1024/10))
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		s, err := OpenStore(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := storagetest.CompactConfig()
		cfg.SegmentBytes = 128 << 20
		cfg.IndexIntervalBytes = 4096
		cfg.SegmentIndexBytes = 10 << 20
		lg, err := s.Open(kernel.TopicPartition{Topic: "bench", Partition: 0}, [16]byte{1}, cfg)
		if err != nil {
			b.Fatal(err)
		}
		value := make([]byte, valueSize)
		recs := make([]recordbatch.Record, perBatch)
		var bld recordbatch.Builder
		k := 0
		for lg.Size() < mb<<20 {
			if err := bld.Reset(recordbatch.Options{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, BaseSequence: -1}); err != nil {
				b.Fatal(err)
			}
			for i := range recs {
				recs[i] = recordbatch.Record{Key: fmt.Appendf(nil, "key-%06d", k%keys), Value: value}
				bld.Add(&recs[i])
				k++
			}
			batch, err := bld.AppendTo(nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := lg.AppendLeader(batch); err != nil {
				b.Fatal(err)
			}
		}
		// Seal everything: one more batch in a new segment.
		l := lg.(*Log)
		l.mu.Lock()
		if err := l.roll(l.leo.Load()); err != nil {
			b.Fatal(err)
		}
		l.mu.Unlock()
		if _, err := lg.AppendLeader(recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseSequence: -1}, recordbatch.Record{Key: []byte("tail")})); err != nil {
			b.Fatal(err)
		}
		if err := lg.Flush(); err != nil {
			b.Fatal(err)
		}
		lg.SetHighWatermark(lg.LogEndOffset())
		dirty := lg.Size()
		copyMBs := copyThroughput(b, filepath.Join(dir, "bench-0"), b.TempDir())

		env := &compact.Env{Map: compact.NewOffsetMap(mapMB<<20, 0.9), NowMs: time.Now().UnixMilli()}
		b.StartTimer()
		start := time.Now()
		// Passes until the whole dirty section is clean (one, unless the map is
		// smaller than the keys: then each pass maps as many as fit).
		var res compact.Result
		passes := 0
		for {
			r, err := l.Clean(context.Background(), env)
			if err != nil {
				b.Fatal(err)
			}
			passes++
			res.Stats.Add(r.Stats)
			res.MapKeys, res.MapBytes = max(res.MapKeys, r.MapKeys), max(res.MapBytes, r.MapBytes)
			if _, more := l.Cleanable(env.NowMs); !more || passes > 100 {
				break
			}
		}
		took := time.Since(start)
		b.StopTimer()
		if res.RecordsRemoved == 0 {
			b.Fatalf("nothing removed: %+v", res)
		}
		cleanMBs := float64(dirty) / (1 << 20) / took.Seconds()
		b.SetBytes(dirty)
		b.ReportMetric(cleanMBs, "clean_MB/s")
		b.ReportMetric(copyMBs, "copy_MB/s")
		b.ReportMetric(cleanMBs/copyMBs, "clean/copy")
		b.ReportMetric(float64(res.MapBytes)/(1<<20), "map_MiB")
		b.ReportMetric(float64(res.MapKeys), "map_keys")
		b.ReportMetric(float64(lg.Size())/(1<<20), "after_MiB")
		b.ReportMetric(float64(passes), "passes")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// copyThroughput copies every .log file of dir into out (read, write, fsync) and
// returns MB/s: the disk's plain-copy figure the cleaner is compared with.
func copyThroughput(b *testing.B, dir, out string) float64 {
	b.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	start := time.Now()
	for _, p := range logs {
		src, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(out, filepath.Base(p)))
		if err != nil {
			b.Fatal(err)
		}
		// Through user space like the cleaner (io.Copy would use copy_file_range).
		buf := make([]byte, 1<<20)
		for {
			k, rerr := src.Read(buf)
			if k > 0 {
				if _, err := dst.Write(buf[:k]); err != nil {
					b.Fatal(err)
				}
				n += int64(k)
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				b.Fatal(rerr)
			}
		}
		if err := dst.Sync(); err != nil {
			b.Fatal(err)
		}
		src.Close()
		dst.Close()
	}
	return float64(n) / (1 << 20) / time.Since(start).Seconds()
}
