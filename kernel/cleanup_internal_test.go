package kernel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
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

// parkedModule answers ListGroups only when the request's context ends, as a
// JoinGroup parked for its rebalance does.
type parkedModule struct{ parked chan struct{} }

func (m *parkedModule) Provision(ctx Context) error {
	return ctx.Handle(kmsg.ListGroups.Int16(), 0, 4, func(rctx context.Context, _ *Request) (Response, error) {
		close(m.parked)
		<-rctx.Done()
		return Response{}, rctx.Err()
	})
}

// A request parked past the drain grace is cancelled: Shutdown does not spend the
// modules' share of its deadline waiting for it.
func TestShutdownCancelsParkedRequests(t *testing.T) {
	m := &parkedModule{parked: make(chan struct{})}
	reg := NewRegistry()
	reg.Register(ModuleInfo{ID: "echo.parked", New: func() Module { return m }})
	k := plainKernel(t, reg, "modules: {echo: {use: parked}}\n")
	k.drainGrace = 100 * time.Millisecond
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", k.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := kmsg.NewPtrListGroupsRequest()
	req.SetVersion(4)
	if _, err := nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.parked:
	case <-time.After(30 * time.Second):
		t.Fatal("the request did not reach its handler")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Shutdown took %v with a parked request; the drain grace is 100ms", took)
	}
}
