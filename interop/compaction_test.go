package interop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// cleanerConfig runs the broker's log cleaner every 50 ms.
const cleanerConfig = "configs:\n  log.cleaner.backoff.ms: \"50\"\n"

// waitCompacted polls (with franz-go) until partition 0 of topic holds each key with
// the given prefix once: the broker's cleaner has caught up with what was produced.
func waitCompacted(t *testing.T, addr, topic, prefix string, keys int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		perKey := map[string]int{}
		cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				if strings.HasPrefix(string(r.Key), prefix) {
					perKey[string(r.Key)]++
				}
			})
		}
		cancel()
		cl.Close()
		once := len(perKey) == keys
		for _, n := range perKey {
			once = once && n == 1
		}
		if once {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not compacted within 60s: %v", topic, perKey)
		}
	}
}

// TestCompactionClients: librdkafka (Python) and kafkajs create compacted topics,
// produce compressed keyed records and tombstones, and after the broker's cleaner ran
// read back a log with each key once at its latest value (tombstones as null),
// offsets increasing across the gaps compaction left, and the log start still 0.
func TestCompactionClients(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, cleanerConfig)
	t.Run("librdkafka", func(t *testing.T) {
		needLibrdkafka(t)
		runPythonOK(t, 90*time.Second, "compaction librdkafka: produced", "compaction_librdkafka_test.py", "produce", b.addr, "compact-lrk")
		waitCompacted(t, b.addr, "compact-lrk", "lrk-k", 20)
		runPythonOK(t, 90*time.Second, "compaction librdkafka: OK", "compaction_librdkafka_test.py", "consume", b.addr, "compact-lrk")
	})
	t.Run("kafkajs", func(t *testing.T) {
		node := needKafkajs(t)
		runNodeOK(t, node, "compaction kafkajs: produced", "compaction_kafkajs_test.js", "produce", b.addr, "compact-kjs")
		waitCompacted(t, b.addr, "compact-kjs", "kjs-k", 20)
		runNodeOK(t, node, "compaction kafkajs: OK", "compaction_kafkajs_test.js", "consume", b.addr, "compact-kjs")
	})
}

// runNodeOK runs script under node and fails unless its output has the ok line.
func runNodeOK(t *testing.T, node, ok, script string, args ...string) {
	t.Helper()
	start := time.Now()
	out := runCmd(t, runOpts{timeout: 90 * time.Second, env: nodeEnv()}, node, append([]string{script}, args...)...)
	t.Logf("%s (%s):\n%s", script, time.Since(start).Round(time.Millisecond), tail(out, 20))
	if !strings.Contains(out, ok) {
		t.Errorf("%s exited 0 without its OK line", script)
	}
}
