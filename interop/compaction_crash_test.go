package interop

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactionSIGKILL kills the broker process (SIGKILL) four times at random
// moments while its cleaner works through an 8 MiB compacted log, throttled to
// 4 MB/s so that a pass takes seconds and the kills land inside passes (before,
// during and after swaps), while a producer goes on rewriting the keys. After each
// restart the log must open; at the end every key holds its last acknowledged
// version or a later one, each key once after the cleaner caught up, offsets
// strictly increasing. (segmentlog's TestCleanCrashAtEveryPoint stops a pass at each
// named step of the swap in-process; this is the same with a real process and real
// timing.)
func TestCompactionSIGKILL(t *testing.T) {
	t.Parallel()
	const topic, keys = "compact-crash", 64
	b := startBrokerConfig(t, `configs:
  log.cleaner.backoff.ms: "50"
  log.cleaner.io.max.bytes.per.second: "4000000"
`)
	createTopicConfigs(t, b.addr, topic, 1, map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             "262144",
		"min.cleanable.dirty.ratio": "0.05",
	})
	cl := newClient(t, b.addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // the log's size is what the test is about
		kgo.ProducerBatchMaxBytes(64<<10),                 // well below segment.bytes
		kgo.RecordRetries(1000), kgo.RetryTimeout(2*time.Minute))
	value := strings.Repeat("x", 1000)
	var mu sync.Mutex
	acked := map[string]int{}
	produce := func(ctx context.Context, v int) {
		k := fmt.Sprintf("key-%02d", v%keys)
		cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(strconv.Itoa(v) + ":" + value)}, func(_ *kgo.Record, err error) {
			if err == nil {
				mu.Lock()
				acked[k] = max(acked[k], v)
				mu.Unlock()
			}
		})
	}
	v := 0
	for ; v < 8_000; v++ { // ~8 MiB, 125 versions of each key
		produce(context.Background(), v)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	lastKey := acked[fmt.Sprintf("key-%02d", (v-1)%keys)]
	mu.Unlock()
	if lastKey != v-1 {
		t.Fatalf("the last record written before the kills (%d) was not acknowledged (%d)", v-1, lastKey)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a slow stream of new versions throughout
		defer wg.Done()
		for w := v; ctx.Err() == nil; w++ {
			produce(ctx, w)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
	for kill := 1; kill <= 4; kill++ {
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		before := cleanerMetrics(b.adminAddr)
		b.kill()
		t.Logf("kill %d; the cleaner before it: %s", kill, oneLine(before))
		b.start()
	}
	stop()
	wg.Wait()
	_ = cl.Flush(context.Background())
	for i := 0; i < 600; i++ { // move the last versions out of the active segment
		cl.Produce(context.Background(), &kgo.Record{Key: []byte("filler"), Value: []byte(value)}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	final := maps.Clone(acked)
	mu.Unlock()
	var got map[string]int
	if !pollUntil(90*time.Second, func() bool {
		got = readVersions(t, b.addr, topic)
		if len(got) != keys {
			return false
		}
		for _, n := range got {
			if n < 0 {
				return false
			}
		}
		return true
	}) {
		ck, _ := os.ReadFile(filepath.Join(b.dataDir, "cleaner-offset-checkpoint"))
		ents, _ := os.ReadDir(filepath.Join(b.dataDir, topic+"-0"))
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		hw, _ := os.ReadFile(filepath.Join(b.dataDir, "replication-offset-checkpoint"))
		t.Fatalf("not compacted to one record per key after the kills: %v\ncleaner: %s\ncleaner-offset-checkpoint: %q\nhw: %q\nfiles: %v", got, oneLine(cleanerMetrics(b.adminAddr)), ck, hw, names)
	}
	for k, want := range final {
		if got[k] < want {
			t.Fatalf("%s: version %d after the kills, %d was acknowledged", k, got[k], want)
		}
	}
}

// oneLine joins the metric lines worth logging with "; ".
func oneLine(metrics string) string {
	var keep []string
	for _, l := range strings.Split(metrics, "\n") {
		if strings.Contains(l, "passes_total") || strings.Contains(l, "bytes_read_total") || strings.Contains(l, "dirty_bytes") || strings.Contains(l, "errors_total") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "; ")
}

// readVersions reads partition 0 from the start for 3 s and returns each key's
// version (the number before ':' in its value); a key seen twice maps to -1. It
// fails the test if offsets do not strictly increase.
func readVersions(t *testing.T, addr, topic string) map[string]int {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out := map[string]int{}
	last := int64(-1)
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Errorf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			k := string(r.Key)
			if !strings.HasPrefix(k, "key-") {
				return
			}
			n, _ := strconv.Atoi(strings.SplitN(string(r.Value), ":", 2)[0])
			if _, dup := out[k]; dup {
				n = -1
			}
			out[k] = n
		})
	}
	return out
}
