package kernel_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

func TestMemoryLimitResolution(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	const gib = 1 << 30
	cgroup := func(lim uint64, err error) func() (uint64, error) {
		return func() (uint64, error) { return lim, err }
	}
	for _, tc := range []struct {
		name    string
		value   string // sluice.memory.limit.bytes, "" unset
		cgroup  func() (uint64, error)
		want    int64
		source  string
		wantErr string
	}{
		{name: "default outside a cgroup", cgroup: cgroup(0, errors.New("process is not in cgroup")), source: "none"},
		{name: "default in a limited cgroup", cgroup: cgroup(2*gib, nil), want: 2 * gib * 8 / 10, source: "cgroup"},
		{name: "default in an unlimited v1 cgroup", cgroup: cgroup(9223372036854771712, nil), source: "none"},
		{name: "explicit beats the cgroup", value: "671088640", cgroup: cgroup(2*gib, nil), want: 640 << 20, source: "config"},
		{name: "none", value: "-1", cgroup: cgroup(2*gib, nil), source: "none"},
		{name: "too small", value: "1048576", wantErr: "at least"},
		{name: "below -1", value: "-2", wantErr: "want -1"},
		{name: "not a number", value: "1GiB", wantErr: "not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &kernel.Config{Configs: map[string]string{}}
			if tc.value != "" {
				cfg.Configs[kernel.MemoryLimitConfig] = tc.value
			}
			m, err := cfg.MemoryLimit(tc.cgroup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), kernel.MemoryLimitConfig) {
					t.Fatalf("err %v, want one naming %s and %q", err, kernel.MemoryLimitConfig, tc.wantErr)
				}
				return
			}
			if err != nil || m.Bytes != tc.want || m.Source != tc.source {
				t.Fatalf("got %+v, %v; want %d from %s", m, err, tc.want, tc.source)
			}
		})
	}
}

func TestMemoryLimitEnvironmentWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	cfg := &kernel.Config{Configs: map[string]string{kernel.MemoryLimitConfig: "671088640"}}
	m, err := cfg.MemoryLimit(nil)
	if err != nil || m.Bytes != 0 || m.Source != "GOMEMLIMIT" {
		t.Fatalf("got %+v, %v; want the environment's limit left alone", m, err)
	}
}

func TestMemoryLimitBelowBudgetsWarns(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	cfg := &kernel.Config{Configs: map[string]string{kernel.MemoryLimitConfig: "134217728"}}
	m, err := cfg.MemoryLimit(nil)
	if err != nil || m.Budgets != 512<<20 || !strings.Contains(m.Warn(), "below the request and decompression budgets") {
		t.Fatalf("got %+v (warn %q), %v", m, m.Warn(), err)
	}
	cfg.Configs["queued.max.request.bytes"] = "-1"
	if m, _ := cfg.MemoryLimit(nil); m.Budgets != 0 || m.Warn() != "" {
		t.Fatalf("unbounded budget: got %+v (warn %q), want no budget sum", m, m.Warn())
	}
}

func TestMemoryLimitValidatedAtNew(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "echo.basic", New: func() kernel.Module { return &echoModule{Greeting: "hi"} }})
	cfg, err := kernel.ParseConfig([]byte(echoConfig + "configs: {sluice.memory.limit.bytes: \"100\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	if _, err := kernel.New(cfg, reg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), kernel.MemoryLimitConfig) {
		t.Fatalf("New: %v, want the bad limit refused", err)
	}
}
