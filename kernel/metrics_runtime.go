package kernel

import (
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// Go runtime and process metrics at /metrics: garbage collection (cycles, the longest
// stop-the-world pause, pauses over 1 ms and 5 ms), heap and goroutines, and the
// process's resident set size (Linux). They are read at scrape time from
// runtime/metrics (cheap: no stop-the-world) and /proc/self/status.

// runtimeMetrics reads the runtime samples once per scrape.
type runtimeMetrics struct {
	mu      sync.Mutex
	samples []metrics.Sample
}

const (
	rmGCCycles   = "/gc/cycles/total:gc-cycles"
	rmGCPauses   = "/sched/pauses/total/gc:seconds"
	rmHeap       = "/memory/classes/heap/objects:bytes"
	rmGoroutines = "/sched/goroutines:goroutines"
	rmMemLimit   = "/gc/gomemlimit:bytes"
)

func registerRuntimeMetrics(m *Metrics) {
	rm := &runtimeMetrics{samples: []metrics.Sample{{Name: rmGCCycles}, {Name: rmGCPauses}, {Name: rmHeap}, {Name: rmGoroutines}, {Name: rmMemLimit}}}
	// The runtime gauges and counters, in the order read returns them.
	for i, g := range []struct {
		name, help string
		kind       Kind
	}{
		{name: "sluice_go_gc_cycles_total", kind: KindCounter, help: "Completed garbage collection cycles."},
		{name: "sluice_go_gc_pause_max_seconds", kind: KindGauge, help: "Longest stop-the-world pause of the garbage collector since start (upper bound of its histogram bucket)."},
		{name: "sluice_go_gc_pauses_over_1ms_total", kind: KindCounter, help: "Garbage collector stop-the-world pauses longer than 1 ms (by histogram bucket)."},
		{name: "sluice_go_gc_pauses_over_5ms_total", kind: KindCounter, help: "Garbage collector stop-the-world pauses longer than 5 ms (by histogram bucket)."},
		{name: "sluice_go_heap_objects_bytes", kind: KindGauge, help: "Bytes of live and not yet swept heap objects."},
		{name: "sluice_go_goroutines", kind: KindGauge, help: "Goroutines."},
		{name: "sluice_go_memory_limit_bytes", kind: KindGauge, help: "The Go runtime's soft memory limit (sluice.memory.limit.bytes or GOMEMLIMIT); math.MaxInt64 when none."},
	} {
		m.Collect(g.name, g.help, g.kind, nil, func(emit func(float64, ...string)) {
			emit(rm.read()[i])
		})
	}
	m.Collect("sluice_process_resident_memory_bytes", "Resident set size of the broker process (VmRSS).", KindGauge, nil, func(emit func(float64, ...string)) {
		if v, ok := procStatusBytes("VmRSS:"); ok {
			emit(v)
		}
	})
	m.Collect("sluice_process_resident_memory_peak_bytes", "Peak resident set size of the broker process (VmHWM).", KindGauge, nil, func(emit func(float64, ...string)) {
		if v, ok := procStatusBytes("VmHWM:"); ok {
			emit(v)
		}
	})
}

// read returns GC cycles, the longest GC pause (s), pauses over 1 ms and over 5 ms,
// heap object bytes, goroutines and the soft memory limit.
func (rm *runtimeMetrics) read() [7]float64 {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	metrics.Read(rm.samples)
	var out [7]float64
	if s := rm.samples[0]; s.Value.Kind() == metrics.KindUint64 {
		out[0] = float64(s.Value.Uint64())
	}
	if s := rm.samples[1]; s.Value.Kind() == metrics.KindFloat64Histogram {
		out[1], out[2], out[3] = pauseStats(s.Value.Float64Histogram())
	}
	if s := rm.samples[2]; s.Value.Kind() == metrics.KindUint64 {
		out[4] = float64(s.Value.Uint64())
	}
	if s := rm.samples[3]; s.Value.Kind() == metrics.KindUint64 {
		out[5] = float64(s.Value.Uint64())
	}
	if s := rm.samples[4]; s.Value.Kind() == metrics.KindUint64 {
		out[6] = float64(s.Value.Uint64())
	}
	return out
}

// pauseStats returns the upper bound of the highest non-empty bucket (the longest
// pause, at the histogram's resolution) and the counts of buckets that lie wholly above
// 1 ms and 5 ms. Bucket i spans [Buckets[i], Buckets[i+1]).
func pauseStats(h *metrics.Float64Histogram) (maxPause, over1ms, over5ms float64) {
	for i, n := range h.Counts {
		if n == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		if math.IsInf(hi, 1) {
			hi = lo
		}
		maxPause = hi
		if lo >= 0.001 {
			over1ms += float64(n)
		}
		if lo >= 0.005 {
			over5ms += float64(n)
		}
	}
	return maxPause, over1ms, over5ms
}

// procStatusBytes reads a "Name:  N kB" line of /proc/self/status.
func procStatusBytes(field string) (float64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}
