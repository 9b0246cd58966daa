package groups_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// Share group benchmarks (docs/BENCHMARKS.md, "Share groups"): an in-process broker,
// a 6-partition topic, franz-go consumers that have joined their group before the
// records are written, and the time from the first record produced to the last one
// consumed (and, for share groups, accepted).
//
//	go test -run '^$' -bench 'BenchmarkShareGroup' -benchtime 1x -count 3 ./modules/groups

const (
	shareBenchRecords = 200_000
	shareBenchParts   = 6
)

// BenchmarkShareGroup reads the topic with a share group of 1, 4 and 16 consumers,
// accepting every record, and with a classic consumer group of the same sizes (at most
// six members get partitions there), reporting records/s and, for share groups, the
// p99 of an acknowledgement round trip (FlushAcks: the acceptances are durable on the
// broker when it answers).
func BenchmarkShareGroup(b *testing.B) {
	for _, kind := range []string{"share", "classic"} {
		for _, n := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/consumers=%d", kind, n), func(b *testing.B) {
				for i := range b.N {
					rate, p99 := shareBenchRun(b, kind, n, i)
					b.ReportMetric(rate, "records/s")
					if kind == "share" {
						b.ReportMetric(float64(p99.Microseconds())/1000, "ack-p99-ms")
					}
				}
			})
		}
	}
}

func shareBenchRun(b *testing.B, kind string, n, i int) (float64, time.Duration) {
	b.StopTimer()
	br := testbroker.Start(b, testbroker.WithConfig(benchConfig))
	defer br.Stop()
	topic, group := fmt.Sprintf("sb-%d", i), fmt.Sprintf("g-%s-%d-%d", kind, n, i)
	adm := br.Admin(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, shareBenchParts, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	admCl := br.Client(b)
	var clients []*kgo.Client
	for range n {
		opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100 * time.Millisecond)}
		if kind == "share" {
			opts = append(opts, kgo.ShareGroup(group), kgo.ShareMaxRecords(500))
		} else {
			opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.HeartbeatInterval(100*time.Millisecond))
		}
		cl := br.Client(b, opts...)
		defer cl.Close()
		clients = append(clients, cl)
	}
	var (
		seen   atomic.Int64
		mu     sync.Mutex
		ackLat []time.Duration
		wg     sync.WaitGroup
	)
	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollFetches(pollCtx)
				k := 0
				fs.EachRecord(func(r *kgo.Record) {
					if kind == "share" {
						r.Ack(kgo.AckAccept)
					}
					k++
				})
				if kind == "share" && k > 0 {
					t0 := time.Now()
					if err := cl.FlushAcks(pollCtx); err == nil {
						mu.Lock()
						ackLat = append(ackLat, time.Since(t0))
						mu.Unlock()
					}
				}
				seen.Add(int64(k))
			}
		}()
	}
	// Every member has joined before a record is written.
	waitFor(b, 60*time.Second, "the group formed", func() string {
		if kind == "share" {
			d := describeShare(b, admCl, group)
			if len(d.Members) != n {
				return fmt.Sprintf("%d share members", len(d.Members))
			}
			return ""
		}
		d, err := describeGroup(adm, group, 5*time.Second)
		if err != nil || d.State != "Stable" || len(d.Members) != n {
			return fmt.Sprintf("classic group %s with %d members (%v)", d.State, len(d.Members), err)
		}
		return ""
	})
	prod := br.Client(b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	val := make([]byte, 100)
	b.StartTimer()
	start := time.Now()
	for j := range shareBenchRecords {
		prod.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(j)), Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Errorf("produce: %v", err)
			}
		})
	}
	waitFor(b, 4*time.Minute, "every record consumed", func() string {
		if got := seen.Load(); got < shareBenchRecords {
			return fmt.Sprintf("%d of %d", got, shareBenchRecords)
		}
		return ""
	})
	elapsed := time.Since(start)
	b.StopTimer()
	stopPolls()
	wg.Wait()
	var p99 time.Duration
	if len(ackLat) > 0 {
		slices.Sort(ackLat)
		p99 = ackLat[len(ackLat)*99/100]
	}
	return float64(shareBenchRecords) / elapsed.Seconds(), p99
}

// describeShare returns group's ShareGroupDescribe.
func describeShare(t testing.TB, cl *kgo.Client, group string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	g, err := tryDescribeShare(cl, group)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// tryDescribeShare is describeShare for polling loops, where a
// coordinator still loading is an answer to wait out, not a failure.
func tryDescribeShare(cl *kgo.Client, group string) (kmsg.ShareGroupDescribeResponseGroup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Groups) != 1 {
		err = fmt.Errorf("%d groups in the answer", len(resp.Groups))
	}
	if err != nil {
		return kmsg.ShareGroupDescribeResponseGroup{}, fmt.Errorf("ShareGroupDescribe %s: %w", group, err)
	}
	return resp.Groups[0], nil
}
