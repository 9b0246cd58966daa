package kernel

import (
	"math"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
)

func TestMetricsCollect(t *testing.T) {
	m := NewMetrics()
	m.Counter("sluice_a_total", "a").Add(2)
	samples := []string{"x", "y"}
	m.Collect("sluice_b_total", "b per thing", KindCounter, []string{"thing"}, func(emit func(float64, ...string)) {
		for i, s := range samples {
			emit(float64(i+1), s)
		}
	})
	m.Collect("sluice_c", "c", KindGauge, nil, func(emit func(float64, ...string)) { emit(7) })
	var sb strings.Builder
	m.WriteText(&sb)
	want := `# HELP sluice_a_total a
# TYPE sluice_a_total counter
sluice_a_total 2
# HELP sluice_b_total b per thing
# TYPE sluice_b_total counter
sluice_b_total{thing="x"} 1
sluice_b_total{thing="y"} 2
# HELP sluice_c c
# TYPE sluice_c gauge
sluice_c 7
`
	if sb.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", sb.String(), want)
	}
	// A second registration replaces the first; a sample with the wrong labels is an
	// error of that family, not a panic, and the rest is still written.
	m.Collect("sluice_c", "c", KindGauge, nil, func(emit func(float64, ...string)) { emit(8) })
	m.Collect("sluice_d", "d", KindGauge, []string{"x"}, func(emit func(float64, ...string)) { emit(1) })
	sb.Reset()
	if err := m.WriteText(&sb); err == nil || !strings.Contains(sb.String(), "sluice_c 8") || strings.Contains(sb.String(), "sluice_c 7") {
		t.Fatalf("err %v after a replacement and a bad sample:\n%s", err, sb.String())
	}
	m.Collect("sluice_d", "d", KindGauge, []string{"x"}, func(emit func(float64, ...string)) { emit(1, "y") })
	// Samples come and go with what fn lists.
	samples = samples[:1]
	sb.Reset()
	m.WriteText(&sb)
	if strings.Contains(sb.String(), `thing="y"`) || !strings.Contains(sb.String(), `sluice_b_total{thing="x"} 1`) {
		t.Fatalf("after removing y:\n%s", sb.String())
	}
}

// The Go runtime and process metrics are in the exposition and change as the process
// runs.
func TestRuntimeMetrics(t *testing.T) {
	m := NewMetrics()
	registerRuntimeMetrics(m)
	value := func(name string) float64 {
		var b strings.Builder
		m.WriteText(&b)
		for _, line := range strings.Split(b.String(), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				v, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return v
			}
		}
		t.Fatalf("no sample %s in\n%s", name, b.String())
		return 0
	}
	before := value("sluice_go_gc_cycles_total")
	runtime.GC()
	if after := value("sluice_go_gc_cycles_total"); after <= before {
		t.Errorf("GC cycles %v after runtime.GC, %v before", after, before)
	}
	if v := value("sluice_go_gc_pause_max_seconds"); v <= 0 || v > 10 {
		t.Errorf("longest GC pause %v s after a GC", v)
	}
	if v := value("sluice_go_goroutines"); v < 1 {
		t.Errorf("goroutines %v", v)
	}
	if v := value("sluice_go_heap_objects_bytes"); v <= 0 {
		t.Errorf("heap %v bytes", v)
	}
	if runtime.GOOS == "linux" {
		if v := value("sluice_process_resident_memory_bytes"); v < 1<<20 {
			t.Errorf("RSS %v bytes", v)
		}
	}
}

func TestPauseStats(t *testing.T) {
	h := &metrics.Float64Histogram{
		Buckets: []float64{0, 0.0005, 0.001, 0.002, 0.005, 0.01, math.Inf(1)},
		Counts:  []uint64{10, 3, 2, 0, 1, 0},
	}
	maxPause, over1, over5 := pauseStats(h)
	if maxPause != 0.01 || over1 != 3 || over5 != 1 {
		t.Errorf("pauseStats = %v, %v, %v; want 0.01, 3, 1", maxPause, over1, over5)
	}
}
