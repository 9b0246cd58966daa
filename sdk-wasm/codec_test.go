package sdk

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestVarintRoundTrip(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1} {
		b := appendVarint(nil, v)
		if len(b) != varintLen(v) {
			t.Errorf("varint %d: %d bytes, varintLen says %d", v, len(b), varintLen(v))
		}
		got, rest, err := readVarint(append(b, 0xAA))
		if err != nil || got != v || !bytes.Equal(rest, []byte{0xAA}) {
			t.Errorf("varint %d: got %d rest %x err %v", v, got, rest, err)
		}
	}
	for _, v := range []int64{0, 1, -1, math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 62, -1 << 62} {
		b := appendVarlong(nil, v)
		if len(b) != varlongLen(v) {
			t.Errorf("varlong %d: %d bytes, varlongLen says %d", v, len(b), varlongLen(v))
		}
		got, rest, err := readVarlong(b)
		if err != nil || got != v || len(rest) != 0 {
			t.Errorf("varlong %d: got %d rest %x err %v", v, got, rest, err)
		}
	}
	if n := len(appendVarint(nil, math.MinInt32)); n != 5 {
		t.Errorf("MinInt32 takes %d bytes, want 5", n)
	}
	if n := len(appendVarlong(nil, math.MinInt64)); n != 10 {
		t.Errorf("MinInt64 takes %d bytes, want 10", n)
	}
}

func TestVarintMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		long bool
	}{
		{"empty", nil, false},
		{"unterminated", []byte{0x80, 0x80}, false},
		{"six bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, false},
		{"over 32 bits", []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, false},
		{"long empty", nil, true},
		{"eleven bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, true},
		{"over 64 bits", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, true},
	} {
		var err error
		if tc.long {
			_, _, err = readVarlong(tc.in)
		} else {
			_, _, err = readVarint(tc.in)
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// The largest values that fit are accepted.
	if v, _, err := readVarint([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}); err != nil || v != math.MinInt32 {
		t.Errorf("max 5-byte varint: %d %v", v, err)
	}
	if v, _, err := readVarlong([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}); err != nil || v != math.MinInt64 {
		t.Errorf("max 10-byte varlong: %d %v", v, err)
	}
	// Non-minimal encodings are valid varints.
	if v, _, err := readVarint([]byte{0x82, 0x80, 0x00}); err != nil || v != 1 {
		t.Errorf("padded varint: %d %v", v, err)
	}
}

func TestDecodeFields(t *testing.T) {
	manyHeaders := make([]Header, 1000)
	for i := range manyHeaders {
		manyHeaders[i] = Header{Key: "h" + strings.Repeat("x", i%7), Value: []byte{byte(i)}}
	}
	big := bytes.Repeat([]byte("v"), 70000)
	tb := tBatch{
		partition:     7,
		baseOffset:    1000,
		baseTimestamp: 1_700_000_000_000,
		maxTimestamp:  1_700_000_000_500,
		attributes:    0x13,
		producerEpoch: 3,
		producerID:    42,
		baseSequence:  99,
		topic:         "events",
		records: []tRecord{
			{key: nil, value: nil}, // null key and value
			{key: []byte{}, value: []byte{}, tsDelta: 1, offDelta: 1}, // empty, not null
			{key: []byte("k"), value: []byte("v"), headers: []Header{{Key: "n", Value: nil}, {Key: "e", Value: []byte{}}, {Key: "", Value: []byte("x")}}, offDelta: 2},
			{key: []byte("many"), headers: manyHeaders, offDelta: 3},
			{value: big, tsDelta: -1_700_000_000_000, offDelta: math.MaxInt32},
			{tsDelta: math.MaxInt64 - 1_700_000_000_000, offDelta: -5, attr: -1},
		},
	}
	var d decoder
	b, err := d.decode(encodeBatch(tb))
	if err != nil {
		t.Fatal(err)
	}
	if b.Topic != "events" || b.Partition != 7 || b.BaseOffset != 1000 || b.Inline() ||
		ms(b.BaseTimestamp) != tb.baseTimestamp || ms(b.MaxTimestamp) != tb.maxTimestamp ||
		b.Attributes != 0x13 || b.ProducerEpoch != 3 || b.ProducerID != 42 || b.BaseSequence != 99 {
		t.Fatalf("batch fields: %+v", b)
	}
	if len(b.Records) != len(tb.records) {
		t.Fatalf("%d records, want %d", len(b.Records), len(tb.records))
	}
	r := b.Records
	if r[0].Key != nil || r[0].Value != nil || r[0].Headers != nil {
		t.Errorf("record 0: want null key, value, no headers: %+v", r[0])
	}
	if r[1].Key == nil || len(r[1].Key) != 0 || r[1].Value == nil || len(r[1].Value) != 0 {
		t.Errorf("record 1: want empty non-null key and value: %+v", r[1])
	}
	if len(r[2].Headers) != 3 || r[2].Headers[0].Value != nil || r[2].Headers[1].Value == nil ||
		r[2].Headers[0].Key != "n" || r[2].Headers[2].Key != "" || string(r[2].Headers[2].Value) != "x" {
		t.Errorf("record 2 headers: %+v", r[2].Headers)
	}
	if len(r[3].Headers) != 1000 {
		t.Fatalf("record 3: %d headers", len(r[3].Headers))
	}
	for i, h := range r[3].Headers {
		if h.Key != manyHeaders[i].Key || !bytes.Equal(h.Value, manyHeaders[i].Value) {
			t.Fatalf("record 3 header %d: %+v", i, h)
		}
	}
	if cap(r[2].Headers) != 3 {
		t.Errorf("headers slice cap %d: appending would overwrite the next record's headers", cap(r[2].Headers))
	}
	if !bytes.Equal(r[4].Value, big) || ms(r[4].Timestamp) != 0 || r[4].Offset != 1000+math.MaxInt32 {
		t.Errorf("record 4: ts %d offset %d", ms(r[4].Timestamp), r[4].Offset)
	}
	if ms(r[5].Timestamp) != math.MaxInt64 || r[5].Offset != 995 {
		t.Errorf("record 5: ts %d offset %d", ms(r[5].Timestamp), r[5].Offset)
	}
	for i := range 4 {
		if r[i].Offset != 1000+int64(i) || ms(r[i].Timestamp) != tb.baseTimestamp+tb.records[i].tsDelta {
			t.Errorf("record %d: offset %d ts %d", i, r[i].Offset, ms(r[i].Timestamp))
		}
	}
	if got := reencode(b); !bytes.Equal(got, encodeBatch(withAttr0(tb))) {
		t.Errorf("re-encoding differs")
	}

	// Inline mode: offsets are -1.
	tb.baseOffset = -1
	b, err = d.decode(encodeBatch(tb))
	if err != nil {
		t.Fatal(err)
	}
	if !b.Inline() {
		t.Error("inline batch not Inline")
	}
	for i, rec := range b.Records {
		if rec.Offset != -1 {
			t.Errorf("inline record %d: offset %d", i, rec.Offset)
		}
	}

	// An empty batch and an empty topic.
	b, err = d.decode(encodeBatch(tBatch{}))
	if err != nil || len(b.Records) != 0 || b.Topic != "" {
		t.Errorf("empty batch: %+v %v", b, err)
	}
}

// withAttr0 clears the record attributes, which decoding drops.
func withAttr0(tb tBatch) tBatch {
	recs := make([]tRecord, len(tb.records))
	for i, r := range tb.records {
		r.attr = 0
		recs[i] = r
	}
	tb.records = recs
	return tb
}

func TestDecodeErrors(t *testing.T) {
	good := tBatch{topic: "t", records: []tRecord{{key: []byte("k"), value: []byte("v"), headers: []Header{{Key: "h", Value: []byte("1")}}}}}
	enc := encodeBatch(good)
	rec := encodeRecord(good.records[0])
	hdr := encodeHeader(good)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// body builds a record from raw body bytes with a correct length.
	body := func(parts ...[]byte) []byte {
		b := cat(parts...)
		return cat(appendVarint(nil, int32(len(b))), b)
	}
	v := func(n int32) []byte { return appendVarint(nil, n) }

	badVersion := bytes.Clone(enc)
	badVersion[0] = 2
	longTopic := bytes.Clone(hdr)
	longTopic[52] = 200

	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short header", enc[:inputHeaderSize-1]},
		{"version", badVersion},
		{"topic past end", longTopic},
		{"negative count", encodeBatch(tBatch{recordCount: ptr[int32](-1)})},
		{"huge count", cat(encodeHeader(tBatch{topic: "t", recordCount: ptr[int32](math.MaxInt32)}), rec)},
		{"count too high", cat(encodeHeader(tBatch{topic: "t", recordCount: ptr[int32](2)}), rec, rec[:len(rec)-1])},
		{"truncated record", enc[:len(enc)-1]},
		{"trailing bytes", cat(enc, []byte{0})},
		{"count too low", cat(encodeHeader(tBatch{topic: "t", recordCount: ptr[int32](1)}), rec, rec)},
		{"negative record length", cat(hdr, v(-1), make([]byte, 10))},
		{"record length past end", cat(hdr, v(50), make([]byte, 10))},
		{"empty record", cat(hdr, v(0), make([]byte, 10))},
		{"bytes left in record", cat(hdr, body(rec[1:], []byte{0}))},
		{"key length -2", cat(hdr, body([]byte{0, 0, 0}, v(-2), v(-1), v(0)))},
		{"key past record", cat(hdr, body([]byte{0, 0, 0}, v(5), []byte("ab"), v(-1), v(0)))},
		{"value past record", cat(hdr, body([]byte{0, 0, 0}, v(-1), v(3), []byte("a"), v(0)))},
		{"negative header count", cat(hdr, body([]byte{0, 0, 0}, v(-1), v(-1), v(-1)))},
		{"header count past record", cat(hdr, body([]byte{0, 0, 0}, v(-1), v(-1), v(1000), v(0), v(0)))},
		{"null header key", cat(hdr, body([]byte{0, 0, 0}, v(-1), v(-1), v(1), v(-1), v(-1)))},
		{"bad timestamp varlong", cat(hdr, body([]byte{0}, bytes.Repeat([]byte{0xff}, 11)))},
		{"bad offset varint", cat(hdr, body([]byte{0, 0}, bytes.Repeat([]byte{0xff}, 6)))},
	} {
		var d decoder
		if b, err := d.decode(tc.in); err == nil {
			t.Errorf("%s: decoded %+v", tc.name, b)
		}
	}
}

func TestEncodeOutput(t *testing.T) {
	w := writer{baseTS: 1000, defaultTS: time.UnixMilli(1234)}
	recs := []Record{
		{},
		{Key: []byte{}, Value: []byte{}},
		{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 300), Timestamp: time.UnixMilli(999),
			Headers: []Header{{Key: "a", Value: nil}, {Key: "b", Value: []byte{}}, {Key: "c", Value: []byte("3")}}},
		{Timestamp: time.UnixMilli(math.MaxInt64)},
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	out, err := decodeOutput(w.out)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(recs) {
		t.Fatalf("%d records, want %d", len(out), len(recs))
	}
	want := []int64{234, 234, -1, math.MaxInt64 - 1000}
	for i, o := range out {
		r := recs[i]
		if o.output != 0 || o.attr != 0 || o.offDelta != 0 || o.tsDelta != want[i] ||
			(o.key == nil) != (r.Key == nil) || !bytes.Equal(o.key, r.Key) ||
			(o.value == nil) != (r.Value == nil) || !bytes.Equal(o.value, r.Value) ||
			len(o.headers) != len(r.Headers) {
			t.Errorf("record %d: %+v", i, o)
			continue
		}
		for j, h := range o.headers {
			if h.Key != r.Headers[j].Key || (h.Value == nil) != (r.Headers[j].Value == nil) || !bytes.Equal(h.Value, r.Headers[j].Value) {
				t.Errorf("record %d header %d: %+v", i, j, h)
			}
		}
	}
}

func TestInterner(t *testing.T) {
	var in interner
	a := in.get([]byte("topic"))
	if in.get([]byte("topic")) != a || in.get(nil) != "" {
		t.Fatal("interner")
	}
	long := bytes.Repeat([]byte("x"), internMaxLen+1)
	if in.get(long) != string(long) || len(in.m) != 1 {
		t.Fatal("long strings are not interned")
	}
	for i := range internMaxEntries + 10 {
		in.get([]byte{byte(i), byte(i >> 8)})
	}
	if len(in.m) != internMaxEntries {
		t.Fatalf("interner holds %d entries", len(in.m))
	}
	allocs := testing.AllocsPerRun(100, func() { in.get([]byte("topic")) })
	if allocs != 0 {
		t.Errorf("interned lookup allocates %v times", allocs)
	}
}
