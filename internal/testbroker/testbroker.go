// Package testbroker starts real brokers in-process for tests: listeners on 127.0.0.1
// with kernel-chosen ports, a temporary data dir, the standard modules, and cleanup
// registered on the test. Drive them with franz-go over real sockets.
//
//	b := testbroker.Start(t)
//	cl := b.Client(t, kgo.DefaultProduceTopic("t"))
//	adm := b.Admin(t)
package testbroker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/standard"
)

// Broker is a running in-process broker.
type Broker struct {
	Addr      string // client listener host:port
	AdminAddr string // admin HTTP host:port
	DataDir   string
	Kernel    *kernel.Kernel

	opts    options
	logw    *tbWriter
	stopped bool
}

type options struct {
	config  string
	dataDir string
	level   slog.Level
	modules []kernel.ModuleInfo
}

// Option changes how a broker is started.
type Option func(*options)

// WithConfig starts the broker from a YAML config (listeners, admin listener and, unless
// set, data_dir are overridden).
func WithConfig(yaml string) Option { return func(o *options) { o.config = yaml } }

// WithDataDir uses dir as the data dir instead of a fresh temporary one.
func WithDataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

// WithModules registers extra modules next to the standard ones (e.g. a test-only
// auth module the config then selects with `use:`).
func WithModules(mods ...kernel.ModuleInfo) Option {
	return func(o *options) { o.modules = append(o.modules, mods...) }
}

// WithLogLevel sets the broker's log level (default: warn; SLUICE_TEST_DEBUG is not read).
func WithLogLevel(l slog.Level) Option { return func(o *options) { o.level = l } }

// Start starts a broker and waits until it is ready. It is stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	o := options{level: slog.LevelWarn}
	for _, fn := range opts {
		fn(&o)
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	b := &Broker{opts: o, DataDir: o.dataDir}
	b.start(t, "127.0.0.1:0", "127.0.0.1:0")
	t.Cleanup(b.Stop)
	return b
}

// newKernel builds, but does not start, a kernel with the standard modules from the
// YAML config, on dataDir, its first listener on listen and the admin listener on admin.
func newKernel(t testing.TB, yaml, dataDir, listen, admin string, log *slog.Logger, extra ...kernel.ModuleInfo) *kernel.Kernel {
	t.Helper()
	k, err := buildKernel(yaml, dataDir, listen, admin, log, extra...)
	if err != nil {
		t.Fatalf("testbroker: %v", err)
	}
	return k
}

// buildKernel is newKernel returning its error: a config's problem, for StartError.
func buildKernel(yaml, dataDir, listen, admin string, log *slog.Logger, extra ...kernel.ModuleInfo) (*kernel.Kernel, error) {
	cfg, err := kernel.ParseConfig([]byte(yaml))
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dataDir
	if len(cfg.Listeners) == 0 {
		cfg.Listeners = []kernel.ListenerConfig{{Name: "PLAINTEXT"}}
	}
	cfg.Listeners[0].Address = listen
	cfg.AdminListen = admin
	reg := kernel.NewRegistry()
	standard.Register(reg)
	for _, mi := range extra {
		reg.Register(mi)
	}
	return kernel.New(cfg, reg, log)
}

func (b *Broker) start(t testing.TB, listen, admin string) {
	t.Helper()
	b.logw = &tbWriter{t: t}
	log := slog.New(slog.NewTextHandler(b.logw, &slog.HandlerOptions{Level: b.opts.level}))
	k := newKernel(t, b.opts.config, b.DataDir, listen, admin, log, b.opts.modules...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Start(ctx); err != nil {
		t.Fatalf("testbroker: start: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !k.Ready() {
		if time.Now().After(deadline) {
			_ = k.Shutdown(context.Background())
			t.Fatalf("testbroker: broker not ready after 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Kernel = k
	b.Addr = k.Addrs()[0].String()
	b.AdminAddr = k.AdminAddr().String()
	b.stopped = false
}

// Stop shuts the broker down gracefully (idempotent).
func (b *Broker) Stop() {
	if b.stopped || b.Kernel == nil {
		return
	}
	b.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = b.Kernel.Shutdown(ctx)
	b.logw.close()
}

// Restart stops the broker gracefully and starts it again on the same data dir and, if
// they are still free, the same ports.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	addr, admin := b.Addr, b.AdminAddr
	b.Stop()
	b.start(t, addr, admin)
}

// Client returns a franz-go client seeded with this broker, closed when the test ends.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
	if err != nil {
		t.Fatalf("testbroker: client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client for this broker, closed when the test ends.
func (b *Broker) Admin(t testing.TB) *kadm.Client {
	return kadm.NewClient(b.Client(t))
}

// tbWriter sends log lines to t.Log until the broker stops (logging after a test ends
// panics).
type tbWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) close() { w.mu.Lock(); w.closed = true; w.mu.Unlock() }

// String describes the broker for test messages.
func (b *Broker) String() string { return fmt.Sprintf("broker %s (data %s)", b.Addr, b.DataDir) }

// StartError starts a broker from a YAML config on 127.0.0.1 with a temporary data dir,
// for a config that must not start, and returns what Start answered. A broker that does
// start is shut down again and StartError returns nil. A config that does not parse or
// build a kernel fails the test.
func StartError(t testing.TB, yaml string) error {
	t.Helper()
	return StartErrorIn(t, yaml, t.TempDir())
}

// StartErrorIn is StartError on the data dir dataDir, for a broker that must not start
// on what an earlier one left there.
func StartErrorIn(t testing.TB, yaml, dataDir string) error {
	t.Helper()
	k, err := buildKernel(yaml, dataDir, "127.0.0.1:0", "127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err // found by New, before anything was bound or written
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Start(ctx); err != nil {
		return err
	}
	_ = k.Shutdown(ctx)
	return nil
}
