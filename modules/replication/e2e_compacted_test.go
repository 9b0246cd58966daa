package replication_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestE2ECompactedTopicNeedsKeys: over a real socket with kgo, a topic created with
// cleanup.policy=compact refuses a record without a key with INVALID_RECORD (plain and
// compressed) and takes keyed ones; a topic switched to compact with
// IncrementalAlterConfigs starts refusing.
func TestE2ECompactedTopicNeedsKeys(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "compacted", 1, map[string]*string{"cleanup.policy": str("compact")})
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		t.Run(c.name, func(t *testing.T) {
			cl := b.Client(t, kgo.DefaultProduceTopic("compacted"), kgo.RecordRetries(0), kgo.ProducerBatchCompression(c.codec))
			err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("no key")}).FirstErr()
			if !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("keyless produce: %v, want INVALID_RECORD", err)
			}
			keyed := b.Client(t, kgo.DefaultProduceTopic("compacted"), kgo.ProducerBatchCompression(c.codec))
			produceSync(t, keyed, &kgo.Record{Key: []byte("k-" + c.name), Value: []byte("v")})
		})
	}
	// On the wire: the partition's message and the record errors (KIP-467).
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "compacted"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseSequence: -1, ProducerEpoch: -1, BaseTimestamp: time.Now().UnixMilli()},
		recordbatch.Record{Key: []byte("k"), Value: []byte("a")}, recordbatch.Record{OffsetDelta: 1, Value: []byte("b")})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	part := rawRequest(t, b.Addr, req, 12).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	const msg = "Compacted topic cannot accept message without key in topic partition compacted-0."
	if part.ErrorCode != kerr.InvalidRecord.Code || part.ErrorMessage == nil || *part.ErrorMessage != msg ||
		len(part.ErrorRecords) != 1 || part.ErrorRecords[0].RelativeOffset != 1 {
		t.Fatalf("raw keyless produce: %v %v %+v", kerr.ErrorForCode(part.ErrorCode), part.ErrorMessage, part.ErrorRecords)
	}

	got := consumeN(t, b, "compacted", 3)
	for _, r := range got {
		if r.Key == nil {
			t.Fatalf("keyless record stored: %+v", r)
		}
	}

	// A delete topic takes keyless records until cleanup.policy becomes compact.
	createTopic(t, b, "switched", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("switched"), kgo.RecordRetries(0))
	produceSync(t, cl, &kgo.Record{Value: []byte("before")})
	res, err := b.Admin(t).AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: str("compact")},
	}, "switched")
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter configs: %v %+v", err, res)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := b.Client(t, kgo.DefaultProduceTopic("switched"), kgo.RecordRetries(0))
		err := c.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("after")}).FirstErr()
		c.Close()
		if errors.Is(err, kerr.InvalidRecord) {
			break
		}
		if err != nil {
			t.Fatalf("keyless produce after the switch: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("keyless records still accepted after cleanup.policy=compact")
		}
		time.Sleep(20 * time.Millisecond)
	}
	produceSync(t, cl, &kgo.Record{Key: []byte("k"), Value: []byte("keyed")})
}
