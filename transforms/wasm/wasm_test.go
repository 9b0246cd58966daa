package wasm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTransforms(t *testing.T) {
	in := batchOf(
		rec{key: []byte("a"), value: []byte("hello"), tsDelta: 0},
		rec{key: nil, value: []byte("drop me"), headers: []Header{{Key: "drop", Value: nil}}, tsDelta: 5},
		rec{key: []byte(""), value: nil, headers: []Header{{Key: "h", Value: []byte("v")}}, tsDelta: 7},
		rec{key: []byte("big"), value: []byte(strings.Repeat("x", 5000)), tsDelta: 9},
	)
	big := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name  string
		guest string
		want  []string
	}{
		{"identity", "identity", []string{"hello", "drop me", "", big}},
		{"upper", "upper", []string{"HELLO", "DROP ME", "", strings.ToUpper(big)}},
		{"filter", "filter", []string{"hello", "", big}},
		{"expand", "expand", []string{"hello", "hello", "drop me", "drop me", "", "", big, big}},
		{"redpanda upper", "rpupper", []string{"HELLO", "DROP ME", "", strings.ToUpper(big)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, tc.guest, Config{Instances: 1})
			for range 3 { // the instance is reused
				out := mustTransform(t, p, in)
				if got := outValues(out); !slices.Equal(got, tc.want) {
					t.Fatalf("values = %.40q, want %.40q", got, tc.want)
				}
				for _, o := range out {
					if o.Index != 0 {
						t.Fatalf("index = %d", o.Index)
					}
					switch string(o.Value) {
					case "hello", "HELLO":
						if string(o.Key) != "a" || o.TimestampDelta != 0 || o.Headers != nil {
							t.Fatalf("record %+v", o)
						}
					case "drop me", "DROP ME":
						if o.Key != nil || o.TimestampDelta != 5 || len(o.Headers) != 1 || o.Headers[0].Key != "drop" || o.Headers[0].Value != nil {
							t.Fatalf("record %+v", o)
						}
					case "":
						// (bytes.ToUpper in rpupper turns the null value into an empty one.)
						if o.Key == nil || len(o.Key) != 0 || (o.Value != nil) != (tc.guest == "rpupper") || len(o.Value) != 0 || o.TimestampDelta != 7 ||
							len(o.Headers) != 1 || o.Headers[0].Key != "h" || string(o.Headers[0].Value) != "v" {
							t.Fatalf("record %+v", o)
						}
					}
				}
			}
			if out := mustTransform(t, p, batchOf()); len(out) != 0 {
				t.Fatalf("empty batch gave %d records", len(out))
			}
		})
	}
}

func TestRedpandaToTopic(t *testing.T) {
	p := newPool(t, "rptopic", Config{OutputTopics: []string{"out-a", "out-b"}, Instances: 1})
	if got := p.prog.ABI(); got != ABIRedpanda {
		t.Fatalf("ABI = %q", got)
	}
	b := values("one", "two")
	b.BaseOffset = 100
	out := mustTransform(t, p, b)
	if len(out) != 4 {
		t.Fatalf("got %d records: %+v", len(out), out)
	}
	for i, o := range out {
		if o.Index != i%2 || string(o.Value) != []string{"one", "two"}[i/2] || o.TimestampDelta != int64(i/2*10) {
			t.Fatalf("record %d: %+v", i, o)
		}
		if o.Index == 1 {
			hs := o.Headers
			wantOff := fmt.Sprint(100 + i/2)
			wantTS := fmt.Sprint(b.BaseTimestamp + int64(i/2*10))
			if len(hs) != 2 || hs[0].Key != "offset" || string(hs[0].Value) != wantOff || hs[1].Key != "ts" || string(hs[1].Value) != wantTS {
				t.Fatalf("record %d headers %+v, want offset %s ts %s", i, hs, wantOff, wantTS)
			}
		}
	}

	// Inline: only the input topic is a valid output; REDPANDA_OUTPUT_TOPIC_1
	// is unset, so ToTopic("") means the default output... the SDK treats ""
	// as "no option". An unknown topic fails the write, the SDK panics.
	inline := newPool(t, "rptopic", Config{Env: map[string]string{"REDPANDA_OUTPUT_TOPIC_1": "x"}, Instances: 1})
	_, err := inline.Transform(context.Background(), values("one"))
	wantKind(t, err, KindTrap)
}

func TestRedpandaMalformedInput(t *testing.T) {
	p := newPool(t, "rpupper", Config{Instances: 1})
	b := values("a", "b")
	b.Records = b.Records[:len(b.Records)-1]
	_, err := p.Transform(context.Background(), b)
	wantKind(t, err, KindMalformed)
	b = values("a", "b")
	b.RecordCount = 3
	_, err = p.Transform(context.Background(), b)
	wantKind(t, err, KindMalformed)
	if got := outValues(mustTransform(t, p, values("a"))); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("got %q", got)
	}
}

