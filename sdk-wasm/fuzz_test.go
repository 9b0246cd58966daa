package sdk

import (
	"bytes"
	"math"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the input decoder: it must not panic,
// and whatever it accepts must survive a re-encoding unchanged. Seeds are in
// testdata/fuzz/FuzzDecode as well as below.
func FuzzDecode(f *testing.F) {
	f.Add(encodeBatch(tBatch{}))
	f.Add(simpleBatch(-1, "a", "b"))
	f.Add(simpleBatch(10, "x"))
	f.Add(encodeBatch(tBatch{topic: "t", baseOffset: math.MaxInt64, records: []tRecord{
		{tsDelta: math.MinInt64, offDelta: math.MinInt32, headers: []Header{{Key: "k"}, {Key: "", Value: []byte{}}}},
	}}))
	var d decoder
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := d.decode(data)
		if err != nil {
			return
		}
		again := reencode(b)
		var d2 decoder
		b2, err := d2.decode(again)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if !bytes.Equal(reencode(b2), again) {
			t.Fatal("decode(encode(decode(x))) differs from decode(x)")
		}
		if len(b.Records) > len(data)/minRecordSize {
			t.Fatalf("%d records from %d bytes", len(b.Records), len(data))
		}
	})
}
