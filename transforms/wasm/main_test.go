package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// guests are the test guest programs under testdata/guests, built once by
// TestMain for GOOS=wasip1 GOARCH=wasm.
var guests = []string{
	"identity", "upper", "filter", "expand", "fail", "trap", "loop", "memhog",
	"bademit", "env", "rpupper", "rptopic", "bench", "sdkidentity", "source", "rpsource",
}

var (
	guestDir  string // where TestMain put <name>.wasm
	guestSkip string // why guest tests are skipped (no go tool)
	guestErr  error  // a guest failed to build

	testEngine *Engine

	progMu sync.Mutex
	progs  = map[string]*Program{}
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-wasm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	guestDir = dir
	buildGuests(dir)

	// Compiled code is kept across runs (keyed by wazero version and module
	// hash): compiling a Go guest takes seconds under -race.
	cacheDir := filepath.Join(dir, "cache")
	if d, err := os.UserCacheDir(); err == nil {
		cacheDir = filepath.Join(d, "sluice-wasm-test")
	}
	ctx := context.Background()
	testEngine, err = NewEngine(ctx, cacheDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testEngine.Close(ctx)
	precompile()
	return m.Run()
}

func buildGuests(dir string) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		guestSkip = "the go tool is not in PATH: cannot build the test guests (GOOS=wasip1 GOARCH=wasm)"
		return
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	sem := make(chan struct{}, max(2, runtime.NumCPU()))
	for _, g := range guests {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, g+".wasm"), "./testdata/guests/"+g)
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("build guest %s: %v\n%s", g, err, out))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		guestErr = fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
}

// precompile compiles the guests, two at a time, before the tests need them.
func precompile() {
	if guestSkip != "" || guestErr != nil {
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, g := range guests {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			b, err := os.ReadFile(filepath.Join(guestDir, g+".wasm"))
			if err != nil {
				return // reported by program
			}
			p, err := testEngine.Compile(context.Background(), b, 0)
			if err != nil {
				return
			}
			progMu.Lock()
			progs[g+"/0"] = p
			progMu.Unlock()
		})
	}
	wg.Wait()
}

// program returns the compiled guest (compiled once per memory limit).
func program(t testing.TB, name string, pages uint32) *Program {
	t.Helper()
	if guestSkip != "" {
		t.Skip(guestSkip)
	}
	if guestErr != nil {
		t.Fatal(guestErr)
	}
	key := fmt.Sprintf("%s/%d", name, pages)
	progMu.Lock()
	defer progMu.Unlock()
	if p := progs[key]; p != nil {
		return p
	}
	b, err := os.ReadFile(filepath.Join(guestDir, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := testEngine.Compile(context.Background(), b, pages)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	progs[key] = p
	return p
}

func newPool(t testing.TB, guest string, cfg Config) *Pool {
	t.Helper()
	return newPoolPages(t, guest, 0, cfg)
}

func newPoolPages(t testing.TB, guest string, pages uint32, cfg Config) *Pool {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "t-" + guest
	}
	if cfg.InputTopic == "" {
		cfg.InputTopic = "in"
	}
	p, err := program(t, guest, pages).NewPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("close pool: %v", err)
		}
	})
	return p
}

// rec is a test input record.
type rec struct {
	key, value []byte
	headers    []Header
	tsDelta    int64
}

func appendKBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

// encodeRecords encodes a Kafka v2 records section.
func encodeRecords(recs []rec) []byte {
	var out []byte
	for i, r := range recs {
		body := []byte{0}
		body = binary.AppendVarint(body, r.tsDelta)
		body = binary.AppendVarint(body, int64(i))
		body = appendKBytes(body, r.key)
		body = appendKBytes(body, r.value)
		body = binary.AppendVarint(body, int64(len(r.headers)))
		for _, h := range r.headers {
			body = appendKBytes(body, []byte(h.Key))
			body = appendKBytes(body, h.Value)
		}
		out = binary.AppendVarint(out, int64(len(body)))
		out = append(out, body...)
	}
	return out
}

func batchOf(recs ...rec) *Batch {
	return &Batch{
		Topic: "in", Partition: 3, BaseOffset: -1,
		BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_100,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		RecordCount: int32(len(recs)),
		Records:     encodeRecords(recs),
	}
}

func values(vs ...string) *Batch {
	recs := make([]rec, len(vs))
	for i, v := range vs {
		recs[i] = rec{key: []byte(fmt.Sprint("k", i)), value: []byte(v), tsDelta: int64(i * 10)}
	}
	return batchOf(recs...)
}

func outValues(out []Output) []string {
	s := make([]string, len(out))
	for i, o := range out {
		s[i] = string(o.Value)
	}
	return s
}

func mustTransform(t testing.TB, p *Pool, b *Batch) []Output {
	t.Helper()
	out, err := p.Transform(context.Background(), b)
	if err != nil {
		t.Fatalf("Transform: %v", err)
	}
	return out
}

func wantKind(t testing.TB, err error, kind ErrorKind) *Error {
	t.Helper()
	e, ok := err.(*Error)
	if !ok || e.Kind != kind {
		t.Fatalf("error = %v, want kind %v", err, kind)
	}
	return e
}

// logSink collects log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() *slog.Logger { return slog.New(sinkHandler{s}) }

func (s *logSink) has(substr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

type sinkHandler struct{ s *logSink }

func (h sinkHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h sinkHandler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.s.mu.Lock()
	h.s.lines = append(h.s.lines, b.String())
	h.s.mu.Unlock()
	return nil
}
func (h sinkHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h sinkHandler) WithGroup(string) slog.Handler      { return h }

// waitFor polls fn until it is true or d passes.
func waitFor(t testing.TB, d time.Duration, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
