package sdk

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func simpleBatch(baseOffset int64, values ...string) []byte {
	tb := tBatch{topic: "in", baseOffset: baseOffset, baseTimestamp: 5000, maxTimestamp: 5000 + int64(len(values))}
	for i, v := range values {
		tb.records = append(tb.records, tRecord{tsDelta: int64(i), offDelta: int32(i), key: []byte("k" + v), value: []byte(v),
			headers: []Header{{Key: "h", Value: []byte(v)}}})
	}
	return encodeBatch(tb)
}

func TestOnRecordOneEmitPerBatch(t *testing.T) {
	h := newFakeHost(simpleBatch(-1, "a", "b", "c"), simpleBatch(-1, "drop", "drop"), simpleBatch(-1, "d"))
	serve(h, perRecord(func(r Record, w Writer) error {
		if string(r.Value) == "drop" {
			return nil
		}
		if r.Offset != -1 {
			t.Errorf("inline offset %d", r.Offset)
		}
		r.Value = bytes.ToUpper(r.Value)
		if err := w.Write(r); err != nil {
			return err
		}
		// A new record with no timestamp gets the input record's.
		return w.Write(Record{Value: []byte("extra")})
	}))
	if len(h.results) != 3 {
		t.Fatalf("%d batches served", len(h.results))
	}
	for i, want := range [][]string{{"A", "extra", "B", "extra", "C", "extra"}, nil, {"D", "extra"}} {
		res := h.results[i]
		if len(res.fails) != 0 {
			t.Errorf("batch %d failed: %q", i, res.fails)
		}
		if want == nil {
			if len(res.emits) != 0 {
				t.Errorf("batch %d: %d emits for no output", i, len(res.emits))
			}
			continue
		}
		if len(res.emits) != 1 {
			t.Errorf("batch %d: %d emits, want 1", i, len(res.emits))
		}
		out := h.outputs(t, i)
		if len(out) != len(want) {
			t.Fatalf("batch %d: %d records, want %d", i, len(out), len(want))
		}
		for j, o := range out {
			if string(o.value) != want[j] || o.tsDelta != int64(j/2) || o.output != 0 {
				t.Errorf("batch %d record %d: %+v", i, j, o)
			}
			if j%2 == 0 && (string(o.key) != "k"+strings.ToLower(want[j]) || len(o.headers) != 1 || string(o.headers[0].Value) != strings.ToLower(want[j])) {
				t.Errorf("batch %d record %d: key/headers not kept: %+v", i, j, o)
			}
		}
	}
}

func TestOnBatch(t *testing.T) {
	h := newFakeHost(simpleBatch(100, "x", "y"))
	serve(h, perBatch(func(b *Batch, w Writer) error {
		if b.Topic != "in" || len(b.Records) != 2 || b.Records[1].Offset != 101 || b.Inline() {
			t.Errorf("batch: %+v", b)
		}
		for i := len(b.Records) - 1; i >= 0; i-- {
			if err := w.WriteTo(i, b.Records[i]); err != nil {
				return err
			}
		}
		// A new record with no timestamp gets the batch's base timestamp.
		return w.WriteTo(1, Record{Key: []byte("new")})
	}))
	out := h.outputs(t, 0)
	if len(out) != 3 || out[0].output != 1 || string(out[0].value) != "y" || out[0].tsDelta != 1 ||
		out[1].output != 0 || string(out[1].value) != "x" || out[2].output != 1 || out[2].tsDelta != 0 || out[2].value != nil {
		t.Errorf("output: %+v", out)
	}
}

func TestFailOnCallbackError(t *testing.T) {
	h := newFakeHost(simpleBatch(-1, "a", "bad", "c"), simpleBatch(-1, "d"))
	var seen []string
	serve(h, perRecord(func(r Record, w Writer) error {
		seen = append(seen, string(r.Value))
		if err := w.Write(r); err != nil {
			return err
		}
		if string(r.Value) == "bad" {
			return errors.New("bad record")
		}
		return nil
	}))
	if got := strings.Join(seen, ","); got != "a,bad,d" {
		t.Errorf("records seen: %s (the rest of a failed batch is skipped)", got)
	}
	if r := h.results[0]; len(r.emits) != 0 || len(r.fails) != 1 || r.fails[0] != "bad record" {
		t.Errorf("failed batch: %+v", r)
	}
	if r := h.results[1]; len(r.emits) != 1 || len(r.fails) != 0 {
		t.Errorf("batch after a failure: %+v", r)
	}
	if out := h.outputs(t, 1); len(out) != 1 || string(out[0].value) != "d" {
		t.Errorf("batch after a failure: output %+v (the failed batch's writes must be discarded)", out)
	}
}

