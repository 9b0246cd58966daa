package main

import (
	"testing"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

type event struct{ r transform.Record }

func (e event) Record() transform.Record { return e.r }

type recorder struct{ out []transform.Record }

func (w *recorder) Write(r transform.Record, _ ...transform.WriteOpt) error {
	w.out = append(w.out, r)
	return nil
}

func TestUpper(t *testing.T) {
	for in, want := range map[string]string{"": "", "abc": "ABC", "Hello, wörld 1": "HELLO, WÖRLD 1"} {
		if got := string(upper([]byte(in))); got != want {
			t.Errorf("upper(%q) = %q, want %q", in, got, want)
		}
	}
	if upper(nil) != nil {
		t.Error("a null value must stay null")
	}
	var w recorder
	hdr := []transform.RecordHeader{{Key: []byte("h"), Value: []byte("x")}}
	if err := uppercase(event{transform.Record{Key: []byte("k"), Value: []byte("v"), Headers: hdr}}, &w); err != nil {
		t.Fatal(err)
	}
	if len(w.out) != 1 || string(w.out[0].Key) != "k" || string(w.out[0].Value) != "V" || len(w.out[0].Headers) != 1 {
		t.Errorf("written: %+v", w.out)
	}
}
