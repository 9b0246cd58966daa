package wasm

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestDeadlineInstrumented: the Go test guests are instrumented (deadline.go)
// and a spinning one is stopped at its batch timeout even while the host's
// garbage collector needs to stop the world (compiled wasm cannot be
// preempted: without the guest's periodic exits to Go, runtime.GC would
// wait for it forever).
func TestDeadlineInstrumented(t *testing.T) {
	for _, g := range []string{"loop", "identity", "sdkidentity", "rpupper"} {
		if !program(t, g, 0).stoppable {
			t.Errorf("guest %s not instrumented", g)
		}
	}
	const timeout = 300 * time.Millisecond
	p := newPool(t, "loop", Config{Instances: 1, Timeout: timeout})
	mustTransform(t, p, values("warm up"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(50 * time.Millisecond) // the guest is spinning
		runtime.GC()
	}()
	start := time.Now()
	_, err := p.Transform(context.Background(), values("loop"))
	wantKind(t, err, KindTimeout)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runtime.GC blocked by the spinning guest")
	}
	if took := time.Since(start); took > timeout+time.Second {
		t.Fatalf("timeout after %v", took)
	}
	if got := outValues(mustTransform(t, p, values("a"))); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("got %q", got)
	}
}

// TestInstrumentDeadlineRefuses: modules the rewriter does not handle are
// compiled as they are, with wazero's WithCloseOnContextDone.
func TestInstrumentDeadlineRefuses(t *testing.T) {
	nextBatch := imp{"sluice_transform_v1", "next_batch", []byte{i32t, i32t}, []byte{i32t}}
	for name, b := range map[string][]byte{
		"truncated":         {0, 'a', 's', 'm', 1, 0, 0, 0, 10, 5, 1},
		"no memory":         buildModule([]imp{nextBatch}, true, false),
		"no global section": buildModule([]imp{nextBatch}, true, true),
		"simd":              {0, 'a', 's', 'm', 1, 0, 0, 0, 5, 3, 1, 0, 1, 6, 1, 0x7f, 0, 0x0b, 7, 1, 0, 10, 5, 1, 3, 0, 0xfd, 0x0c},
	} {
		if _, err := instrumentDeadline(b); err == nil {
			t.Errorf("%s: instrumented", name)
		}
	}
	p, err := testEngine.Compile(context.Background(), buildModule([]imp{nextBatch}, true, true), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if p.stoppable {
		t.Fatal("stoppable")
	}
}