func TestFailMessage(t *testing.T) {
	long := strings.Repeat("é", 1000) // 2000 bytes
	h := newFakeHost(simpleBatch(-1, "a"), simpleBatch(-1, "b"))
	n := 0
	serve(h, perBatch(func(*Batch, Writer) error {
		n++
		if n == 1 {
			return errors.New(long)
		}
		return errors.New("")
	}))
	m := h.results[0].fails[0]
	if len(m) > maxFailMessage || len(m) < maxFailMessage-3 || !utf8.ValidString(m) || !strings.HasPrefix(long, m) {
		t.Errorf("long message cut to %d bytes, valid UTF-8 %v", len(m), utf8.ValidString(m))
	}
	if m := h.results[1].fails[0]; m == "" {
		t.Error("empty message sent")
	}
}

func TestBufferGrowth(t *testing.T) {
	big := strings.Repeat("x", initialInputSize)
	small := simpleBatch(-1, "s")
	bigBatch := simpleBatch(-1, big)
	huge := simpleBatch(-1, big, big, big, big, big)
	h := newFakeHost(small, bigBatch, small, huge, small)
	var got []int
	serve(h, perRecord(func(r Record, w Writer) error {
		got = append(got, len(r.Value))
		return w.Write(r)
	}))
	want := []int{1, len(big), 1, len(big), len(big), len(big), len(big), len(big), 1}
	if len(got) != len(want) {
		t.Fatalf("records seen: %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("records seen: %v", got)
		}
	}
	// small, big (-len, retry), small, huge (-len, retry), small, end.
	if h.nextCalls != 8 {
		t.Errorf("%d next_batch calls, want 8 (%v)", h.nextCalls, h.bufSizes)
	}
	if h.bufSizes[0] != initialInputSize || h.bufSizes[2] < len(bigBatch) || h.bufSizes[5] < len(huge) || h.bufSizes[7] != h.bufSizes[5] {
		t.Errorf("buffer sizes: %v", h.bufSizes)
	}
	for i := range h.results {
		if len(h.results[i].emits) != 1 || len(h.results[i].fails) != 0 {
			t.Errorf("batch %d: %+v", i, h.results[i])
		}
	}
	if out := h.outputs(t, 3); len(out) != 5 || string(out[4].value) != big {
		t.Errorf("huge batch output: %d records", len(out))
	}
}

type badGrowHost struct{ fakeHost }

func (*badGrowHost) nextBatch(buf []byte) (int32, bool) { return -int32(len(buf)), true }

func TestHostProtocolErrorsPanic(t *testing.T) {
	expectPanic(t, "check_abi", func() { serve(&fakeHost{abi: -1}, perBatch(nil)) })
	expectPanic(t, "grow", func() { serve(&badGrowHost{}, perBatch(nil)) })
}

func expectPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", name)
		}
	}()
	f()
}

func TestMalformedInputFailsBatch(t *testing.T) {
	bad := simpleBatch(-1, "a")
	bad = bad[:len(bad)-1]
	h := newFakeHost(bad, simpleBatch(-1, "b"))
	calls := 0
	serve(h, perRecord(func(r Record, w Writer) error { calls++; return w.Write(r) }))
	if calls != 1 || len(h.results[0].fails) != 1 || !strings.Contains(h.results[0].fails[0], "malformed input") || len(h.results[0].emits) != 0 {
		t.Errorf("malformed batch: calls %d, %+v", calls, h.results[0])
	}
	if len(h.results[1].emits) != 1 {
		t.Errorf("next batch: %+v", h.results[1])
	}
}

func TestEmitErrorFailsBatch(t *testing.T) {
	h := newFakeHost(simpleBatch(-1, "a"))
	h.emitRC = -2
	serve(h, perRecord(func(r Record, w Writer) error { return w.Write(r) }))
	if r := h.results[0]; len(r.emits) != 1 || len(r.fails) != 1 || !strings.Contains(r.fails[0], "too large") {
		t.Errorf("emit error: %+v", r)
	}
}

