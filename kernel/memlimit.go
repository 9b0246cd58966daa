package kernel

import (
	"fmt"
	"os"
)

// The broker process's soft memory limit (sluice.memory.limit.bytes), handed to the Go
// runtime (runtime/debug.SetMemoryLimit) by the process that owns the kernel: the limit
// is process-wide, so the kernel only resolves it and never sets it (several kernels
// share one process in tests).
//
// Why a broker needs one: with GOGC alone the heap may grow to twice what was live at
// the last collection, and the runtime returns freed pages to the OS slowly. Reopening
// 100,000 partitions after a restart leaves ~180 MiB live but ~1.4 GiB resident; with a
// soft limit of 640 MiB the same run peaks at 655 MiB (docs/BENCHMARKS.md). The limit is
// soft: a live heap above it is not an error, the collector runs more often (the
// runtime caps that at about half the CPU) and RSS follows the live heap.

// MemoryLimitConfig is the broker config naming the soft memory limit.
const MemoryLimitConfig = "sluice.memory.limit.bytes"

// cgroupLimitShare is the part of a cgroup's memory limit the automatic setting takes:
// the rest is for memory the Go runtime does not manage (mmapped offset-store tables,
// WASM code, page cache charged to the cgroup).
const cgroupLimitShare = 0.8

// minMemoryLimit is the smallest explicit limit accepted: below it the collector would
// run constantly for the broker's baseline alone.
const minMemoryLimit = 64 << 20

// MemoryLimit is a resolved soft memory limit.
type MemoryLimit struct {
	// Bytes is the limit; 0 means none (the runtime's default, GOGC only).
	Bytes int64
	// Source says where it came from: "config", "cgroup", "GOMEMLIMIT" (the environment
	// variable, which the runtime already applied and which wins) or "none".
	Source string
	// Budgets is queued.max.request.bytes + queued.max.decompressed.bytes (0 when either
	// is unbounded): memory that floods may legitimately fill. A limit below it makes the
	// collector work hard exactly when the broker is busiest; Warn says so.
	Budgets int64
}

// Warn returns a line worth logging about the limit, or "".
func (m MemoryLimit) Warn() string {
	if m.Bytes > 0 && m.Budgets > 0 && m.Bytes < m.Budgets {
		return fmt.Sprintf("the soft memory limit (%d bytes) is below the request and decompression budgets (%d bytes): under a flood the collector will run constantly", m.Bytes, m.Budgets)
	}
	return ""
}

// MemoryLimit resolves the soft memory limit from the broker config, the environment
// and the cgroup the process runs in (cgroup returns its memory limit, 0 for none).
//
//	sluice.memory.limit.bytes > 0    that many bytes
//	sluice.memory.limit.bytes = 0    (default) 80% of the cgroup's memory limit if it has one, else none
//	sluice.memory.limit.bytes = -1   none
//
// GOMEMLIMIT in the environment overrides all of them, as it does for any Go program.
func (c *Config) MemoryLimit(cgroup func() (uint64, error)) (MemoryLimit, error) {
	v, err := c.brokerInt(MemoryLimitConfig, 0)
	if err != nil {
		return MemoryLimit{}, err
	}
	if v < -1 || (v > 0 && v < minMemoryLimit) {
		return MemoryLimit{}, fmt.Errorf("config: %s %d: want -1 (none), 0 (automatic) or at least %d", MemoryLimitConfig, v, minMemoryLimit)
	}
	m := MemoryLimit{Source: "none"}
	req, err := c.brokerInt("queued.max.request.bytes", DefaultQueuedMaxRequestBytes)
	if err != nil {
		return MemoryLimit{}, err
	}
	dec, err := c.brokerInt("queued.max.decompressed.bytes", 256<<20)
	if err != nil {
		return MemoryLimit{}, err
	}
	if req > 0 && dec > 0 {
		m.Budgets = req + dec
	}
	if env, ok := os.LookupEnv("GOMEMLIMIT"); ok && env != "" && env != "off" {
		m.Source = "GOMEMLIMIT"
		return m, nil
	}
	switch {
	case v > 0:
		m.Bytes, m.Source = v, "config"
	case v == 0 && cgroup != nil:
		lim, err := cgroup()
		// No cgroup, no limit in it ("max", or v1's near-2^63) or an unreadable one all
		// mean: leave the runtime alone.
		if err == nil && lim > 0 && lim < 1<<62 {
			m.Bytes, m.Source = int64(float64(lim)*cgroupLimitShare), "cgroup"
		}
	}
	return m, nil
}
