package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

// kernelOn builds a kernel of the echo module on dir with extra configs.
func kernelOn(t *testing.T, dir, configs string) *kernel.Kernel {
	t.Helper()
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "echo.basic", New: func() kernel.Module { return &echoModule{Greeting: "hi"} }})
	cfg, err := kernel.ParseConfig([]byte(echoConfig + configs))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	cfg.Listeners = []kernel.ListenerConfig{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}}
	cfg.AdminListen = "127.0.0.1:0"
	k, err := kernel.New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A second kernel on a data dir in use fails at once, naming the holder's pid; once the
// first stops, the dir is free again.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	first := kernelOn(t, dir, "")
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".lock"))
	if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(os.Getpid()) {
		t.Fatalf(".lock holds %q (%v), want this pid", b, err)
	}
	second := kernelOn(t, dir, "")
	err = second.Start(context.Background())
	want := fmt.Sprintf("data dir %s is in use by pid %d", dir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second Start: %v, want %q", err, want)
	}
	if err := first.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	third := kernelOn(t, dir, "")
	if err := third.Start(context.Background()); err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	_ = third.Shutdown(context.Background())
}

// A data dir with less than half the reserve free refuses the start with a message
// naming the dir and the config; below the reserve (but above half) it starts, with
// client writes refused; a reserve of 0 turns the check off.
func TestDataDirReserveAtStart(t *testing.T) {
	dir := t.TempDir()
	k := kernelOn(t, dir, "configs: {sluice.data.dir.reserve.bytes: \"9000000000000000000\"}\n")
	err := k.Start(context.Background())
	if !errors.Is(err, kernel.ErrDiskFull) || !strings.Contains(err.Error(), "data dir "+dir) || !strings.Contains(err.Error(), "sluice.data.dir.reserve.bytes") {
		t.Fatalf("Start: %v", err)
	}
	// The failed start released the lock.
	k = kernelOn(t, dir, "configs: {sluice.data.dir.reserve.bytes: \"0\"}\n")
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	if err := k.Info().AdmitWrite(1 << 40); err != nil {
		t.Fatalf("reserve 0: %v", err)
	}
	if k.Info().Disk == nil {
		t.Fatal("BrokerInfo.Disk not set")
	}
}

func TestDataDirReserveInvalid(t *testing.T) {
	k := kernelOn(t, t.TempDir(), "configs: {sluice.data.dir.reserve.bytes: \"-1\"}\n")
	if err := k.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "sluice.data.dir.reserve.bytes") {
		t.Fatalf("Start: %v", err)
	}
}