func TestWriteToValidation(t *testing.T) {
	var inlineErrs, derivedErrs []error
	h := newFakeHost(simpleBatch(-1, "a"), simpleBatch(0, "b"))
	serve(h, perRecord(func(r Record, w Writer) error {
		errs := []error{w.WriteTo(-1, r), w.WriteTo(0, r), w.WriteTo(1, r), w.WriteTo(7, r), w.WriteTo(8, r)}
		if r.Offset == -1 {
			inlineErrs = errs
		} else {
			derivedErrs = errs
		}
		return nil
	}))
	check := func(name string, errs []error, ok ...bool) {
		for i, e := range errs {
			if (e == nil) != ok[i] {
				t.Errorf("%s write %d: err %v", name, i, e)
			}
		}
	}
	check("inline", inlineErrs, false, true, false, false, false)
	check("derived", derivedErrs, false, true, true, true, false)
	if out := h.outputs(t, 1); len(out) != 3 || out[0].output != 0 || out[1].output != 1 || out[2].output != 7 {
		t.Errorf("derived output: %+v", out)
	}

	// With output topics named in the environment, indexes past them fail.
	t.Setenv("SLUICE_OUTPUT_TOPIC_0", "low")
	t.Setenv("SLUICE_OUTPUT_TOPIC_1", "high")
	t.Setenv("SLUICE_INPUT_TOPIC", "in")
	if InputTopic() != "in" || OutputTopic(1) != "high" || OutputTopic(2) != "" || OutputTopic(-1) != "" {
		t.Error("topic names from the environment")
	}
	h = newFakeHost(simpleBatch(0, "b"))
	serve(h, perRecord(func(r Record, w Writer) error {
		derivedErrs = []error{w.WriteTo(1, r), w.WriteTo(2, r)}
		return nil
	}))
	check("derived with 2 outputs", derivedErrs, true, false)
}

func TestTimestampKept(t *testing.T) {
	h := newFakeHost(simpleBatch(-1, "a", "b"))
	serve(h, perRecord(func(r Record, w Writer) error {
		r.Timestamp = r.Timestamp.Add(time.Second)
		return w.Write(r)
	}))
	if out := h.outputs(t, 0); len(out) != 2 || out[0].tsDelta != 1000 || out[1].tsDelta != 1001 {
		t.Errorf("output timestamps: %+v", out)
	}
}

// loopHost serves the same batch forever and only counts emitted bytes.
type loopHost struct {
	batch   []byte
	emitted int
}

func (*loopHost) checkABI(int32) int32 { return 0 }
func (h *loopHost) nextBatch(buf []byte) (int32, bool) {
	if len(buf) < len(h.batch) {
		return -int32(len(h.batch)), true
	}
	return int32(copy(buf, h.batch)), true
}
func (h *loopHost) emit(buf []byte) int32  { h.emitted += len(buf); return 0 }
func (*loopHost) fail([]byte)              { panic("fail") }
func (*loopHost) batchSource([]byte) int32 { panic("batch_source") }

// TestNoAllocations checks that, once warm, the loop allocates nothing per
// batch for a transform that passes records through or rewrites their values.
func TestNoAllocations(t *testing.T) {
	tb := tBatch{topic: "in", baseOffset: -1}
	for i := range 50 {
		tb.records = append(tb.records, tRecord{tsDelta: int64(i), offDelta: int32(i), key: []byte("key"), value: []byte("value"),
			headers: []Header{{Key: "content-type", Value: []byte("json")}, {Key: "trace", Value: nil}}})
	}
	h := &loopHost{batch: encodeBatch(tb)}
	r := newRunner(h)
	var scratch []byte
	fn := perRecord(func(r Record, w Writer) error {
		scratch = append(scratch[:0], r.Value...)
		r.Value = bytes.ToUpper(scratch) // allocates its result
		return w.Write(r)
	})
	pass := perRecord(func(r Record, w Writer) error { return w.Write(r) })
	r.step(pass)
	r.step(fn)
	if allocs := testing.AllocsPerRun(100, func() { r.step(pass) }); allocs != 0 {
		t.Errorf("pass-through: %v allocations per batch", allocs)
	}
	if h.emitted == 0 {
		t.Fatal("nothing emitted")
	}
	perRecordAllocs := testing.AllocsPerRun(100, func() { r.step(fn) })
	if perRecordAllocs > 50 { // bytes.ToUpper's result is the only allocation
		t.Errorf("upper-case: %v allocations per batch of 50", perRecordAllocs)
	}
}
