package recordbatch

import (
	"bytes"
	"fmt"
	"testing"
)

// decodeAll returns the records of batch as comparable strings.
func decodeAll(t *testing.T, batch []byte) []string {
	t.Helper()
	var out []string
	var d Decoder
	if _, err := d.Records(batch, func(r *Record) error {
		out = append(out, fmt.Sprintf("%d/%d/%q/%q/%v", r.OffsetDelta, r.TimestampDelta, r.Key, r.Value, r.Headers))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecompress(t *testing.T) {
	recs := []Record{
		{Key: []byte("k1"), Value: bytes.Repeat([]byte("value "), 50), Headers: []RecordHeader{{Key: []byte("h"), Value: []byte("v")}}},
		{OffsetDelta: 1, TimestampDelta: 7, Key: nil, Value: []byte("second")},
		{OffsetDelta: 2, TimestampDelta: 3, Key: []byte("k3"), Value: nil},
	}
	codecs := []int{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}
	var rc Recompressor
	for _, from := range codecs {
		opts := Options{Codec: from, BaseOffset: 0, PartitionLeaderEpoch: 4, ProducerID: 77, ProducerEpoch: 2,
			BaseSequence: 10, Transactional: true, BaseTimestamp: 1000}
		in := Build(opts, recs...)
		appendTime := Build(Options{Codec: from, ProducerID: -1, BaseSequence: -1, ProducerEpoch: -1, BaseTimestamp: 5}, recs...)
		if err := SetLogAppendTime(appendTime, 99999); err != nil {
			t.Fatal(err)
		}
		two := append(append([]byte(nil), in...), appendTime...)
		for _, to := range codecs {
			for _, level := range []int{0, 1, 9} {
				out, err := rc.Recompress(two, to, level, 0)
				if err != nil {
					t.Fatalf("%d -> %d level %d: %v", from, to, level, err)
				}
				if from == to && &out[0] != &two[0] {
					t.Fatalf("codec %d: a batch already in it was rebuilt", from)
				}
				var hs []Header
				if err := Split(out, func(h Header, batch []byte) error {
					if _, err := Validate(batch); err != nil {
						return err
					}
					hs = append(hs, h)
					return nil
				}); err != nil || len(hs) != 2 {
					t.Fatalf("%d -> %d: %d batches, %v", from, to, len(hs), err)
				}
				var inHs []Header
				_ = Split(two, func(h Header, _ []byte) error { inHs = append(inHs, h); return nil })
				for i, h := range hs {
					want := inHs[i]
					if h.Codec() != to || h.BaseOffset != want.BaseOffset || h.PartitionLeaderEpoch != want.PartitionLeaderEpoch ||
						h.ProducerID != want.ProducerID || h.ProducerEpoch != want.ProducerEpoch || h.BaseSequence != want.BaseSequence ||
						h.IsTransactional() != want.IsTransactional() || h.BaseTimestamp != want.BaseTimestamp ||
						h.MaxTimestamp != want.MaxTimestamp || h.LastOffsetDelta != want.LastOffsetDelta || h.RecordCount != want.RecordCount ||
						h.Attributes&AttrLogAppendTime != want.Attributes&AttrLogAppendTime {
						t.Fatalf("%d -> %d batch %d: header %+v, from %+v", from, to, i, h, want)
					}
				}
				var a, b []string
				_ = Split(two, func(_ Header, batch []byte) error { a = append(a, decodeAll(t, batch)...); return nil })
				_ = Split(out, func(_ Header, batch []byte) error { b = append(b, decodeAll(t, batch)...); return nil })
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("%d -> %d: records changed:\n%v\n%v", from, to, a, b)
				}
			}
		}
	}
}

// TestRecompressLevels: the level reaches the encoder (the highest zstd level makes
// a smaller batch of repetitive records than the lowest), and lz4 takes every
// Kafka level.
func TestRecompressLevels(t *testing.T) {
	var recs []Record
	for i := range 200 {
		recs = append(recs, Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprintf("record %d of a log line that repeats itself %d", i, i%7))})
	}
	in := Build(Options{ProducerID: -1, BaseSequence: -1, ProducerEpoch: -1}, recs...)
	var rc Recompressor
	size := func(codec, level int) int {
		out, err := rc.Recompress(in, codec, level, 0)
		if err != nil {
			t.Fatalf("codec %d level %d: %v", codec, level, err)
		}
		return len(out)
	}
	if lo, hi := size(CodecZstd, -5), size(CodecZstd, 19); hi >= lo {
		t.Fatalf("zstd level 19 gave %d bytes, level -5 %d", hi, lo)
	}
	if lo, hi := size(CodecGzip, 1), size(CodecGzip, 9); hi > lo {
		t.Fatalf("gzip level 9 gave %d bytes, level 1 %d", hi, lo)
	}
	for l := 1; l <= 17; l++ {
		size(CodecLZ4, l)
	}
}
