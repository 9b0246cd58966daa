package recordbatch

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// agree fails unless checkRecords and scan give the same result and error for the
// records section of batch (whatever the header says).
func agree(t *testing.T, h *Header, sec []byte) {
	t.Helper()
	want, werr := scan(h, sec, nil, nil, false)
	got, gerr := checkRecords(h, sec)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) || (werr == nil && got != want) {
		t.Fatalf("section % x (count %d, last delta %d): checkRecords %+v, %v; scan %+v, %v",
			sec, h.RecordCount, h.LastOffsetDelta, got, gerr, want, werr)
	}
}

// TestCheckRecordsMatchesScan: on valid sections of every shape the builder makes
// (null and empty keys, headers, 1-3 byte lengths, negative timestamp deltas), on each
// of them with every byte replaced by values that hit every varint branch, and on
// truncations and wrong counts, checkRecords accepts exactly what scan accepts, with the
// same result, and fails with scan's error.
func TestCheckRecordsMatchesScan(t *testing.T) {
	var batches [][]byte
	for _, valueSize := range []int{0, 1, 60, 100, 200, 20000} {
		for _, n := range []int{0, 1, 2, 7} {
			batches = append(batches, Build(Options{BaseTimestamp: 1000}, sampleRecords(n, valueSize)...))
		}
	}
	// Large varints: a 3-byte offset delta, a big timestamp delta.
	big := make([]Record, 20000)
	for i := range big {
		big[i] = Record{TimestampDelta: int64(i) << 40, Value: []byte{byte(i)}}
	}
	batches = append(batches, Build(Options{BaseTimestamp: -5}, big...))
	// Hand-made sections: over-long varints, -1 header keys, trailing bytes.
	raw := [][]byte{
		goodRecord(0),
		rawRecord(int8(0), 0, 0, []byte{0x81, 0x80, 0x80, 0x80, 0x00}, 0),                                      // key length in 5 bytes
		rawRecord(int8(0), 0, 0, []byte{0x81, 0x80, 0x80, 0x80, 0x10}, 0),                                      // 5th byte too big
		rawRecord(int8(0), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}, 0, "k", "v", 0), // 10th byte too big
		rawRecord(int8(0), 0, 0, "k", "v", 1, -1, "v"),                                                         // null header key
		rawRecord(int8(0), 0, 0, "k", "v", 1, "hk", -1),                                                        // null header value
		rawRecord(int8(0), 0, 0, "k", "v", -1),                                                                 // negative header count
		rawRecord(int8(0), 0, 0, -2, "v", 0),                                                                   // key length -2
		rawRecord(int8(0), 0, 0, "k", "v", 0, int8(9)),                                                         // a byte left inside
		append(goodRecord(0), 0x00),                                                                            // a byte after
	}
	for _, r := range raw {
		batches = append(batches, withSection(batches[0], r, 1, 0))
	}
	for _, b := range batches {
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		sec := b[HeaderSize:]
		agree(t, &h, sec)
		for _, count := range []int32{-1, 0, h.RecordCount - 1, h.RecordCount + 1} {
			h2 := h
			h2.RecordCount = count
			agree(t, &h2, sec)
		}
		h2 := h
		h2.LastOffsetDelta++
		agree(t, &h2, sec)
		if len(sec) > 4096 {
			sec = sec[:4096] // bytes past here are more of the same
		}
		for cut := range len(sec) {
			agree(t, &h, sec[:cut])
		}
		mut := clone(sec)
		for i := range mut {
			old := mut[i]
			for _, v := range []byte{0x00, 0x01, 0x02, 0x0f, 0x10, 0x7f, 0x80, 0x81, 0xfe, 0xff} {
				mut[i] = v
				agree(t, &h, mut)
			}
			mut[i] = old
		}
	}
	// Two-byte varints at every value, as a record length prefix.
	for v := range 1 << 14 {
		sec := binary.AppendUvarint(nil, uint64(v))
		sec = append(sec, make([]byte, 8)...)
		h := Header{RecordCount: 1}
		agree(t, &h, sec)
	}
}

// BenchmarkCheckRecords: the records section of 1 MB of 100-byte records.
func BenchmarkCheckRecords(b *testing.B) {
	recs := make([]Record, 9000)
	val := make([]byte, 100)
	for i := range recs {
		recs[i] = Record{TimestampDelta: int64(i / 1000), Value: val}
	}
	batch := Build(Options{BaseTimestamp: 1}, recs...)
	h, _ := ParseHeader(batch)
	sec := batch[HeaderSize:]
	b.SetBytes(int64(len(sec)))
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if _, err := scan(&h, sec, nil, nil, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("checkRecords", func(b *testing.B) {
		for b.Loop() {
			if _, err := checkRecords(&h, sec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
