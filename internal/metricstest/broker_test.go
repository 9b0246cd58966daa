package metricstest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/metricstest"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// produceAtPace produces n records to topic's partition 0, one every pace, each
// flushed before the next, and returns their timestamps (ms) by offset.
func produceAtPace(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n int, pace time.Duration) []int64 {
	t.Helper()
	ts := make([]int64, n)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d at offset %d", i, r.Offset)
		}
		ts[i] = r.Timestamp.UnixMilli()
		time.Sleep(pace) // the pace of the writes under test, not a synchronisation
	}
	return ts
}

func commit(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, offs map[int32]int64) {
	t.Helper()
	if err := commitErr(ctx, adm, group, map[string]map[int32]int64{topic: offs}); err != nil {
		t.Fatal(err)
	}
}

// commitErr commits offs (topic -> partition -> offset) for group.
func commitErr(ctx context.Context, adm *kadm.Client, group string, offs map[string]map[int32]int64) error {
	var o kadm.Offsets
	for topic, ps := range offs {
		for p, at := range ps {
			o.AddOffset(topic, p, at, -1)
		}
	}
	resp, err := adm.CommitOffsets(ctx, group, o)
	if err == nil {
		err = resp.Error()
	}
	return err
}

// Lag in offsets and in seconds for a group that committed part of a topic written
// at a known pace; its members, state and generation; and lag by topic when
// partition series are off.
func TestConsumerGroupLag(t *testing.T) {
	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "paced"); err != nil {
		t.Fatal(err)
	}
	ts := produceAtPace(t, ctx, cl, "paced", 20, 50*time.Millisecond)
	commit(t, ctx, adm, "readers", "paced", map[int32]int64{0: 10, 1: 0})

	before := time.Now().UnixMilli()
	s := metricstest.Scrape(t, b.AdminAddr)
	after := time.Now().UnixMilli()
	lag, ok := s.Value("sluice_consumer_group_lag", "group", "readers", "topic", "paced", "partition", "0")
	if !ok || lag != 10 {
		t.Fatalf("lag of partition 0: %v %v, want 10", lag, ok)
	}
	secs, _ := s.Value("sluice_consumer_group_lag_seconds", "group", "readers", "topic", "paced", "partition", "0")
	// Offset 10 was written at ts[10] (its batch's first record no earlier than
	// ts[9]), and the scrape's clock read lies between before and after.
	lo, hi := float64(before-ts[10]-10)/1000, float64(after-ts[9]+10)/1000
	if secs < lo || secs > hi {
		t.Fatalf("time lag %v s, want %v to %v s (now minus the first unconsumed record's time)", secs, lo, hi)
	}
	if lag, ok := s.Value("sluice_consumer_group_lag", "group", "readers", "topic", "paced", "partition", "1"); !ok || lag != 0 {
		t.Fatalf("lag of the empty partition 1: %v %v", lag, ok)
	}
	if secs, _ := s.Value("sluice_consumer_group_lag_seconds", "group", "readers", "topic", "paced", "partition", "1"); secs != 0 {
		t.Fatalf("time lag of a caught-up partition: %v", secs)
	}
	if v, ok := s.Value("sluice_consumer_group_state", "group", "readers", "state", "Empty"); !ok || v != 1 {
		t.Fatalf("state of an offsets-only group: %v %v", v, ok)
	}
	if v, ok := s.Value("sluice_consumer_group_members", "group", "readers"); !ok || v != 0 {
		t.Fatalf("members: %v %v", v, ok)
	}

	// Caught up: both lags are 0.
	commit(t, ctx, adm, "readers", "paced", map[int32]int64{0: 20})
	s = metricstest.Scrape(t, b.AdminAddr)
	if lag, _ := s.Value("sluice_consumer_group_lag", "group", "readers", "partition", "0"); lag != 0 {
		t.Fatalf("lag after committing the end: %v", lag)
	}
	if secs, _ := s.Value("sluice_consumer_group_lag_seconds", "group", "readers", "partition", "0"); secs != 0 {
		t.Fatalf("time lag after committing the end: %v", secs)
	}

	// A live member: a consumer in the group shows as a member of a Stable group.
	consumer := b.Client(t, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("paced"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 20 {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	testbroker.WaitFor(t, 20*time.Second, "a Stable group with one member and no lag", func() string {
		s := metricstest.Scrape(t, b.AdminAddr)
		m, _ := s.Value("sluice_consumer_group_members", "group", "live")
		st, _ := s.Value("sluice_consumer_group_state", "group", "live", "state", "Stable")
		gen, _ := s.Value("sluice_consumer_group_generation", "group", "live")
		lag, ok := s.Value("sluice_consumer_group_lag", "group", "live", "topic", "paced")
		if m != 1 || st != 1 || gen < 1 || !ok || lag != 0 {
			return fmt.Sprintf("members %v, stable %v, generation %v, lag %v %v", m, st, gen, lag, ok)
		}
		return ""
	})
}

// With sluice.metrics.partition.series=false the lag families are per topic: the
// lag summed, the time lag the largest.
func TestConsumerGroupLagPerTopic(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(`configs: {sluice.metrics.partition.series: "false"}`))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "agg"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		for i := range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "agg", Partition: p, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit(t, ctx, adm, "agg-readers", "agg", map[int32]int64{0: 1, 1: 2, 2: 5})
	s := metricstest.Scrape(t, b.AdminAddr)
	if names := s.LabelNames("sluice_consumer_group_lag"); !slices.Equal(names, []string{"group", "topic"}) {
		t.Fatalf("labels %v, want group and topic only", names)
	}
	if lag, ok := s.Value("sluice_consumer_group_lag", "group", "agg-readers", "topic", "agg"); !ok || lag != 4+3 {
		t.Fatalf("topic lag %v %v, want 7", lag, ok)
	}
	if secs, ok := s.Value("sluice_consumer_group_lag_seconds", "group", "agg-readers", "topic", "agg"); !ok || secs <= 0 || secs > 60 {
		t.Fatalf("topic time lag %v %v", secs, ok)
	}
}

// Requests show per API name in the latency histograms, as many as were counted.
func TestRequestLatencyHistograms(t *testing.T) {
	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.Client(t, kgo.DefaultProduceTopic("lat"), kgo.AllowAutoTopicCreation())
	for range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s := metricstest.Scrape(t, b.AdminAddr)
	count, _ := s.Value("sluice_requests_by_api_total", "api", "Produce")
	hist, ok := s.Value("sluice_request_duration_seconds", "api", "Produce")
	queue, _ := s.Value("sluice_request_queue_seconds", "api", "Produce")
	if !ok || count < 5 || hist != count || queue != count {
		t.Fatalf("Produce: %v counted, %v in the latency histogram, %v in the queue histogram", count, hist, queue)
	}
	if conns, ok := s.Value("sluice_connections_active", "listener", "PLAINTEXT"); !ok || conns < 1 {
		t.Fatalf("active connections %v %v with a client connected", conns, ok)
	}
	h := s["sluice_request_duration_seconds"]
	for _, m := range h.GetMetric() {
		if sum := m.GetHistogram().GetSampleSum(); sum < 0 || sum > 60 {
			t.Fatalf("latency sum %v s", sum)
		}
	}
}

// Per-topic traffic: bytes and records appended, bytes and records sent to consumers.
func TestTopicTraffic(t *testing.T) {
	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "traffic"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic("traffic"), kgo.ProducerLinger(0))
	for i := range 7 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "value-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s := metricstest.Scrape(t, b.AdminAddr)
	if v, _ := s.Value("sluice_topic_records_in_total", "topic", "traffic"); v != 7 {
		t.Fatalf("records in %v, want 7", v)
	}
	in, _ := s.Value("sluice_topic_bytes_in_total", "topic", "traffic")
	if in < 7*10 {
		t.Fatalf("bytes in %v for 7 records", in)
	}
	consumer := b.Client(t, kgo.ConsumeTopics("traffic"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 7; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	s = metricstest.Scrape(t, b.AdminAddr)
	if out, _ := s.Value("sluice_topic_bytes_out_total", "topic", "traffic"); out != in {
		t.Fatalf("bytes out %v after one consumer read everything once, bytes in %v", out, in)
	}
	if out, _ := s.Value("sluice_topic_records_out_total", "topic", "traffic"); out != 7 {
		t.Fatalf("records out %v after one consumer read 7 records once", out)
	}
}
