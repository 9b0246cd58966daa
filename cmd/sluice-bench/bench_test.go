package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// benchRun runs the tool in-process and returns its JSON line, failing the test on a
// non-zero exit, on more or fewer than one JSON line, or on a line that does not parse.
func benchRun(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	args = append(args, "--timeout", "50s")
	if code := run(ctx, args, &out, &errb); code != 0 {
		t.Fatalf("sluice-bench %v: exit %d\nstdout: %s\nstderr: %s", args, code, out.String(), errb.String())
	}
	var lines []string
	for l := range strings.SplitSeq(out.String(), "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("sluice-bench %v: %d JSON lines, want 1:\n%s", args, len(lines), out.String())
	}
	var r result
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatalf("JSON line does not parse: %v\n%s", err, lines[0])
	}
	if r.Tool != "sluice-bench" || r.Mode != args[0] || r.Errors != 0 || r.Seconds <= 0 {
		t.Fatalf("result: %+v", r)
	}
	if !strings.Contains(out.String(), "records") {
		t.Fatalf("no human-readable summary:\n%s", out.String())
	}
	return r
}

// Against a real in-process Sluice broker: produce (keyed and not, two producers,
// compressed), consume everything (one consumer, then a group of two), and e2e. The
// counts must match exactly; the broker is this process, so its /proc figures are read
// too.
func TestAgainstSluice(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(`
configs:
  group.initial.rebalance.delay.ms: "0"
  offsets.topic.num.partitions: "4"
`))
	pid := fmt.Sprint(os.Getpid())
	common := []string{"--brokers", b.Addr, "--partitions", "3", "--broker-pid", pid, "--progress", "0"}

	p := benchRun(t, append([]string{"produce", "--topic", "t", "--records", "3000", "--record-size", "200",
		"--producers", "2", "--compression", "lz4", "--acks", "all", "--keyed"}, common...)...)
	if p.Records != 3000 || p.Bytes != 3000*(200+8) || p.Partitions != 3 || p.Latency == nil || p.Latency.Count != 3000 {
		t.Fatalf("produce: %+v (latency %+v)", p, p.Latency)
	}
	if p.Broker == nil || p.Broker.PID != os.Getpid() || p.Broker.PeakRSSBytes <= 0 || p.Broker.CPUSeconds < 0 {
		t.Fatalf("produce broker stats: %+v", p.Broker)
	}
	p2 := benchRun(t, append([]string{"produce", "--topic", "t", "--records", "1000", "--record-size", "50"}, common...)...)
	if p2.Records != 1000 || p2.Bytes != 1000*50 {
		t.Fatalf("unkeyed produce: %+v", p2)
	}

	// Paced, over a few keys, into a compacted topic.
	start := time.Now()
	k := benchRun(t, append([]string{"produce", "--topic", "k", "--records", "600", "--rate", "1000", "--keyed", "--keys", "10",
		"--topic-config", "cleanup.policy=compact", "--topic-config", "segment.bytes=1048576"}, common...)...)
	if took := time.Since(start); k.Records != 600 || took < 500*time.Millisecond || k.Config["rate"] != float64(1000) || k.Config["keys"] != float64(10) {
		t.Fatalf("produce --rate 1000 of 600 records: %+v in %v", k, took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfgs, err := b.Admin(t).DescribeTopicConfigs(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := cfgs.On("k", nil); err != nil {
		t.Fatal(err)
	} else if v, ok := configValue(rc.Configs, "cleanup.policy"); !ok || v != "compact" {
		t.Fatalf("--topic-config cleanup.policy=compact: the topic has %q", v)
	}
	cl := b.Client(t, kgo.ConsumeTopics("k"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	keys := map[string]bool{}
	for n := 0; n < 600; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read k after %d records: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { keys[string(r.Key)] = true; n++ })
	}
	if len(keys) != 10 {
		t.Fatalf("--keys 10: %d distinct keys", len(keys))
	}

	c := benchRun(t, append([]string{"consume", "--topic", "t"}, common...)...)
	if c.Records != 4000 || c.Bytes != 3000*208+1000*50 {
		t.Fatalf("consume everything: %d records, %d bytes; want 4000, %d", c.Records, c.Bytes, 3000*208+1000*50)
	}
	c = benchRun(t, append([]string{"consume", "--topic", "t", "--records", "500"}, common...)...)
	if c.Records < 500 {
		t.Fatalf("consume --records 500: %d", c.Records)
	}
	g := benchRun(t, append([]string{"consume", "--topic", "t", "--members", "2"}, common...)...)
	// A rebalance while members join can hand a partition over before its first commit,
	// so a group may read some records twice; it must read every one.
	if g.Records < 4000 || g.Config["members"] != float64(2) || g.Config["end_offsets_total"] != float64(4000) {
		t.Fatalf("group consume: %+v", g)
	}

	e := benchRun(t, append([]string{"e2e", "--topic", "e", "--rate", "400", "--duration", "1500ms", "--warmup", "200ms",
		"--record-size", "64", "--acks", "all"}, common...)...)
	if e.Sent < 500 || e.Records != e.Sent || e.Lost != 0 || e.Duplicates != 0 || e.Latency == nil ||
		e.Latency.Count != uint64(e.Measured) || e.Measured < 400 || e.Latency.P50 <= 0 || e.Latency.Max < e.Latency.P999 {
		t.Fatalf("e2e: %+v latency %+v", e, e.Latency)
	}
}

// configValue returns the value of config name in cs.
func configValue(cs []kadm.Config, name string) (string, bool) {
	for _, c := range cs {
		if c.Key == name && c.Value != nil {
			return *c.Value, true
		}
	}
	return "", false
}

// Quotas set with the quota command hold back a producer (its --warmup span measures the
// throttled rate), and a producer without a quota is not throttled; the measured span
// of --warmup is exactly --duration less the warm-up.
func TestQuotaAgainstSluice(t *testing.T) {
	// Two samples of 1 s: a client's allowance before its first throttle is one
	// second's worth, so the throttle comes within the run.
	b := testbroker.Start(t, testbroker.WithConfig("configs: {quota.window.num: \"2\", quota.window.size.seconds: \"1\"}\n"))
	common := []string{"--brokers", b.Addr, "--partitions", "2", "--progress", "0"}

	q := benchRun(t, append([]string{"quota", "--entity", "client-id=slow", "--set", "producer_byte_rate=100000",
		"--count", "5", "--batch", "4"}, common...)...)
	if q.Records != 6 || q.Config["described"] != float64(6) || q.Config["count"] != float64(5) {
		t.Fatalf("quota: %+v", q)
	}

	// A small buffer keeps each request small: a throttle is capped at the rate
	// window (2 s here, as in Kafka), so a client whose one request holds more than
	// two seconds of quota would get more than its quota, and a backlogged client
	// on a slow (-race) broker sends requests of up to its whole buffer.
	slow := benchRun(t, append([]string{"produce", "--topic", "q", "--client-id", "slow", "--record-size", "1000",
		"--rate", "1000", "--duration", "3s", "--warmup", "1s", "--max-buffered-records", "100"}, common...)...)
	// 1 MB/s offered against 100 kB/s allowed.
	if slow.Throttled == nil || slow.Throttled.Responses == 0 || slow.MBPerSec > 0.5 || slow.Seconds != 2 ||
		slow.Config["warmup"] != "1s" {
		t.Fatalf("throttled produce: %+v (throttled %+v)", slow, slow.Throttled)
	}

	fast := benchRun(t, append([]string{"produce", "--topic", "q", "--client-id", "fast", "--record-size", "100",
		"--rate", "2000", "--duration", "2s", "--warmup", "500ms"}, common...)...)
	if fast.Throttled == nil || fast.Throttled.Responses != 0 || fast.Seconds != 1.5 ||
		fast.Records < 2000 || fast.Records > 4000 || fast.Latency == nil || fast.Latency.Count < 2000 {
		t.Fatalf("produce without a quota: %+v (latency %+v)", fast, fast.Latency)
	}
}
