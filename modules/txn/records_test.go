package txn

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func TestPartitionForMatchesKafka(t *testing.T) {
	for _, tc := range []struct {
		id   string
		n    int32
		want int32
	}{
		{"hello", 50, 22},             // "hello".hashCode() = 99162322
		{"polygenelubricants", 50, 0}, // hashCode() = Integer.MIN_VALUE: abs maps it to 0
		{"", 50, 0},
		{"a", 50, 97 % 50},
	} {
		if got := partitionFor(tc.id, tc.n); got != tc.want {
			t.Errorf("partitionFor(%q, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, d := range []txnData{
		{ProducerID: 7, LastProducerID: -1, Epoch: 3, LastEpoch: -1, TimeoutMs: 60000, State: stEmpty, StartMs: -1, UpdateMs: 99},
		{ProducerID: 7, LastProducerID: -1, Epoch: 3, LastEpoch: -1, TimeoutMs: 60000, State: stOngoing,
			Partitions: []kernel.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}, StartMs: 5, UpdateMs: 99},
		{ProducerID: 1 << 40, LastProducerID: -1, Epoch: 32767, LastEpoch: -1, TimeoutMs: 1, State: stPrepareCommit,
			Partitions: []kernel.TopicPartition{{Topic: "__consumer_offsets", Partition: 49}}, StartMs: 5, UpdateMs: 6},
		// Transaction version 2 (value version 1): the client's version, the previous
		// producer id, and a rotation's next producer id in Prepare*.
		{ProducerID: 7, LastProducerID: 4, Epoch: 12, LastEpoch: -1, TimeoutMs: 60000, State: stCompleteCommit, StartMs: 5, UpdateMs: 99, ClientTV: 2},
		{ProducerID: 7, LastProducerID: -1, Epoch: 32767, LastEpoch: -1, TimeoutMs: 60000, State: stPrepareAbort,
			Partitions: []kernel.TopicPartition{{Topic: "a", Partition: 0}}, StartMs: 5, UpdateMs: 99, ClientTV: 2, Next: &pidEpoch{id: 8}},
	} {
		got, err := decodeValue(encodeValue(&d))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, d)
		}
	}
	id, err := decodeKey(encodeKey("tx-1"))
	if err != nil || id != "tx-1" {
		t.Fatalf("key: %q %v", id, err)
	}
	// Kafka's layout: the key is version 0 + the id; Empty writes null partitions.
	if k := encodeKey("x"); !reflect.DeepEqual(k, []byte{0, 0, 0, 1, 'x'}) {
		t.Fatalf("key bytes %v", k)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(encodeValue(&txnData{ProducerID: 1, TimeoutMs: 1, State: stEmpty})); err != nil || v.Topics != nil || v.Version != 0 {
		t.Fatalf("empty value: %+v %v", v, err)
	}
	// A v1 value (Kafka 4 with transaction.version 1+) is read too.
	v1 := kmsg.NewTxnMetadataValue()
	v1.Version, v1.ProducerID, v1.TimeoutMillis, v1.State, v1.PreviousProducerID = 1, 9, 100, 4, 3
	got, err := decodeValue(v1.AppendTo(nil))
	if err != nil || got.State != stCompleteCommit || got.LastProducerID != 3 {
		t.Fatalf("v1: %+v %v", got, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	if _, err := decodeKey([]byte{0, 1, 0}); !errors.Is(err, errNotTxnRecord) {
		t.Fatalf("other key version: %v", err)
	}
	for _, b := range [][]byte{nil, {0}, {0, 0, 0, 5, 'a'}} {
		if _, err := decodeKey(b); !errors.Is(err, errBadRecord) {
			t.Fatalf("key %v: %v", b, err)
		}
	}
	for _, b := range [][]byte{nil, {0}, {0, 9}, {0, 0, 1}, encodeValue(&txnData{ProducerID: -5, TimeoutMs: 1})} {
		if _, err := decodeValue(b); !errors.Is(err, errBadRecord) {
			t.Fatalf("value %v: %v", b, err)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	f.Add(encodeValue(&txnData{ProducerID: 1, TimeoutMs: 1, State: stOngoing, Partitions: []kernel.TopicPartition{{Topic: "t"}}}))
	f.Add(append(encodeKey("a"), encodeValue(&txnData{ProducerID: 1, TimeoutMs: 1})...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := decodeValue(b); err == nil {
			if _, err := decodeValue(encodeValue(&d)); err != nil {
				t.Fatalf("re-encoded value does not decode: %v", err)
			}
		}
		_, _ = decodeKey(b)
	})
}
