package metricstest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// BenchmarkScrape is one GET /metrics (gather, encode, gzip, transfer) of a broker
// with 10,000 partitions and 100 groups, each lagging on 100 partitions: 10,000
// lags, each needing a high watermark and a batch header read, written as 20,000
// samples ("partitions") or, with sluice.metrics.partition.series=false, as 200
// ("topics"). The broker runs in this process, so the allocations reported include
// the broker's.
//
//	go test -run '^$' -bench BenchmarkScrape -benchtime 20x ./internal/metricstest
func BenchmarkScrape(b *testing.B) {
	b.Run("partitions", func(b *testing.B) { benchScrape(b, "") })
	b.Run("topics", func(b *testing.B) { benchScrape(b, `configs: {sluice.metrics.partition.series: "false"}`) })
}

func benchScrape(b *testing.B, config string) {
	const partitions, groups = 10_000, 100
	br := testbroker.Start(b, testbroker.WithConfig(config))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := br.Admin(b)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, "wide"); err != nil {
		b.Fatal(err)
	}
	cl := br.Client(b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	b.Cleanup(cl.Close)
	for round := range 2 {
		for p := range int32(partitions) {
			cl.Produce(ctx, &kgo.Record{Topic: "wide", Partition: p, Value: fmt.Appendf(nil, "%d", round)}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for g := range groups {
		var o kadm.Offsets
		for p := range int32(partitions / groups) {
			o.AddOffset("wide", int32(g)*partitions/groups+p, 1, -1)
		}
		testbroker.RetryCoordinator(b, ctx, "commit", func() error {
			resp, err := adm.CommitOffsets(ctx, fmt.Sprintf("g%03d", g), o)
			if err == nil {
				err = resp.Error()
			}
			return err
		})
	}
	url := "http://" + br.AdminAddr + "/metrics"
	var size int64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		size, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status, err)
		}
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}
