package interop

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster metadata benchmarks (issue 7): three real broker processes on 127.0.0.1.
//
//	go test -run '^$' -bench 'BenchmarkCluster' -benchtime 1000x ./interop/
//
// BenchmarkClusterCreateTopics creates b.N topics of 6 partitions (RF 3) in CreateTopics
// requests of 100 topics through a broker that is not the controller, and reports
// topics/s until every broker's Metadata lists them all. BenchmarkClusterPropagation
// creates b.N topics one at a time and reports how long after the CreateTopics answer
// the other brokers list the topic with its leaders (p50, p99, max), with a cluster that
// already holds 10,000 partitions in the "10k" variant.

// benchCluster starts three brokers (all voters) and returns the cluster with the
// controller's id.
func benchCluster(b *testing.B) (*cluster, int32) {
	b.Helper()
	c := newCluster(b, 3, 3, nil)
	c.startAll()
	c.waitAllSeeAll(60*time.Second, allThree)
	return c, c.agreedController(30 * time.Second)
}

// createTopics creates the named topics (partitions each, RF rf) in one request through
// broker n and fails on any topic error.
func (n *clusterNode) createTopics(ctx context.Context, names []string, partitions int32, rf int16) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60000
	for _, name := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = name
		rt.NumPartitions = partitions
		rt.ReplicationFactor = rf
		req.Topics = append(req.Topics, rt)
	}
	resp, err := n.request(ctx, req)
	if err != nil {
		return err
	}
	for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("create %s: %w", t.Topic, err)
		}
	}
	return nil
}

// topicCount is how many topics broker n's Metadata lists with every partition led.
func (n *clusterNode) topicCount(ctx context.Context, partitions int) (int, error) {
	v, err := n.metadata(ctx)
	if err != nil {
		return 0, err
	}
	k := 0
	for name := range v.leaders {
		if allLed(v, name, partitions) {
			k++
		}
	}
	return k, nil
}

