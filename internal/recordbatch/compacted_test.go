package recordbatch

import (
	"errors"
	"testing"
)

// A batch rebuilt with Options.Keep (as the log cleaner does) keeps its offset range
// and max timestamp with records removed; only a Compacted decoder accepts it.
func TestKeepBuildsBatchesWithOffsetGaps(t *testing.T) {
	for _, codec := range []int{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		opts := Options{BaseOffset: 100, BaseTimestamp: 5000, Codec: codec, ProducerID: 7, BaseSequence: 3,
			DeleteHorizon: true, Keep: &Kept{LastOffsetDelta: 9, MaxTimestamp: 5009}}
		batch := Build(opts,
			Record{OffsetDelta: 2, TimestampDelta: -10, Key: []byte("a"), Value: []byte("x")},
			Record{OffsetDelta: 7, TimestampDelta: 3, Key: []byte("b")})
		h, err := ParseHeader(batch)
		if err != nil {
			t.Fatal(err)
		}
		if h.LastOffset() != 109 || h.MaxTimestamp != 5009 || h.RecordCount != 2 || h.Attributes&AttrDeleteHorizon == 0 {
			t.Fatalf("codec %d: header %+v", codec, h)
		}
		if _, err := (&Decoder{}).Records(batch, func(*Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("codec %d: a strict decoder accepted offset gaps: %v", codec, err)
		}
		var got []int64
		d := Decoder{Compacted: true}
		if _, err := d.Records(batch, func(r *Record) error {
			got = append(got, r.Offset, r.Timestamp)
			return nil
		}); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if want := []int64{102, 4990, 107, 5003}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
			t.Fatalf("codec %d: records %v, want %v", codec, got, want)
		}
	}
	// Deltas out of order or past LastOffsetDelta are corrupt even for a compacted batch.
	bad := Build(Options{Keep: &Kept{LastOffsetDelta: 3}}, Record{OffsetDelta: 5, Key: []byte("a")})
	if _, err := (&Decoder{Compacted: true}).Records(bad, func(*Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("offset delta past the last accepted: %v", err)
	}
	empty := Build(Options{BaseOffset: 10, Keep: &Kept{LastOffsetDelta: 4, MaxTimestamp: 77}})
	if h, _ := ParseHeader(empty); h.RecordCount != 0 || h.LastOffset() != 14 || h.MaxTimestamp != 77 {
		t.Fatalf("empty kept batch: %+v", h)
	}
	if _, err := (&Decoder{Compacted: true}).Records(empty, func(*Record) error { return nil }); err != nil {
		t.Fatalf("empty kept batch: %v", err)
	}
}
