package segmentlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// TestProcManyPartitionsUnderNoFile runs a broker process under RLIMIT_NOFILE 256 with
// one topic of 300 partitions (900 segment files, more than the limit's worth):
// every partition takes a record and serves it back, and the process's descriptors
// stay under the limit throughout.
func TestProcManyPartitionsUnderNoFile(t *testing.T) {
	const limit, parts = 256, 300
	p := brokerproc.Start(t, brokerproc.Options{NoFile: limit})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	const topic = "many-fds"
	if _, err := p.Admin(t).CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl := p.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	rs := make([]*kgo.Record, parts)
	for i := range rs {
		rs[i] = &kgo.Record{Partition: int32(i), Value: fmt.Appendf(nil, "value-%d", i)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if n := p.FDs(); n >= limit {
		t.Fatalf("%d descriptors after producing to %d partitions, limit %d", n, parts, limit)
	}
	cons := p.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[int32]bool{}
	for len(seen) < parts {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d partitions: %v", len(seen), parts, ctx.Err())
		}
		fs.EachError(func(_ string, part int32, err error) { t.Fatalf("fetch partition %d: %v", part, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("value-%d", r.Partition); string(r.Value) != want || r.Offset != 0 {
				t.Fatalf("partition %d offset %d: %q, want %q at 0", r.Partition, r.Offset, r.Value, want)
			}
			seen[r.Partition] = true
		})
	}
	if n := p.FDs(); n >= limit {
		t.Fatalf("%d descriptors after consuming %d partitions, limit %d", n, parts, limit)
	}
}

// TestProcTinySegmentsFDsBounded produces batches one by one to a topic with
// segment.bytes=100 (every batch rolls a segment; the issue measured ~11,000
// descriptors after ~9,000 batches) to a broker under RLIMIT_NOFILE 512: the
// descriptors stay bounded, well under the limit. 1,500 batches in CI, 10,000 in the
// full form.
func TestProcTinySegmentsFDsBounded(t *testing.T) {
	const limit = 512
	batches := 1500
	if brokerproc.Full() {
		batches = 10_000
	}
	p := brokerproc.Start(t, brokerproc.Options{NoFile: limit})
	timeout := 50 * time.Second
	if brokerproc.Full() {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	const topic = "tiny-segments"
	if _, err := p.Admin(t).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("100")}, topic); err != nil {
		t.Fatal(err)
	}
	cl := p.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.MaxProduceRequestsInflightPerBroker(1))
	base := p.FDs()
	peak := base
	for i := range batches {
		if err := cl.ProduceSync(ctx, kgo.SliceRecord(fmt.Appendf(nil, "%d", i))).FirstErr(); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if i%100 == 0 {
			peak = max(peak, p.FDs())
		}
	}
	segs, err := filepath.Glob(filepath.Join(p.DataDir, topic+"-0", "*.log"))
	if err != nil || len(segs) < batches/2 {
		t.Fatalf("%d segments after %d batches (%v): segment.bytes did not roll", len(segs), batches, err)
	}
	peak = max(peak, p.FDs())
	t.Logf("descriptors: %d at start, peak %d, %d segments", base, peak, len(segs))
	if peak >= limit {
		t.Fatalf("peak %d descriptors with %d segments, limit %d", peak, len(segs), limit)
	}
	// Reading the whole log back reopens sealed segments through the cache.
	cons := p.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got int
	for got < batches {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", got, batches, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
	if n := p.FDs(); n >= limit {
		t.Fatalf("%d descriptors after reading %d segments back, limit %d", n, len(segs), limit)
	}
}

// BenchmarkFileCache is one pread through the file-handle cache: hit (the file is
// open) and miss (every acquire reopens: 2x more files than the budget, in turn).
func BenchmarkFileCache(b *testing.B) {
	for _, bc := range []struct {
		name          string
		files, budget int
	}{{"hit", 8, 64}, {"miss", 128, 64}} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			c := newFileCache(bc.budget, nil)
			cfs := make([]*cfile, bc.files)
			for i := range cfs {
				path := filepath.Join(dir, fmt.Sprintf("%d.log", i))
				if err := os.WriteFile(path, make([]byte, 4096), 0o644); err != nil {
					b.Fatal(err)
				}
				cfs[i] = c.lazyFile(path, os.O_RDONLY)
			}
			buf := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := cfs[i%len(cfs)].ReadAt(buf, 128); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.misses.Load())/float64(b.N), "misses/op")
			for _, cf := range cfs {
				_ = cf.close()
			}
		})
	}
}

// TestOutOfDescriptors lowers this process's RLIMIT_NOFILE so that no new descriptor
// can be had (every number below it is taken) while a log rolls a segment on each
// append: each append fails with an I/O error marked errFDExhausted (never
// kernel.ErrCorrupt, so nothing truncates over it; KAFKA_STORAGE_ERROR at the
// response edge), the cache logs one line for the burst, and the log works again once
// descriptors are back. Not parallel: the limit is the process's.
func TestOutOfDescriptors(t *testing.T) {
	var logBuf testcheck.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logBuf, nil))
	s, err := OpenStore(t.TempDir(), logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 100
	l := mustOpen(t, s, rtp, [16]byte{}, cfg)
	batch := storagetest.Batch(0, 1000, 1, 10)
	if _, err := l.AppendLeader(batch); err != nil {
		t.Fatal(err)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	low := rl
	low.Cur = 3 // stdin, stdout and stderr: no free number below it
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	var errs []error
	for range 5 {
		_, err := l.AppendLeader(batch)
		errs = append(errs, err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if !errors.Is(err, errFDExhausted) || errors.Is(err, kernel.ErrCorrupt) {
			t.Fatalf("append %d without descriptors: %v, want errFDExhausted and not ErrCorrupt", i, err)
		}
	}
	if n := strings.Count(logBuf.String(), "out of file descriptors"); n != 1 {
		t.Fatalf("%d log lines for 5 failures, want 1 (rate-limited):\n%s", n, logBuf.String())
	}
	if res, err := l.AppendLeader(batch); err != nil || res.BaseOffset != 1 {
		t.Fatalf("append after the limit is back: %+v, %v (want offset 1)", res, err)
	}
	checkAppendsReadable(t, l, 2)
}

// checkAppendsReadable checks that l holds n records from offset 0, in whole batches.
func checkAppendsReadable(t *testing.T, l kernel.Log, n int64) {
	t.Helper()
	rr, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var size int64
	for _, c := range rr.Chunks {
		size += c.Len()
	}
	if want := n * int64(len(storagetest.Batch(0, 1000, 1, 10))); size != want || l.LogEndOffset() != n {
		t.Fatalf("read %d bytes to offset %d, want %d bytes to %d", size, l.LogEndOffset(), want, n)
	}
}
