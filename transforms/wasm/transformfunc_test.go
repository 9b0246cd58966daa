package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestTransformFunc: successive batches of different sizes through TransformFunc (one
// instance, so its output buffers are reused from batch to batch) give the same
// outputs as Transform; fn's error is returned; a Transform after TransformFunc still
// returns outputs the caller owns.
func TestTransformFunc(t *testing.T) {
	p := newPool(t, "sdkidentity", Config{Instances: 1})
	ctx := context.Background()
	for round, n := range []int{50, 3, 200, 1, 80} {
		recs := make([]rec, n)
		for i := range recs {
			recs[i] = rec{key: []byte(fmt.Sprintf("k%d-%d", round, i)), value: bytes.Repeat([]byte{byte('a' + round)}, 100+i), tsDelta: int64(i),
				headers: []Header{{Key: "h", Value: []byte(fmt.Sprint(i))}}}
		}
		b := batchOf(recs...)
		want := mustTransform(t, p, b)
		err := p.TransformFunc(ctx, b, func(got []Output) error {
			if len(got) != len(want) {
				return fmt.Errorf("%d outputs, want %d", len(got), len(want))
			}
			for i := range got {
				g, w := got[i], want[i]
				if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.TimestampDelta != w.TimestampDelta ||
					len(g.Headers) != 1 || g.Headers[0].Key != "h" || !bytes.Equal(g.Headers[0].Value, w.Headers[0].Value) {
					return fmt.Errorf("output %d differs", i)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// want came from Transform: the caller owns it, TransformFunc's reuse must not
		// have touched it.
		for i := range want {
			if !bytes.Equal(want[i].Key, []byte(fmt.Sprintf("k%d-%d", round, i))) {
				t.Fatalf("round %d: a Transform output changed under its owner", round)
			}
		}
	}
	sentinel := errors.New("consumer failed")
	if err := p.TransformFunc(ctx, batchOf(rec{value: []byte("x")}), func([]Output) error { return sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("fn's error: got %v", err)
	}
}

// BenchmarkIdentityFunc is BenchmarkIdentity through TransformFunc (outputs consumed in
// the callback, buffers reused).
func BenchmarkIdentityFunc(b *testing.B) {
	for _, guest := range []string{"identity", "sdkidentity"} {
		b.Run(guest, func(b *testing.B) {
			p := newPool(b, guest, Config{Instances: 1})
			batch := benchBatch(b, p)
			for range b.N {
				if err := p.TransformFunc(context.Background(), batch, func(out []Output) error {
					if len(out) != 100 {
						return fmt.Errorf("%d outputs", len(out))
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
