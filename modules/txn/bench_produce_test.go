package txn_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// BenchmarkProduceIdempotence measures a franz-go producer over a real socket into a
// one-partition topic, idempotent (the default: InitProducerId, then every batch is
// sequence-checked and remembered by the log) against the same producer with
// idempotence off, for 100 B and 1 KiB records: linger 5 ms, batches of at most
// 64 KiB, acks=all, no compression. Both run in the same process one after the other,
// so compare them within one run.
//
//	go test -run '^$' -bench BenchmarkProduceIdempotence -count 3 -benchtime 2s ./modules/txn/
func BenchmarkProduceIdempotence(b *testing.B) {
	br := startBroker(b)
	ctx := context.Background()
	adm := br.Admin(b)
	for _, mode := range []string{"plain", "idempotent"} {
		for _, size := range []struct {
			name string
			n    int
		}{{"100B", 100}, {"1KiB", 1024}} {
			topic := "bench-" + mode + "-" + size.name
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				b.Fatal(err)
			}
			b.Run(mode+"/"+size.name, func(b *testing.B) {
				opts := []kgo.Opt{
					kgo.DefaultProduceTopic(topic),
					kgo.ProducerLinger(5 * time.Millisecond),
					kgo.ProducerBatchMaxBytes(64 << 10),
					kgo.ProducerBatchCompression(kgo.NoCompression()),
					kgo.RequiredAcks(kgo.AllISRAcks()),
				}
				if mode == "plain" {
					opts = append(opts, kgo.DisableIdempotentWrite())
				}
				cl := br.Client(b, opts...)
				value := bytes.Repeat([]byte("x"), size.n)
				var failed atomic.Int64
				done := func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
					}
				}
				testbroker.ProduceFlush(b, ctx, cl, 100, value, done) // warm up: metadata, connection, producer id
				b.SetBytes(int64(size.n))
				b.ResetTimer()
				start := time.Now()
				testbroker.ProduceFlush(b, ctx, cl, b.N, value, done)
				el := time.Since(start)
				b.StopTimer()
				if n := failed.Load(); n > 0 {
					b.Fatalf("%d records failed", n)
				}
				b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
			})
		}
	}
}
