package replication_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// tsBatch is a batch whose records have the timestamps ts (in ms), in that order.
func tsBatch(codec int, ts ...int64) []byte {
	recs := make([]recordbatch.Record, len(ts))
	for i, t := range ts {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), TimestampDelta: t - ts[0], Value: []byte("v")}
	}
	return recordbatch.Build(recordbatch.Options{Codec: codec, ProducerID: -1, BaseSequence: -1, ProducerEpoch: -1, BaseTimestamp: ts[0]}, recs...)
}

// listOffset sends one ListOffsets for topic/partition at timestamp spec ts and returns
// the answer's offset and timestamp.
func listOffset(t *testing.T, cl *kgo.Client, topic string, partition int32, ts int64, isolation int8) (int64, int64) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets %s-%d at %d: %v", topic, partition, ts, kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset, p.Timestamp
}

// TestE2EListOffsetsEdgeCases walks Kafka's ListOffsets answers for every timestamp
// spec over batches whose records are out of time order, compressed or not, an empty
// partition, and a log whose start moved: -3 answers the first record holding the
// largest timestamp (Kafka 3.8+, KAFKA-16310), not its batch's base offset.
func TestE2EListOffsetsEdgeCases(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "edge", 2, nil)
	cl := b.Client(t)
	ctx := testCtx(t)
	// Offsets 0-2, 3-6 (zstd) and 7; the largest timestamp, 7000, is at 4 and 5.
	for _, batch := range [][]byte{
		tsBatch(recordbatch.CodecNone, 1000, 5000, 3000),
		tsBatch(recordbatch.CodecZstd, 2000, 7000, 7000, 4000),
		tsBatch(recordbatch.CodecNone, 6000),
	} {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "edge", topicID(t, b, "edge") // v13 names topics by id
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("produce: %v %+v", err, resp)
		}
	}
	type want struct{ off, ts int64 }
	check := func(what string, partition int32, spec int64, w want) {
		t.Helper()
		for _, iso := range []int8{0, 1} {
			if off, ts := listOffset(t, cl, "edge", partition, spec, iso); off != w.off || ts != w.ts {
				t.Errorf("%s (isolation %d): offset %d timestamp %d, want %d %d", what, iso, off, ts, w.off, w.ts)
			}
		}
	}
	check("latest (-1)", 0, -1, want{8, -1})
	check("earliest (-2)", 0, -2, want{0, -1})
	check("max timestamp (-3): the first record holding it", 0, -3, want{4, 7000})
	check("earliest local (-4)", 0, -4, want{0, -1})
	check("latest tiered (-5): no tiers", 0, -5, want{-1, -1})
	check("earliest pending upload (-6): no tiers", 0, -6, want{-1, -1})
	check("before the first record", 0, 0, want{0, 1000})
	check("inside a batch", 0, 4500, want{1, 5000})
	check("inside a compressed batch", 0, 6500, want{4, 7000})
	check("after every record", 0, 7001, want{-1, -1})
	check("an unknown special value", 0, -7, want{-1, -1})

	check("empty: latest", 1, -1, want{0, -1})
	check("empty: earliest", 1, -2, want{0, -1})
	check("empty: max timestamp", 1, -3, want{-1, -1})
	check("empty: a timestamp", 1, 0, want{-1, -1})

	// Records below the log start are never answered.
	adm := kadm.NewClient(cl)
	if res, err := adm.DeleteRecords(ctx, kadm.Offsets{"edge": {0: {Topic: "edge", Partition: 0, At: 2}}}); err != nil {
		t.Fatal(err)
	} else if r, _ := res.Lookup("edge", 0); r.Err != nil {
		t.Fatal(r.Err)
	}
	check("earliest after DeleteRecords", 0, -2, want{2, -1})
	check("before the first record after DeleteRecords", 0, 0, want{2, 3000})
	check("max timestamp after DeleteRecords", 0, -3, want{4, 7000})
}
