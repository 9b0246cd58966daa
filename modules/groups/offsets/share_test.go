package offsets

import (
	"errors"
	"reflect"
	"testing"
)

func TestShareStateRoundTrip(t *testing.T) {
	for _, s := range []ShareState{
		{},
		{StateEpoch: 3, LeaderEpoch: 7, StartOffset: 1 << 40},
		{StateEpoch: 1, LeaderEpoch: 0, StartOffset: 10, Batches: []ShareStateBatch{
			{FirstOffset: 10, LastOffset: 19, DeliveryState: 0, DeliveryCount: 2},
			{FirstOffset: 20, LastOffset: 20, DeliveryState: 2, DeliveryCount: 1},
			{FirstOffset: 21, LastOffset: 99, DeliveryState: 4, DeliveryCount: 5},
		}},
	} {
		got, err := DecodeShareState(EncodeShareState(s))
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip of %+v: %+v, %v", s, got, err)
		}
	}
}

func TestShareStateKey(t *testing.T) {
	id := [16]byte{1, 2, 3, 15: 16}
	b := EncodeShareStateKey("grp", id, 7)
	k, err := DecodeKey(b)
	if err != nil || k.Version != ShareStateKeyV1001 || k.Group != "grp" || k.TopicID != id || k.Partition != 7 {
		t.Fatalf("DecodeKey: %+v, %v", k, err)
	}
	if !k.IsGroupRecord() || k.IsConsumerGroup() || k.IsOffset() {
		t.Fatalf("kind of %+v", k)
	}
	rest := groupRecordKey(k)[len(groupPrefix(prefixConsumer, "grp")):]
	if kk, err := groupRecordKafkaKey("grp", rest); err != nil || string(kk) != string(b) {
		t.Fatalf("badger key round trip: %x, %v", kk, err)
	}
	for _, short := range [][]byte{b[:len(b)-1], b[:len(b)-5], append(b, 0)} {
		if _, err := DecodeKey(short); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeKey(%x): %v, want ErrCorrupt", short, err)
		}
	}
}

func TestDecodeShareStateErrors(t *testing.T) {
	good := EncodeShareState(ShareState{StartOffset: 5, Batches: []ShareStateBatch{{FirstOffset: 5, LastOffset: 6}}})
	for i := range len(good) - 1 {
		if _, err := DecodeShareState(good[:i]); err == nil {
			t.Fatalf("a value cut at %d bytes decoded", i)
		}
	}
	if _, err := DecodeShareState(append(good, 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing byte: %v", err)
	}
	v1 := append([]byte{0, 1}, good[2:]...)
	if _, err := DecodeShareState(v1); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("version 1: %v", err)
	}
	// A forged batch count larger than the bytes left is refused before allocating.
	forged := append([]byte(nil), good[:2+4+4+8]...)
	forged = append(forged, 0xff, 0xff, 0xff, 0x0f)
	if _, err := DecodeShareState(forged); !errors.Is(err, ErrCorrupt) {
		t.Errorf("forged count: %v", err)
	}
}
