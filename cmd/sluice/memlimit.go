package main

import (
	"log/slog"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/sluicehq/sluice/kernel"
)

// applyMemoryLimit gives the Go runtime the broker's soft memory limit
// (sluice.memory.limit.bytes; kernel/memlimit.go says how it is resolved). The serve
// command owns the process, so it is the one place that sets it.
func applyMemoryLimit(cfg *kernel.Config, log *slog.Logger) error {
	m, err := cfg.MemoryLimit(memlimit.FromCgroup)
	if err != nil {
		return err
	}
	if m.Bytes > 0 {
		debug.SetMemoryLimit(m.Bytes)
	}
	if m.Source != "none" {
		log.Info("soft memory limit", "bytes", debug.SetMemoryLimit(-1), "source", m.Source)
	}
	if w := m.Warn(); w != "" {
		log.Warn(w)
	}
	return nil
}