func TestFail(t *testing.T) {
	p := newPool(t, "fail", Config{Instances: 1})
	for range 2 {
		_, err := p.Transform(context.Background(), values("ok", "fail"))
		if e := wantKind(t, err, KindFailed); e.Msg != "record says fail" {
			t.Fatalf("msg = %q", e.Msg)
		}
		if got := outValues(mustTransform(t, p, values("ok"))); !slices.Equal(got, []string{"ok"}) {
			t.Fatalf("got %q", got)
		}
	}
}

func TestTrap(t *testing.T) {
	log := &logSink{}
	p := newPool(t, "trap", Config{Instances: 1, Log: log.logger()})
	for range 2 {
		_, err := p.Transform(context.Background(), values("a", "trap"))
		wantKind(t, err, KindTrap)
		if got := outValues(mustTransform(t, p, values("a"))); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("got %q", got)
		}
	}
	if !log.has("panic: guest trap transform=t-trap stream=stderr") {
		t.Fatalf("guest panic not logged: %q", log.lines)
	}
}

func TestTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := newPool(t, "loop", Config{Instances: 1, Timeout: timeout})
	mustTransform(t, p, values("warm up"))
	for range 2 {
		start := time.Now()
		_, err := p.Transform(context.Background(), values("loop"))
		took := time.Since(start)
		wantKind(t, err, KindTimeout)
		if took < timeout || took > timeout+time.Second {
			t.Fatalf("timeout after %v, want ~%v", took, timeout)
		}
		if got := outValues(mustTransform(t, p, values("a"))); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("got %q", got)
		}
	}
}

func TestContextCancel(t *testing.T) {
	p := newPool(t, "loop", Config{Instances: 1, Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Transform(ctx, values("loop"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	if got := outValues(mustTransform(t, p, values("a"))); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("got %q", got)
	}
}

func TestMemoryHog(t *testing.T) {
	p := newPoolPages(t, "memhog", 256, Config{Instances: 1, Timeout: 10 * time.Second})
	_, err := p.Transform(context.Background(), values("hog"))
	wantKind(t, err, KindTrap)
	if got := outValues(mustTransform(t, p, values("a"))); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("got %q", got)
	}
}

func TestBadGuestCalls(t *testing.T) {
	log := &logSink{}
	p := newPool(t, "bademit", Config{Instances: 1, MaxOutputBytes: 1 << 20, Log: log.logger()})
	for _, tc := range []struct {
		value string
		errno string
	}{
		{"garbage", "-1"},
		{"oob", "-1"},
		{"hugelen", "-2"},
		{"index", "-3"},
		{"big", "-2"},
		{"twice", "-1"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			_, err := p.Transform(context.Background(), values(tc.value, "x"))
			wantKind(t, err, KindMalformed)
			waitFor(t, 5*time.Second, func() bool { return log.has("emit errno " + tc.errno) })
			log.mu.Lock()
			log.lines = nil
			log.mu.Unlock()
			if got := outValues(mustTransform(t, p, values("a"))); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("got %q", got)
			}
		})
	}
	t.Run("nextoob", func(t *testing.T) {
		if out := mustTransform(t, p, values("nextoob")); len(out) != 0 {
			t.Fatalf("got %d records", len(out))
		}
		_, err := p.Transform(context.Background(), values("a"))
		if e := wantKind(t, err, KindTrap); !strings.Contains(e.Msg, "out of bounds") {
			t.Fatalf("msg = %q", e.Msg)
		}
		if got := outValues(mustTransform(t, p, values("a"))); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("got %q", got)
		}
	})
}

func TestSandbox(t *testing.T) {
	log := &logSink{}
	cfg := Config{
		Name: "envy", InputTopic: "orders", OutputTopics: []string{"o1", "o2"},
		Env: map[string]string{"GREETING": "hi", "SLUICE_INPUT_TOPIC": "spoofed"},
		Log: log.logger(),
	}
	p := newPool(t, "env", cfg)
	b := values("SLUICE_TRANSFORM_NAME", "SLUICE_INPUT_TOPIC", "SLUICE_OUTPUT_TOPIC_0",
		"SLUICE_OUTPUT_TOPIC_1", "GREETING", "REDPANDA_INPUT_TOPIC", "ARG0", "DIR", "LOG")
	want := []string{"envy", "orders", "o1", "o2", "hi", "", "envy", "true", "LOG"}
	if got := outValues(mustTransform(t, p, b)); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	waitFor(t, 5*time.Second, func() bool { return log.has("hello from the guest transform=envy stream=stdout") })

	// The clock is fake and deterministic: a fresh instance sees the same time.
	now := func() string {
		q := newPool(t, "env", Config{Instances: 1})
		return outValues(mustTransform(t, q, values("NOW")))[0]
	}
	if a, b := now(), now(); a != b {
		t.Fatalf("clock not deterministic: %s vs %s", a, b)
	}

	// Inline: output 0 is the input topic.
	q := newPool(t, "env", Config{InputTopic: "orders"})
	if got := outValues(mustTransform(t, q, values("SLUICE_OUTPUT_TOPIC_0"))); got[0] != "orders" {
		t.Fatalf("got %q", got)
	}
}