func BenchmarkClusterCreateTopics(b *testing.B) {
	c, ctrl := benchCluster(b)
	via := c.node(ctrl%3 + 1) // not the controller: every request is forwarded
	const batch = 100
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += batch {
		var names []string
		for j := i; j < min(i+batch, b.N); j++ {
			names = append(names, fmt.Sprintf("bench-%06d", j))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := via.createTopics(ctx, names, 6, 3)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range c.nodes {
		ok := pollUntil(2*time.Minute, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			k, err := n.topicCount(ctx, 6)
			return err == nil && k >= b.N
		})
		if !ok {
			b.Fatalf("broker %d does not list %d led topics", n.id, b.N)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "topics/s")
	b.ReportMetric(float64(6*b.N)/elapsed.Seconds(), "partitions/s")
	reportRSS(b, c)
}

func BenchmarkClusterPropagation(b *testing.B) {
	for _, pre := range []int{0, 10_000} {
		name := "empty"
		if pre > 0 {
			name = "10k"
		}
		b.Run(name, func(b *testing.B) {
			c, ctrl := benchCluster(b)
			via := c.node(ctrl)
			if pre > 0 {
				// 100 topics of 100 partitions, RF 1: 10,000 partitions, ~3,333 per broker.
				// (RF 3 would put 10,000 replicas on each broker: 30,000 open files with
				// segmentlog's three per segment, past this machine's nofile limit of
				// 20,000; see docs/BENCHMARKS.md.)
				for i := 0; i < 100; i += 20 {
					var names []string
					for j := i; j < i+20; j++ {
						names = append(names, fmt.Sprintf("pre-%03d", j))
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					err := via.createTopics(ctx, names, int32(pre/100), 1)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			others := slices.DeleteFunc(slices.Clone(c.nodes), func(n *clusterNode) bool { return n.id == ctrl })
			var delays []time.Duration
			b.ResetTimer()
			for i := range b.N {
				topic := fmt.Sprintf("prop-%06d", i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := via.createTopics(ctx, []string{topic}, 6, 3); err != nil {
					cancel()
					b.Fatal(err)
				}
				answered := time.Now()
				var wg sync.WaitGroup
				var mu sync.Mutex
				var worst time.Duration
				for _, n := range others {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							v, err := n.metadata(ctx, topic)
							if err == nil && allLed(v, topic, 6) {
								d := time.Since(answered)
								mu.Lock()
								worst = max(worst, d)
								mu.Unlock()
								return
							}
						}
					}()
				}
				wg.Wait()
				err := ctx.Err()
				cancel()
				if err != nil {
					b.Fatalf("topic %s not visible on every broker within a minute", topic)
				}
				delays = append(delays, worst)
			}
			b.StopTimer()
			slices.Sort(delays)
			q := func(f float64) float64 {
				return float64(delays[min(len(delays)-1, int(f*float64(len(delays))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(delays[len(delays)-1].Microseconds())/1000, "max-ms")
			reportRSS(b, c)
		})
	}
}

// reportRSS reports the largest resident set size of the cluster's broker processes.
func reportRSS(b *testing.B, c *cluster) {
	var peak int64
	for _, n := range c.running() {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
		if err != nil {
			return // not Linux
		}
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				peak = max(peak, kb)
			}
		}
	}
	b.ReportMetric(float64(peak)/1024, "max-rss-MiB")
}

// BenchmarkReplicationProduce compares RF 1 with acks=1 against RF 3 with acks=all
// (min.insync.replicas 2) on the same three-broker cluster: one franz-go producer,
// 1 KiB records to 6 partitions, b.N records per variant. It reports records/s, MB/s
// and the p50/p99 time from Produce to its acknowledgement (client queueing included:
// the producer runs flat out with up to 10,000 records buffered), then the same
// latencies for 20,000 records paced at 10,000 records/s.
//
//	go test -run '^$' -bench BenchmarkReplicationProduce -benchtime 200000x ./interop/
func BenchmarkReplicationProduce(b *testing.B) {
	c := newClusterWith(b, 3, 3, nil, clusterOpt{configs: withReplConfigs(nil)})
	c.startAll()
	c.waitAllSeeAll(60*time.Second, allThree)
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for _, v := range []struct {
		name string
		rf   int16
		acks kgo.Acks
	}{{"rf1-acks1", 1, kgo.LeaderAck()}, {"rf3-acksall", 3, kgo.AllISRAcks()}} {
		b.Run(v.name, func(b *testing.B) {
			topic := "bench-" + v.name
			c.node(1).mustCreateTopic(30*time.Second, topic, 6, v.rf, map[string]string{"min.insync.replicas": strconv.Itoa(min(int(v.rf), 2))})
			opts := []kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(v.acks), kgo.MaxBufferedRecords(10000),
				kgo.ProducerLinger(time.Millisecond)}
			if v.acks != kgo.AllISRAcks() {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			// Warm up: metadata, connections, producer id.
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, b.N)
			var wg sync.WaitGroup
			var failed atomic.Int64
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				wg.Add(1)
				t0 := time.Now()
				cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
					}
					lat[i] = time.Since(t0)
					wg.Done()
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d records failed", n)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")

			// Paced: 10,000 records/s for 2s, so the ack latency is the brokers' (and
			// the replication's), not the client's queue.
			const rate, paced = 10_000, 20_000
			plat := make([]time.Duration, paced)
			tick := time.NewTicker(time.Second / 100)
			defer tick.Stop()
			for i := 0; i < paced; {
				<-tick.C
				for range rate / 100 {
					wg.Add(1)
					t0 := time.Now()
					j := i
					cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
						if err != nil {
							failed.Add(1)
						}
						plat[j] = time.Since(t0)
						wg.Done()
					})
					i++
				}
			}
			wg.Wait()
			slices.Sort(plat)
			b.ReportMetric(float64(plat[paced/2].Microseconds())/1000, "paced-p50-ms")
			b.ReportMetric(float64(plat[paced*99/100].Microseconds())/1000, "paced-p99-ms")
		})
	}
}
