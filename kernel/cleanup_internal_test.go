package kernel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// plainKernel returns an unstarted kernel of config yaml with one PLAINTEXT listener
// and the admin listener on free ports and a fresh data dir.
func plainKernel(t *testing.T, reg *Registry, yaml string) *Kernel {
	t.Helper()
	cfg, err := ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	cfg.Listeners = []ListenerConfig{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}}
	cfg.AdminListen = "127.0.0.1:0"
	k, err := New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// stuckModule's Cleanup blocks until released (as badger's Close did, retrying a flush
// into a deleted data dir); otherModule records that its Cleanup ran.
type stuckModule struct{ release chan struct{} }

func (m *stuckModule) Provision(Context) error { return nil }
func (m *stuckModule) Cleanup() error          { <-m.release; return nil }

type otherModule struct{ cleaned *atomic.Bool }

func (m *otherModule) Provision(Context) error { return nil }
func (m *otherModule) Cleanup() error          { m.cleaned.Store(true); return nil }

// A module whose Cleanup never returns does not hold the shutdown past its deadline plus
// the grace; the other modules are still cleaned up and the error names the stuck one.
func TestShutdownAbandonsStuckCleanup(t *testing.T) {
	stuck := &stuckModule{release: make(chan struct{})}
	defer close(stuck.release)
	var cleaned atomic.Bool
	reg := NewRegistry()
	reg.Register(ModuleInfo{ID: "echo.stuck", New: func() Module { return stuck }})
	reg.Register(ModuleInfo{ID: "other.ok", New: func() Module { return &otherModule{cleaned: &cleaned} }})
	k := plainKernel(t, reg, "modules: {echo: {use: stuck}, other: {use: ok}}\n")
	k.cleanupGrace = 50 * time.Millisecond
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- k.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, errCleanupAbandoned) || !strings.Contains(err.Error(), "echo.stuck") {
			t.Fatalf("Shutdown: %v, want the stuck module's cleanup abandoned", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown waits for a Cleanup that never returns")
	}
	if !cleaned.Load() {
		t.Fatal("the other module was not cleaned up")
	}
}
