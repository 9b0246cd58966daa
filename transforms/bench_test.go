package transforms_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/transforms"
)

// BenchmarkProduceTransform measures produce throughput through a real socket
// into one 1-partition topic per case: without a transform, with the identity
// test guest and with the redact-json example, for 100-byte and 1 KiB JSON
// values that contain the redacted field. The producer batches as a real one
// does (linger 5 ms, acks=all, no idempotence, no compression so the codec is
// not what is measured, batches of at most benchBatchBytes). One op is one record; records/s and MB/s (of record
// values) are reported.
//
//	go test -run '^$' -bench BenchmarkProduceTransform -count 3 ./transforms/
func BenchmarkProduceTransform(b *testing.B) {
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	br := testbroker.Start(b)
	type tcase struct{ mode, wasm string }
	modes := []tcase{{"none", ""}, {"identity", "sdk-identity"}, {"identity-rawguest", "identity"}, {"redact-json", "redact-json"}}
	sizes := []struct {
		name string
		n    int
	}{{"100B", 100}, {"1KiB", 1024}}

	ctx := context.Background()
	adm := br.Admin(b)
	for _, m := range modes {
		for _, s := range sizes {
			topic := "bench-" + m.mode + "-" + s.name
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				b.Fatal(err)
			}
			if m.wasm != "" {
				benchDeploy(b, br, topic, m.wasm, topic)
			}
		}
	}

	for _, m := range modes {
		b.Run(m.mode, func(b *testing.B) {
			for _, s := range sizes {
				b.Run(s.name, func(b *testing.B) {
					topic := "bench-" + m.mode + "-" + s.name
					benchProduce(b, br, topic, s.n)
				})
			}
		})
	}
}

// benchBatchBytes bounds the producer's batches. franz-go's default (1 MiB)
// makes one redact-json batch of 100-byte records outlast the transforms'
// default 2 s batch timeout on this (loaded, 2-core) machine; 64 KiB is
// between the Java producer's 16 KiB batch.size and franz-go's default.
const benchBatchBytes = 64 << 10

// benchValue returns a JSON value of exactly n bytes with an "ssn" member.
func benchValue(n int) []byte {
	v := []byte(`{"id":12345,"ssn":"123-45-6789","name":"`)
	tail := []byte(`"}`)
	pad := n - len(v) - len(tail)
	v = append(v, bytes.Repeat([]byte("x"), max(pad, 0))...)
	return append(v, tail...)
}

func benchProduce(b *testing.B, br *testbroker.Broker, topic string, size int) {
	cl := br.Client(b,
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(benchBatchBytes),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	value := benchValue(size)
	var failed atomic.Int64
	var firstErr atomic.Value
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			if failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		}
	}
	ctx := context.Background()
	// Warm up: metadata, connection, the transform's instance.
	testbroker.ProduceFlush(b, ctx, cl, 100, value, done)
	before := benchStatus(b, br, topic)
	b.ResetTimer()
	start := time.Now()
	testbroker.ProduceFlush(b, ctx, cl, b.N, value, done)
	el := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d records failed, first: %v; transform: %+v", n, firstErr.Load(), benchStatus(b, br, topic))
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	if after := benchStatus(b, br, topic); after.Batches > before.Batches {
		// Batches the transform ran, and their mean size, during the timed part.
		n := float64(after.Batches - before.Batches)
		b.ReportMetric(float64(after.RecordsIn-before.RecordsIn)/n, "records/batch")
	}
	b.ReportMetric(float64(b.N)*float64(size)/el.Seconds()/1e6, "MB/s")
}

// benchStatus returns the status of transform name (zero if not deployed).
func benchStatus(b *testing.B, br *testbroker.Broker, name string) transforms.Status {
	b.Helper()
	for _, s := range statuses(b, br) {
		if s.Name == name {
			return s
		}
	}
	return transforms.Status{}
}

// benchDeploy deploys module wasm as an inline transform of input and waits
// until it runs.
func benchDeploy(b *testing.B, br *testbroker.Broker, name, wasm, input string) {
	b.Helper()
	bin, err := os.ReadFile(filepath.Join(wasmDir, wasm+".wasm"))
	if err != nil {
		b.Fatal(err)
	}
	q := url.Values{"input": {input}}
	req, err := http.NewRequest(http.MethodPut, "http://"+br.AdminAddr+"/v1/transforms/"+name+"?"+q.Encode(), bytes.NewReader(bin))
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("deploy %s: HTTP %d", name, resp.StatusCode)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		switch s := benchStatus(b, br, name); {
		case s.State == "running":
			return
		case strings.HasPrefix(s.State, "failed"):
			b.Fatalf("transform %s: %s: %s", name, s.State, s.LastError)
		}
		if time.Now().After(deadline) {
			b.Fatalf("transform %s not running after a minute", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBenchValue checks the benchmark's records: the value sizes are exact and
// redact-json rewrites them.
func TestBenchValue(t *testing.T) {
	for _, n := range []int{100, 1024} {
		v := benchValue(n)
		if len(v) != n || !json.Valid(v) {
			t.Fatalf("benchValue(%d) = %d bytes, valid %v", n, len(v), json.Valid(v))
		}
	}
}
