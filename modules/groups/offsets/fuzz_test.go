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
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := DecodeKey(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("unmarked error %v", err)
			}
			return
		}
		var again []byte
		if k.IsOffset() {
			again = appendOffsetKey(nil, k.Version, k.Group, k.Topic, k.Partition)
		} else {
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
