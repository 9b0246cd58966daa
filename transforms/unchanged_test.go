package transforms

import (
	"testing"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/transforms/wasm"
)

func TestUnchanged(t *testing.T) {
	batch := recordbatch.Build(recordbatch.Options{Codec: recordbatch.CodecLZ4, BaseTimestamp: 1000, ProducerID: -1, BaseSequence: -1},
		recordbatch.Record{Key: []byte("k"), Value: []byte("v1"), TimestampDelta: 0,
			Headers: []recordbatch.RecordHeader{{Key: []byte("h"), Value: []byte("x")}}},
		recordbatch.Record{Key: nil, Value: []byte{}, TimestampDelta: 5},
	)
	var dec recordbatch.Decoder
	h, sec, err := dec.Section(batch)
	if err != nil {
		t.Fatal(err)
	}
	same := func() []wasm.Output {
		return []wasm.Output{
			{Key: []byte("k"), Value: []byte("v1"), Headers: []wasm.Header{{Key: "h", Value: []byte("x")}}},
			{Key: nil, Value: []byte{}, TimestampDelta: 5},
		}
	}
	if !unchanged(&h, sec, same()) {
		t.Fatal("identical outputs not recognised")
	}
	for name, mod := range map[string]func([]wasm.Output) []wasm.Output{
		"fewer":           func(o []wasm.Output) []wasm.Output { return o[:1] },
		"more":            func(o []wasm.Output) []wasm.Output { return append(o, o[1]) },
		"null vs empty":   func(o []wasm.Output) []wasm.Output { o[1].Value = nil; return o },
		"empty vs null":   func(o []wasm.Output) []wasm.Output { o[1].Key = []byte{}; return o },
		"value":           func(o []wasm.Output) []wasm.Output { o[0].Value = []byte("v2"); return o },
		"timestamp":       func(o []wasm.Output) []wasm.Output { o[1].TimestampDelta = 6; return o },
		"header value":    func(o []wasm.Output) []wasm.Output { o[0].Headers[0].Value = nil; return o },
		"header key":      func(o []wasm.Output) []wasm.Output { o[0].Headers[0].Key = "g"; return o },
		"header added":    func(o []wasm.Output) []wasm.Output { o[1].Headers = []wasm.Header{{Key: "a"}}; return o },
		"other output":    func(o []wasm.Output) []wasm.Output { o[0].Index = 1; return o },
		"records swapped": func(o []wasm.Output) []wasm.Output { o[0], o[1] = o[1], o[0]; return o },
	} {
		if unchanged(&h, sec, mod(same())) {
			t.Errorf("%s: reported unchanged", name)
		}
	}
}