func TestLogRateLimit(t *testing.T) {
	log := &logSink{}
	w := newLineWriter(log.logger(), newLogLimiter(1, 5), "x", "stdout")
	for i := range 100 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if len(log.lines) != 5 {
		t.Fatalf("%d lines logged, want 5 (burst)", len(log.lines))
	}
	lim := newLogLimiter(1, 5)
	w = newLineWriter(log.logger(), lim, "x", "stdout")
	log.lines = nil
	fmt.Fprint(w, strings.Repeat("y", 3*maxLogLine)+"\nunterminated")
	w.flush()
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.lines) != 2 || len(log.lines[0]) > maxLogLine+100 || !strings.Contains(log.lines[0], "truncated=true") ||
		!strings.HasPrefix(log.lines[1], "unterminated") {
		t.Fatalf("lines %.200q", log.lines)
	}
}

func TestConcurrency(t *testing.T) {
	p := newPool(t, "upper", Config{Instances: 3})
	const goroutines, loops = 12, 30
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range loops {
				v := fmt.Sprintf("g%d-i%d-%s", g, i, strings.Repeat("z", i*37))
				out, err := p.Transform(context.Background(), values(v, v+"!"))
				if err != nil {
					t.Error(err)
					return
				}
				if got := outValues(out); !slices.Equal(got, []string{strings.ToUpper(v), strings.ToUpper(v + "!")}) {
					t.Errorf("got %q", got)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCloseNoLeak(t *testing.T) {
	prog := program(t, "loop", 0)
	base := runtime.NumGoroutine()
	p, err := prog.NewPool(context.Background(), Config{Name: "leak", InputTopic: "in", Instances: 3, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Go(func() {
			_, err := p.Transform(context.Background(), values("loop"))
			errs <- err
		})
	}
	// A fourth caller waits for an instance.
	wg.Go(func() {
		_, err := p.Transform(context.Background(), values("a"))
		errs <- err
	})
	time.Sleep(300 * time.Millisecond) // let the guests start spinning
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if err != nil { // the fourth may have been served before Close
			wantKind(t, err, KindClosed)
			n++
		}
	}
	if n < 3 {
		t.Fatalf("%d batches failed with KindClosed, want >= 3", n)
	}
	_, err = p.Transform(context.Background(), values("a"))
	wantKind(t, err, KindClosed)
	waitFor(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= base })
}

func TestInvalidModules(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	random := make([]byte, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	nextBatch := imp{"sluice_transform_v1", "next_batch", []byte{i32t, i32t}, []byte{i32t}}
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"random bytes", random, "not a WebAssembly"},
		{"wasm magic then garbage", append([]byte("\x00asm\x01\x00\x00\x00"), random...), ""},
		{"no imports", buildModule(nil, true, true), "imports neither"},
		{"unknown host module", buildModule([]imp{nextBatch, {"env", "foo", nil, nil}}, true, true), "unknown module"},
		{"unknown function", buildModule([]imp{{"sluice_transform_v1", "next_batchX", []byte{i32t, i32t}, []byte{i32t}}}, true, true), "unknown function"},
		{"wrong signature", buildModule([]imp{{"sluice_transform_v1", "next_batch", []byte{i32t}, []byte{i32t}}}, true, true), "signature"},
		{"wrong wasi signature", buildModule([]imp{nextBatch, {"wasi_snapshot_preview1", "fd_write", []byte{i32t}, nil}}, true, true), "signature"},
		{"both ABIs", buildModule([]imp{nextBatch, {"redpanda_transform", "check_abi_version_2", nil, nil}}, true, true), "both"},
		{"no _start", buildModule([]imp{nextBatch}, false, true), "_start"},
		{"no memory", buildModule([]imp{nextBatch}, true, false), "memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Compile(ctx, tc.wasm, 0)
			if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidModule containing %q", err, tc.want)
			}
		})
	}
	// The hand-built modules are otherwise valid.
	for _, imps := range [][]imp{
		{nextBatch, {"wasi_snapshot_preview1", "fd_write", []byte{i32t, i32t, i32t, i32t}, []byte{i32t}}},
		{{"redpanda_transform", "check_abi_version_2", nil, nil}, {"redpanda_schema_registry", "check_abi_version_0", nil, nil}},
	} {
		p, err := e.Compile(ctx, buildModule(imps, true, true), 16)
		if err != nil {
			t.Fatal(err)
		}
		want := ABISluiceV1
		if imps[0].mod == "redpanda_transform" {
			want = ABIRedpanda
		}
		if p.ABI() != want {
			t.Fatalf("ABI = %q, want %q", p.ABI(), want)
		}
		// Its _start returns at once: every batch fails, the pool survives.
		pool, err := p.NewPool(ctx, Config{Name: "tiny", InputTopic: "in"})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			_, err = pool.Transform(ctx, values("a"))
			wantKind(t, err, KindTrap)
		}
		if err := pool.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// imp is an imported function of a hand-built module.
