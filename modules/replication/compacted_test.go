package replication

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// keyBatch builds one batch whose records have the given keys (nil: no key).
func keyBatch(codec int, keys ...[]byte) []byte {
	recs := make([]recordbatch.Record, len(keys))
	for i, k := range keys {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Key: k, Value: []byte("v")}
	}
	return recordbatch.Build(recordbatch.Options{Codec: codec, ProducerID: -1, BaseSequence: -1, ProducerEpoch: -1, BaseTimestamp: 1_700_000_000_000}, recs...)
}

// TestProduceCompactedNeedsKeys: a topic whose cleanup.policy includes compact refuses
// records without a key with INVALID_RECORD, listing them as record errors (v8+), for
// compressed batches too; an empty key is a key; a change of cleanup.policy applies to
// the next produce.
func TestProduceCompactedNeedsKeys(t *testing.T) {
	h := newHarness(t, nil,
		topicSpec{name: "c", id: 1, configs: map[string]string{"cleanup.policy": "compact"}},
		topicSpec{name: "cd", id: 2, configs: map[string]string{"cleanup.policy": "delete,compact"}},
		topicSpec{name: "d", id: 3},
	)
	k := []byte("k")
	for _, codec := range []int{recordbatch.CodecNone, recordbatch.CodecGzip, recordbatch.CodecSnappy, recordbatch.CodecLZ4, recordbatch.CodecZstd} {
		for _, topic := range []string{"c", "cd"} {
			res := h.produce(10, 1, topic, 0, keyBatch(codec, nil, k, nil))
			if res.ErrorCode != kerr.InvalidRecord.Code {
				t.Fatalf("codec %d %s: keyless records: %v", codec, topic, kerr.ErrorForCode(res.ErrorCode))
			}
			want := "Compacted topic cannot accept message without key in topic partition " + topic + "-0."
			if res.ErrorMessage == nil || *res.ErrorMessage != want {
				t.Fatalf("codec %d %s: message %v, want %q", codec, topic, res.ErrorMessage, want)
			}
			if len(res.ErrorRecords) != 2 || res.ErrorRecords[0].RelativeOffset != 0 || res.ErrorRecords[1].RelativeOffset != 2 ||
				res.ErrorRecords[1].ErrorMessage == nil || *res.ErrorRecords[1].ErrorMessage != want {
				t.Fatalf("codec %d %s: record errors %+v", codec, topic, res.ErrorRecords)
			}
			if res := h.produce(10, 1, topic, 0, keyBatch(codec, k, []byte{}, k)); res.ErrorCode != 0 {
				t.Fatalf("codec %d %s: keyed records: %v", codec, topic, kerr.ErrorForCode(res.ErrorCode))
			}
		}
		if res := h.produce(10, 1, "d", 0, keyBatch(codec, nil, nil)); res.ErrorCode != 0 {
			t.Fatalf("codec %d: keyless records on a delete topic: %v", codec, kerr.ErrorForCode(res.ErrorCode))
		}
	}
	// Before v8 there are no record errors or messages; the code is the same.
	res := h.produce(7, 1, "c", 0, keyBatch(recordbatch.CodecNone, nil))
	if res.ErrorCode != kerr.InvalidRecord.Code || len(res.ErrorRecords) != 0 || res.ErrorMessage != nil {
		t.Fatalf("v7: %v %+v %v", kerr.ErrorForCode(res.ErrorCode), res.ErrorRecords, res.ErrorMessage)
	}
	// A second batch without keys is refused with the whole partition's records.
	leo := h.m.partition(kernel.TopicPartition{Topic: "c"}).log.LogEndOffset()
	two := append(keyBatch(recordbatch.CodecNone, k), keyBatch(recordbatch.CodecNone, k, nil)...)
	if res := h.produce(10, 1, "c", 0, two); res.ErrorCode != kerr.InvalidRecord.Code || len(res.ErrorRecords) != 1 || res.ErrorRecords[0].RelativeOffset != 1 {
		t.Fatalf("second batch keyless: %v %+v", kerr.ErrorForCode(res.ErrorCode), res.ErrorRecords)
	}
	if got := h.m.partition(kernel.TopicPartition{Topic: "c"}).log.LogEndOffset(); got != leo {
		t.Fatalf("refused produce appended: log end %d, was %d", got, leo)
	}

	// cleanup.policy changed at runtime: the next produce follows it.
	h.meta.publish(image(2,
		topicSpec{name: "c", id: 1, configs: map[string]string{"cleanup.policy": "delete"}},
		topicSpec{name: "cd", id: 2, configs: map[string]string{"cleanup.policy": "delete,compact"}},
		topicSpec{name: "d", id: 3, configs: map[string]string{"cleanup.policy": "compact"}},
	))
	waitFor(t, func() bool { return h.m.partition(kernel.TopicPartition{Topic: "d"}).Config().Compact() })
	if res := h.produce(10, 1, "d", 0, keyBatch(recordbatch.CodecNone, nil)); res.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("d after compact: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	if res := h.produce(10, 1, "c", 0, keyBatch(recordbatch.CodecNone, nil)); res.ErrorCode != 0 {
		t.Fatalf("c after delete: %v", kerr.ErrorForCode(res.ErrorCode))
	}
}
