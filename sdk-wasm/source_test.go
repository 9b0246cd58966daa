package sdk

import (
	"bytes"
	"strings"
	"testing"
)

var alice = Source{PrincipalType: "User", PrincipalName: "alice", ClientID: "app-1"}

// stampSource writes each record back with its source in two headers.
func stampSource(r Record, w Writer) error {
	s := r.Source()
	r.Headers = append(r.Headers, Header{Key: "principal", Value: []byte(s.Principal())}, Header{Key: "client_id", Value: []byte(s.ClientID)})
	return w.Write(r)
}

func TestSourceOnRecord(t *testing.T) {
	anon := Source{PrincipalType: "User", PrincipalName: "ANONYMOUS"}
	h := newFakeHost(simpleBatch(-1, "a", "b", "c"), simpleBatch(-1, "d"), simpleBatch(7, "e"), simpleBatch(-1, "skip"))
	h.sources = []Source{alice, anon, {}, alice}
	serve(h, perRecord(func(r Record, w Writer) error {
		if string(r.Value) == "skip" {
			return w.Write(r) // never asks: no batch_source call
		}
		return stampSource(r, w)
	}))
	for i, want := range [][2]string{{"User:alice", "app-1"}, {"User:ANONYMOUS", ""}, {"", ""}} {
		out := h.outputs(t, i)
		if len(out) == 0 {
			t.Fatalf("batch %d: no output", i)
		}
		for _, o := range out {
			hs := o.headers
			if len(hs) != 3 || hs[1].Key != "principal" || string(hs[1].Value) != want[0] || hs[2].Key != "client_id" || string(hs[2].Value) != want[1] {
				t.Errorf("batch %d: headers %+v, want principal %q client_id %q", i, hs, want[0], want[1])
			}
		}
	}
	// Once per batch that asks, however many records ask.
	if n := len(h.sourceBufSizes); n != 3 {
		t.Errorf("%d batch_source calls, want 3", n)
	}
}

func TestSourceOnBatch(t *testing.T) {
	h := newFakeHost(simpleBatch(-1, "a", "b"))
	h.sources = []Source{alice}
	var got, fromRecord Source
	serve(h, perBatch(func(b *Batch, w Writer) error {
		got = b.Source()
		fromRecord = b.Records[1].Source()
		return nil
	}))
	if got != alice || fromRecord != alice || len(h.sourceBufSizes) != 1 {
		t.Fatalf("batch source %+v, record source %+v, %d calls", got, fromRecord, len(h.sourceBufSizes))
	}
}

// TestSourceGrowsBuffer: a source larger than the SDK's buffer is fetched again
// with the length the host asked for.
func TestSourceGrowsBuffer(t *testing.T) {
	long := Source{PrincipalType: "User", PrincipalName: strings.Repeat("n", 300), ClientID: strings.Repeat("c", 32767)}
	h := newFakeHost(simpleBatch(-1, "a"), simpleBatch(-1, "b"))
	h.sources = []Source{long, alice}
	var got []Source
	serve(h, perRecord(func(r Record, w Writer) error {
		got = append(got, r.Source())
		return nil
	}))
	need := 6 + 4 + 300 + 32767
	if len(got) != 2 || got[0] != long || got[1] != alice {
		t.Fatalf("sources %+v", got)
	}
	if want := []int{initialSourceSize, need, need}; !equalInts(h.sourceBufSizes, want) {
		t.Fatalf("batch_source buffer sizes %v, want %v", h.sourceBufSizes, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSourceHostErrors: a broker answering batch_source with an errno, or with a
// length that breaks the protocol, fails the batch with a panic (a trap in the
// broker), never a wrong source.
func TestSourceHostErrors(t *testing.T) {
	// Errnos; a -len no larger than the buffer it had; a -len past the bound.
	for _, rc := range []int32{-4, -2, -1, -5, -7, -(maxSourceSize + 1)} {
		h := newFakeHost(simpleBatch(-1, "a"))
		h.sourceRC = rc
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("rc %d: no panic", rc)
				}
			}()
			serve(h, perRecord(stampSource))
		}()
	}
}

func TestSourceOutsideBroker(t *testing.T) {
	var r Record
	if s := r.Source(); s != (Source{}) || s.Principal() != "" {
		t.Fatalf("zero record source %+v", s)
	}
	r2 := r.WithSource(alice)
	if r2.Source() != alice || r.Source() != (Source{}) {
		t.Fatalf("WithSource: %+v, original %+v", r2.Source(), r.Source())
	}
	b := (&Batch{Records: []Record{{}, {}}}).WithSource(alice)
	if b.Source() != alice || b.Records[1].Source() != alice {
		t.Fatalf("batch WithSource: %+v, %+v", b.Source(), b.Records[1].Source())
	}
	var w captureWriter
	if err := stampSource(r2, &w); err != nil {
		t.Fatal(err)
	}
	if hs := w.recs[0].Headers; string(hs[0].Value) != "User:alice" || string(hs[1].Value) != "app-1" {
		t.Fatalf("headers %+v", hs)
	}
	if p := (Source{PrincipalType: "User", PrincipalName: "CN=a:b"}).Principal(); p != "User:CN=a:b" {
		t.Fatalf("Principal() = %q", p)
	}
}

// captureWriter is the kind of fake Writer a transform's own tests use.
type captureWriter struct{ recs []Record }

func (w *captureWriter) Write(r Record) error { return w.WriteTo(0, r) }
func (w *captureWriter) WriteTo(_ int, r Record) error {
	w.recs = append(w.recs, r)
	return nil
}

func TestDecodeSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Source
		ok   bool
	}{
		{"alice", appendSource(nil, alice), alice, true},
		{"empty", make([]byte, 6), Source{}, true},
		{"trailing field ignored", append(appendSource(nil, alice), 3, 0, 'x', 'y', 'z'), alice, true},
		{"nothing", nil, Source{}, false},
		{"two fields", []byte{1, 0, 'U', 0, 0}, Source{}, false},
		{"length past end", []byte{0, 0, 0, 0, 5, 0, 'a'}, Source{}, false},
	} {
		got, err := decodeSource(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: %+v, %v", tc.name, got, err)
		}
	}
}

// FuzzDecodeSource: the source decoder never panics, and what it accepts encodes
// back to the bytes it read. Seeds are in testdata/fuzz/FuzzDecodeSource too.
func FuzzDecodeSource(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	f.Add(make([]byte, 6))
	f.Add(appendSource(nil, alice))
	f.Add(append(appendSource(nil, alice), appendSource(nil, alice)...))
	f.Add(appendSource(nil, Source{ClientID: strings.Repeat("x", 0xFFFF)}))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSource(data)
		if err != nil {
			return
		}
		enc := appendSource(nil, s)
		if !bytes.HasPrefix(data, enc) {
			t.Fatalf("decoded %+v re-encodes to %q, not a prefix of the input", s, enc)
		}
	})
}
