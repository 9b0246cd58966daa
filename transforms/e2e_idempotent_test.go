package transforms_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// idemBatch is one idempotent produce batch of values starting at sequence seq; a value
// ending in "!" carries the "drop" header that filter-by-header drops.
func idemBatch(pid int64, seq int32, values ...string) []byte {
	recs := make([]recordbatch.Record, len(values))
	for i, v := range values {
		recs[i] = recordbatch.Record{Value: []byte(v), TimestampDelta: int64(i)}
		if v[len(v)-1] == '!' {
			recs[i].Headers = []recordbatch.RecordHeader{{Key: []byte("drop"), Value: []byte("y")}}
		}
	}
	return recordbatch.Build(recordbatch.Options{
		BaseTimestamp: time.Now().UnixMilli(),
		ProducerID:    pid, ProducerEpoch: 0, BaseSequence: seq,
	}, recs...)
}

// produceRaw sends one acks=all Produce of batch to topic/0 and returns the partition's
// error and base offset.
func produceRaw(t *testing.T, b *testbroker.Broker, cl *kgo.Client, topic string, batch []byte) (int64, error) {
	t.Helper()
	md, err := b.Admin(t).ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, md[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}

// TestInlineFilterIdempotentRetries: retries of an idempotent producer's batches
// through a filtering transform are deduplicated on the producer's INPUT sequence
// range, although the stored batch holds fewer records (or none): a retry is answered
// with the original offsets and appends nothing, the next batch is in sequence, a gap
// is still refused, and after a restart a retry is still recognised.
func TestInlineFilterIdempotentRetries(t *testing.T) {
	b, cl := startHeaderFilter(t, "filter", "idem")
	const pid = 4242

	type step struct {
		name   string
		batch  []byte
		resend int
	}
	a := idemBatch(pid, 0, "a0", "a1!", "a2", "a3!", "a4") // seq 0-4, keeps 3
	bb := idemBatch(pid, 5, "b0!", "b1!", "b2!")           // seq 5-7, keeps none
	c := idemBatch(pid, 8, "c0", "c1")                     // seq 8-9, keeps 2
	var offsets []int64
	for _, s := range []step{{"a", a, 2}, {"b (all dropped)", bb, 2}, {"c", c, 2}} {
		var first int64 = -2
		for i := range 1 + s.resend {
			off, err := produceRaw(t, b, cl, "idem", slices.Clone(s.batch))
			if err != nil {
				t.Fatalf("batch %s, send %d: %v", s.name, i, err)
			}
			if i == 0 {
				first = off
			} else if off != first {
				t.Fatalf("batch %s: retry %d answered base offset %d, first send %d", s.name, i, off, first)
			}
		}
		offsets = append(offsets, first)
	}
	if offsets[0] != 0 || offsets[2] != 3 {
		t.Fatalf("base offsets %v: want a at 0 (3 records kept) and c at 3", offsets)
	}
	if _, err := produceRaw(t, b, cl, "idem", idemBatch(pid, 20, "gap")); err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("a sequence gap: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}

	want := []string{"a0", "a2", "a4", "c0", "c1"}
	check := func(b *testbroker.Broker) {
		t.Helper()
		got := consume(t, b, "idem", len(want))
		var vals []string
		for _, r := range got {
			vals = append(vals, string(r.Value))
		}
		if !slices.Equal(vals, want) {
			t.Fatalf("stored %q, want %q (each kept record once)", vals, want)
		}
	}
	check(b)

	// A clean restart keeps the producer state (snapshot at close): c's retry is
	// still a duplicate and the next batch is in sequence.
	b.Restart(t)
	cl = b.Client(t)
	if off, err := produceRaw(t, b, cl, "idem", slices.Clone(c)); err != nil || off != 3 {
		t.Fatalf("retry of c after a restart: %v at %d, want the original offset 3", err, off)
	}
	if off, err := produceRaw(t, b, cl, "idem", idemBatch(pid, 10, "d0")); err != nil || off != 5 {
		t.Fatalf("d after a restart: %v at %d, want offset 5", err, off)
	}
	want = append(want, "d0")
	check(b)
}
