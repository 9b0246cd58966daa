package segmentlog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// cleanerBroker runs the broker's cleaner often, so tests poll its effect.
const cleanerBroker = "configs:\n  log.cleaner.backoff.ms: \"50\"\n"

// readCompacted consumes partition 0 of topic from the start to its end and returns
// the records by offset.
func readCompacted(t *testing.T, b *testbroker.Broker, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := b.Admin(t)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records up to end %d: %v", len(out), end.Offset, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestE2ECompactedTopicWithKgo: a compacted topic created and written with franz-go
// over a real socket ends up with the latest value per key, offsets unchanged, and
// its tombstones until delete.retention.ms after their first clean.
func TestE2ECompactedTopicWithKgo(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(cleanerBroker))
	ctx := context.Background()
	adm := b.Admin(t)
	const topic = "changelog"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.bytes":             kadm.StringPtr("1024"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"delete.retention.ms":       kadm.StringPtr("2000"),
	}, topic); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	produce := func(key string, value []byte) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{} // key -> offset of its latest record
	off := int64(0)
	for v := 0; v < 20; v++ {
		for k := 0; k < 10; k++ {
			produce(fmt.Sprintf("k%d", k), []byte(fmt.Sprintf("v%d", v)))
			want[fmt.Sprintf("k%d", k)] = off
			off++
		}
	}
	for _, k := range []string{"k3", "k8"} {
		produce(k, nil) // tombstones
		want[k] = off
		off++
	}
	// Push everything above into sealed segments.
	for i := 0; i < 30; i++ {
		produce("filler", []byte("x"))
		want["filler"] = off
		off++
	}

	// Poll until each key k0..k9 is there once: the cleaner caught up with them.
	deadline := time.Now().Add(30 * time.Second)
	var recs []*kgo.Record
	for {
		recs = readCompacted(t, b, topic)
		perKey := map[string]int{}
		for _, r := range recs {
			perKey[string(r.Key)]++
		}
		once := true
		for k := 0; k < 10; k++ {
			once = once && perKey[fmt.Sprintf("k%d", k)] == 1
		}
		if once {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not compacted after 30s: %d records, per key %v", len(recs), perKey)
		}
		time.Sleep(100 * time.Millisecond) // the broker's cleaner runs every 50 ms
	}
	for _, r := range recs {
		k := string(r.Key)
		if k != "filler" && want[k] != r.Offset {
			t.Fatalf("%s@%d kept, latest is @%d", k, r.Offset, want[k])
		}
		if k == "k0" && string(r.Value) != "v19" {
			t.Fatalf("k0 = %q, want v19", r.Value)
		}
		if (k == "k3" || k == "k8") && r.Value != nil {
			t.Fatalf("%s = %q, want its tombstone", k, r.Value)
		}
	}
	// The earliest offset is still 0 (compaction never moves the log start).
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup(topic, 0); s.Offset != 0 {
		t.Fatalf("log start offset %d after compaction, want 0", s.Offset)
	}

	// After delete.retention.ms, with more dirty data, the tombstones go.
	deadline = time.Now().Add(30 * time.Second)
	for {
		for i := 0; i < 30; i++ {
			produce("filler", []byte("y"))
		}
		recs = readCompacted(t, b, topic)
		gone := true
		for _, r := range recs {
			if k := string(r.Key); k == "k3" || k == "k8" {
				gone = false
			}
		}
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tombstones still there 30s after delete.retention.ms")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