type imp struct {
	mod, name       string
	params, results []byte
}

const i32t = 0x7f

func uleb(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func wasmName(b []byte, s string) []byte { return append(uleb(b, uint32(len(s))), s...) }

// buildModule assembles a module with the given imports, optionally a _start
// function (that returns at once) and a memory export.
func buildModule(imps []imp, start, memory bool) []byte {
	section := func(out []byte, id byte, body []byte) []byte {
		out = append(out, id)
		out = uleb(out, uint32(len(body)))
		return append(out, body...)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	var types []byte
	types = uleb(types, uint32(len(imps)+1))
	for _, im := range imps {
		types = append(types, 0x60)
		types = append(uleb(types, uint32(len(im.params))), im.params...)
		types = append(uleb(types, uint32(len(im.results))), im.results...)
	}
	types = append(types, 0x60, 0, 0)
	out = section(out, 1, types)
	if len(imps) > 0 {
		var ib []byte
		ib = uleb(ib, uint32(len(imps)))
		for i, im := range imps {
			ib = wasmName(ib, im.mod)
			ib = wasmName(ib, im.name)
			ib = append(ib, 0x00)
			ib = uleb(ib, uint32(i))
		}
		out = section(out, 2, ib)
	}
	if start {
		out = section(out, 3, uleb([]byte{1}, uint32(len(imps))))
	}
	if memory {
		out = section(out, 5, []byte{1, 0x00, 1})
	}
	var ex []byte
	n := 0
	if start {
		ex = wasmName(ex, "_start")
		ex = append(ex, 0x00)
		ex = uleb(ex, uint32(len(imps)))
		n++
	}
	if memory {
		ex = wasmName(ex, "memory")
		ex = append(ex, 0x02, 0)
		n++
	}
	out = section(out, 7, append(uleb(nil, uint32(n)), ex...))
	if start {
		out = section(out, 10, []byte{1, 2, 0, 0x0b})
	}
	return out
}

// benchBatch returns the identity benchmarks' batch (100 records of 1 KiB values), run
// once through p, with b's timer reset and its bytes and allocations reported.
func benchBatch(b *testing.B, p *Pool) *Batch {
	recs := make([]rec, 100)
	for i := range recs {
		recs[i] = rec{key: []byte(fmt.Sprint("key-", i)), value: make([]byte, 1024), tsDelta: int64(i)}
	}
	batch := batchOf(recs...)
	mustTransform(b, p, batch)
	b.SetBytes(int64(len(batch.Records)))
	b.ReportAllocs()
	b.ResetTimer()
	return batch
}

func BenchmarkIdentity(b *testing.B) {
	p := newPool(b, "identity", Config{Instances: 1, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	batch := benchBatch(b, p)
	for range b.N {
		out, err := p.Transform(context.Background(), batch)
		if err != nil || len(out) != 100 {
			b.Fatal(err, len(out))
		}
	}
}

// BenchmarkGuest attributes the cost of a batch of 100 × 1 KiB records:
// the bench guest's modes (noop: the round trip alone; rawcopy: emit every
// record verbatim without allocating; loopcopy/memcopy: copy the records
// section byte by byte or with copy()), the raw identity test guest and the
// SDK identity (examples/transforms/identity).
//
//	go test -run '^$' -bench BenchmarkGuest -benchtime 2s ./transforms/wasm/
func BenchmarkGuest(b *testing.B) {
	for _, c := range []struct{ name, guest, mode string }{
		{"noop", "bench", "noop"},
		{"loopcopy", "bench", "loopcopy"},
		{"memcopy", "bench", "memcopy"},
		{"rawcopy", "bench", "rawcopy"},
		{"identity-rawguest", "identity", ""},
		{"sdkidentity", "sdkidentity", ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := newPool(b, c.guest, Config{Instances: 1, Env: map[string]string{"BENCH_MODE": c.mode}})
			batch := benchBatch(b, p)
			for range b.N {
				if _, err := p.Transform(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
