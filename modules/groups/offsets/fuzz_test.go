package offsets

import (
	"errors"
	"reflect"
	"testing"
)

// The committed seed corpus is under testdata/fuzz/<Target>/; f.Add repeats
// the essential seeds so `go test` runs them even without that directory.

func FuzzDecodeKey(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0})
	f.Add(EncodeOffsetKey("g", "t", 1))
	f.Add(EncodeGroupKey("g"))
	f.Add(EncodeConsumerGroupKey(ConsumerGroupMetadataKeyV3, "g", ""))
	f.Add(EncodeConsumerGroupKey(ConsumerCurrentAssignmentKeyV8, "g", "m"))
	f.Add(EncodeShareGroupKey(ShareGroupMetadataKeyV11, "g", ""))
	f.Add(EncodeShareGroupKey(ShareGroupCurrentAssignmentKeyV14, "g", "m"))
	f.Add(EncodeShareStateKey("g", topicA, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := DecodeKey(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("unmarked error %v", err)
			}
			return
		}
		var again []byte
		switch {
		case k.IsOffset():
			again = appendOffsetKey(nil, k.Version, k.Group, k.Topic, k.Partition)
		case k.IsGroupRecord():
			// Each type re-encodes with its own encoder only.
			switch {
			case k.IsConsumerGroup():
				again = EncodeConsumerGroupKey(k.Version, k.Group, k.Member)
			case k.IsShareGroup():
				again = EncodeShareGroupKey(k.Version, k.Group, k.Member)
			case k.Version == ShareStateKeyV1001:
				again = EncodeShareStateKey(k.Group, k.TopicID, k.Partition)
			default:
				t.Fatalf("group record of no known kind: %+v", k)
			}
			if kk := encodeGroupRecordKey(k); string(kk) != string(again) {
				t.Fatalf("encodeGroupRecordKey %x, want %x", kk, again)
			}
			// The badger key gives the Kafka key back.
			ck := groupRecordKey(k)
			rest := ck[len(groupPrefix(prefixConsumer, k.Group)):]
			if kk, err := groupRecordKafkaKey(k.Group, rest); err != nil || string(kk) != string(b) {
				t.Fatalf("badger key %x gave %x, %v; input %x", ck, kk, err, b)
			}
		default:
			if k.Version != GroupKeyV2 {
				t.Fatalf("decoded key version %d", k.Version)
			}
			again = EncodeGroupKey(k.Group)
		}
		if string(again) != string(b) {
			t.Fatalf("re-encoded %x, input %x", again, b)
		}
	})
}

// FuzzDecodeValue feeds the same bytes to both value decoders (the key, not
// the value, says which applies, so each must survive the other's bytes).
func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 3, 0})
	f.Add(EncodeOffsetValue(Committed{Offset: 1, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: 3}))
	f.Add(EncodeGroupMetadataValue(sampleGroup()))
	f.Add(kmsgOffsetValueV4())
	f.Add(kmsgGroupValueV4())
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := DecodeOffsetValue(b); err == nil {
			v := int16(b[0])<<8 | int16(b[1])
			if v == OffsetValueV4 { // read only: v3 carries the same fields
				if c2, err := DecodeOffsetValue(appendOffsetValue(nil, OffsetValueV3, c)); err != nil || c2 != c {
					t.Fatalf("v4 offset value via v3: %v %+v %+v", err, c, c2)
				}
			} else if again := appendOffsetValue(nil, v, c); string(again) != string(b) {
				t.Fatalf("offset value re-encoded %x, input %x", again, b)
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("unmarked error %v", err)
		}
		if g, err := DecodeGroupMetadataValue(b); err == nil {
			// Null and "" are one value, so compare decoded forms, not bytes.
			v := min(int16(b[0])<<8|int16(b[1]), GroupValueV3) // v4 is read only
			g2, err := DecodeGroupMetadataValue(appendGroupValue(nil, v, g))
			if err != nil || !reflect.DeepEqual(g, g2) {
				t.Fatalf("group value round trip: %v\n%+v\n%+v", err, g, g2)
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("unmarked error %v", err)
		}
	})
}

// FuzzDecodeConsumerValue feeds the same bytes to every group record value decoder
// (consumer group, share group, share state; consumerCodecs): none may panic or return an unmarked error, and what one decodes must
// re-encode to bytes that decode to the same value (not the same bytes: unknown
// tags, a zero MetadataHash and non-minimal varints are not written back).
func FuzzDecodeConsumerValue(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0})
	for _, s := range consumerSamples() {
		f.Add(s.hand)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range consumerCodecs {
			v, err := c.decode(b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("%s: unmarked error %v", c.name, err)
				}
				if checkGroupRecordValue(c.version, b) == nil {
					t.Fatalf("%s: checkGroupRecordValue accepts what the decoder refuses", c.name)
				}
				continue
			}
			if err := checkGroupRecordValue(c.version, b); err != nil {
				t.Fatalf("%s: checkGroupRecordValue: %v", c.name, err)
			}
			again := c.encode(v)
			v2, err := c.decode(again)
			if err != nil || !reflect.DeepEqual(v, v2) {
				t.Fatalf("%s round trip: %v\n%+v\n%+v", c.name, err, v, v2)
			}
			if len(again) > len(b) {
				t.Fatalf("%s: re-encoded %d bytes from %d", c.name, len(again), len(b))
			}
		}
	})
}
