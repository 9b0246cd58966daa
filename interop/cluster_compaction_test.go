package interop

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/segmentlog"
)

// TestClusterCompaction: a compacted topic with RF 3 on three broker processes, the
// cleaner running every 50 ms on each, while an idempotent acks=all producer rewrites
// 40 keys and the partition's leader is SIGKILLed and restarted three times. Then:
// every key's value is the last acknowledged one or a later one (no acknowledged
// update lost, none resurrected from an older version), each key is there once once
// the cleaners caught up, and after a clean shutdown the three replicas' logs, read
// from their data dirs, hold the same latest value per key (each replica cleans on its
// own; consumers of any replica see the same values).
func TestClusterCompaction(t *testing.T) {
	t.Parallel()
	const topic, keys = "compacted", 40
	c := newReplCluster(t, map[string]string{"log.cleaner.backoff.ms": "50"})
	c.node(1).mustCreateTopic(30*time.Second, topic, 1, 3, map[string]string{
		"min.insync.replicas":       "2",
		"cleanup.policy":            "compact",
		"segment.bytes":             "16384",
		"min.cleanable.dirty.ratio": "0.01",
	})
	c.node(1).waitPartitions(30*time.Second, topic, "ISR whole", fullISR(allThree))

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ClientID("sluice-interop-compaction"),
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond),
		// Uncompressed batches well below segment.bytes: the filler below must fill
		// segments (compressed, it would not leave the active one).
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	acked := map[string]int{} // key -> highest acknowledged version
	var acks atomic.Int64     // acknowledgements so far
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 0; ctx.Err() == nil; v++ {
			k := fmt.Sprintf("ck%02d", v%keys)
			cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(strconv.Itoa(v))}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[k] = max(acked[k], v)
					mu.Unlock()
					acks.Add(1)
				}
			})
			if v%200 == 199 { // a few thousand records a second: this is about correctness
				_ = cl.Flush(ctx)
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	if !pollUntil(60*time.Second, func() bool { return ackedCount() == keys }) {
		t.Fatalf("only %d keys acknowledged", ackedCount())
	}
	for kill := 1; kill <= 3; kill++ {
		ps := c.node(1).waitPartitions(30*time.Second, topic, "a leader", func(ps map[int32]partState) bool { return ps[0].leader > 0 })
		victim := c.node(ps[0].leader)
		victim.kill()
		other := c.others(victim)[0]
		other.waitPartitions(30*time.Second, topic, fmt.Sprintf("broker %d not leading", victim.id), func(ps map[int32]partState) bool {
			return ps[0].leader > 0 && ps[0].leader != victim.id
		})
		// The new leader takes writes (and its cleaner their churn) before the old one
		// comes back.
		since := acks.Load()
		if !pollUntil(30*time.Second, func() bool { return acks.Load() >= since+1000 }) {
			t.Fatalf("no writes acknowledged by the new leader after kill %d", kill)
		}
		victim.start()
		other.waitPartitions(60*time.Second, topic, "ISR whole again", fullISR(allThree))
		t.Logf("kill %d: broker %d", kill, victim.id)
	}
	stop()
	wg.Wait()
	if err := cl.Flush(context.Background()); err != nil {
		t.Logf("flush after stop: %v", err)
	}
	mu.Lock()
	final := maps.Clone(acked)
	mu.Unlock()
	// Push the last versions out of the active segment (never cleaned).
	filler := []byte(strings.Repeat("f", 500))
	for i := 0; i < 200; i++ { // 100 KB: a few 16 KiB segments
		cl.Produce(context.Background(), &kgo.Record{Key: []byte("filler"), Value: filler}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The leader's log: each key once (after the cleaners caught up), at the last
	// acknowledged version or later.
	var got map[string]int
	ok := pollUntil(60*time.Second, func() bool {
		got = readLatest(t, c.seeds(), topic)
		return len(got) == keys && !slices.ContainsFunc(slices.Collect(maps.Values(got)), func(n int) bool { return n < 0 })
	})
	if !ok {
		for _, n := range c.nodes {
			t.Logf("broker %d cleaner metrics:\n%s", n.id, cleanerMetrics(n.adminAddr))
		}
		t.Fatalf("not compacted to one record per key: %v", got)
	}
	for k, v := range final {
		if got[k] < v {
			t.Fatalf("key %s: version %d, acknowledged %d", k, got[k], v)
		}
	}

	// Every replica's log, read from its data dir after a clean shutdown.
	c.node(1).waitPartitions(30*time.Second, topic, "ISR whole", fullISR(allThree))
	c.stopAll()
	var replicas []map[string]int
	for _, n := range c.nodes {
		replicas = append(replicas, latestOnDisk(t, n.dataDir, kernel.TopicPartition{Topic: topic, Partition: 0}))
	}
	for i, r := range replicas {
		if !maps.Equal(r, replicas[0]) {
			t.Fatalf("replica %d disagrees with replica 1:\n%v\n%v", i+1, r, replicas[0])
		}
	}
	for k, v := range got {
		if replicas[0][k] < v {
			t.Fatalf("key %s: %d on disk, %d consumed", k, replicas[0][k], v)
		}
	}
}

// cleanerMetrics returns the log cleaner's lines of a broker's /metrics.
func cleanerMetrics(admin string) string {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "sluice_log_cleaner") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// readLatest consumes partition 0 from the start to its high watermark and returns
// the latest version per key; a key seen twice maps to -1 (not compacted yet).
func readLatest(t *testing.T, seeds []string, topic string) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out := map[string]int{}
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if !strings.HasPrefix(string(r.Key), "ck") {
				return
			}
			v, _ := strconv.Atoi(string(r.Value))
			if _, dup := out[string(r.Key)]; dup {
				v = -1
			}
			out[string(r.Key)] = v
		})
	}
	return out
}

// latestOnDisk opens one partition of a stopped broker's data dir and returns its
// latest version per key, every batch read (the high watermark does not bound it).
func latestOnDisk(t *testing.T, dataDir string, tp kernel.TopicPartition) map[string]int {
	t.Helper()
	st, err := segmentlog.OpenStore(dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.Open(tp, [16]byte{}, kernel.LogConfig{SegmentBytes: 1 << 30, SegmentIndexBytes: 1 << 20, IndexIntervalBytes: 4096, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: "compact"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	d := recordbatch.Decoder{Compacted: true}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rr, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		var buf []byte
		for _, ch := range rr.Chunks {
			b := make([]byte, ch.N)
			if _, err := ch.File.ReadAt(b, ch.Off); err != nil {
				t.Fatal(err)
			}
			buf = append(buf, b...)
		}
		rr.Release()
		if len(buf) == 0 {
			break
		}
		if err := recordbatch.Split(buf, func(h recordbatch.Header, batch []byte) error {
			off = h.LastOffset() + 1
			if h.IsControl() {
				return nil
			}
			_, err := d.Records(batch, func(r *recordbatch.Record) error {
				if strings.HasPrefix(string(r.Key), "ck") {
					v, _ := strconv.Atoi(string(r.Value))
					out[string(r.Key)] = v
				}
				return nil
			})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
