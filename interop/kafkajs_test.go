package interop

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// kafkajsReport is the last stdout line of kafkajs_test.js: every message it wrote.
type kafkajsReport struct {
	Topic      string `json:"topic"`
	Partitions int32  `json:"partitions"`
	Messages   []struct {
		Partition int32       `json:"partition"`
		Key       *string     `json:"key"`
		Value     string      `json:"value"`
		Headers   [][2]string `json:"headers"`
	} `json:"messages"`
}

// nodeEnv is what kafkajs scripts get added to the test's environment: no warning about
// kafkajs v2's changed default partitioner on every producer.
func nodeEnv() []string { return []string{"KAFKAJS_NO_PARTITIONER_WARNING=1"} }

// startNode starts script args under node as a lineProc.
func startNode(t *testing.T, node, script string, args ...string) *lineProc {
	t.Helper()
	return startLineProc(t, nodeEnv(), node, append([]string{script}, args...)...)
}

// runNodeReport runs script args under node to its end, logs its output but the last line
// and decodes that line, the script's JSON report, into rep.
func runNodeReport(t *testing.T, timeout time.Duration, rep any, node, script string, args ...string) {
	t.Helper()
	start := time.Now()
	out := runCmd(t, runOpts{timeout: timeout, env: nodeEnv()}, node, append([]string{script}, args...)...)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	t.Logf("%s (%s):\n%s", script, time.Since(start).Round(time.Millisecond), tail(strings.Join(lines[:len(lines)-1], "\n"), 20))
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), rep); err != nil {
		t.Fatalf("%s: last line is not its JSON report: %v\n%s", script, err, tail(out, 20))
	}
}

// TestKafkajs runs kafkajs_test.js (admin createTopics, fetchTopicMetadata,
// fetchTopicOffsets, deleteTopics; a gzip, acks -1, non-idempotent producer of keyed
// messages with headers), then reads the topic back with franz-go and compares every
// partition, offset, key, value and header with what kafkajs says it wrote.
func TestKafkajs(t *testing.T) {
	t.Parallel()
	node := needKafkajs(t)
	b := startBroker(t)

	const topic = "kafkajs-keyed"
	var rep kafkajsReport
	runNodeReport(t, 90*time.Second, &rep, node, "kafkajs_test.js", b.addr, topic)
	if rep.Topic != topic || rep.Partitions != 3 || len(rep.Messages) == 0 {
		t.Fatalf("kafkajs_test.js report: topic %q, %d partitions, %d messages", rep.Topic, rep.Partitions, len(rep.Messages))
	}

	parts := make([]int32, rep.Partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	got := fetchAll(t, b.addr, topic, parts, 30*time.Second)

	next := map[int32]int{} // index into got[p] of the next expected record
	for i, m := range rep.Messages {
		recs := got[m.Partition]
		n := next[m.Partition]
		next[m.Partition]++
		if n >= len(recs) {
			t.Errorf("message %d (partition %d): missing; the partition has only %d records", i, m.Partition, len(recs))
			continue
		}
		r := recs[n]
		where := fmt.Sprintf("message %d (partition %d offset %d)", i, m.Partition, r.Offset)
		if r.Offset != int64(n) {
			t.Errorf("%s: offset %d, want %d", where, r.Offset, n)
		}
		switch {
		case m.Key == nil && r.Key != nil:
			t.Errorf("%s: key %q, want null", where, r.Key)
		case m.Key != nil && (r.Key == nil || string(r.Key) != *m.Key):
			t.Errorf("%s: key %q (nil: %v), want %q", where, r.Key, r.Key == nil, *m.Key)
		}
		if string(r.Value) != m.Value {
			t.Errorf("%s: value %q, want %q", where, r.Value, m.Value)
		}
		var hs [][2]string
		for _, h := range r.Headers {
			hs = append(hs, [2]string{h.Key, string(h.Value)})
		}
		if !slices.Equal(hs, m.Headers) {
			t.Errorf("%s: headers %q, want %q", where, hs, m.Headers)
		}
	}
	for p, recs := range got {
		if len(recs) != next[p] {
			t.Errorf("partition %d: %d records, kafkajs wrote %d", p, len(recs), next[p])
		}
	}
}
