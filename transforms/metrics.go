package transforms

import (
	"github.com/sluicehq/sluice/kernel"
)

// registerMetrics exports every deployed transform's counters at /metrics, one sample
// per transform labelled transform="<name>",mode="inline|derived". They are the
// counters `sluice transform list` shows: in memory on this broker, so they restart
// at zero when the broker restarts or the transform is redeployed (Prometheus treats
// that as a counter reset).
func (m *Module) registerMetrics(mt *kernel.Metrics) {
	counter := func(name, help string, v func(*Status) float64) {
		mt.Collect(name, help, kernel.KindCounter, metricLabels, func(emit func(float64, ...string)) {
			for _, s := range m.statuses() {
				emit(v(&s), s.Name, s.Mode)
			}
		})
	}
	gauge := func(name, help string, v func(*Status) float64) {
		mt.Collect(name, help, kernel.KindGauge, metricLabels, func(emit func(float64, ...string)) {
			for _, s := range m.statuses() {
				emit(v(&s), s.Name, s.Mode)
			}
		})
	}
	counter("sluice_transform_records_in_total", "Records passed to the transform.", func(s *Status) float64 { return float64(s.RecordsIn) })
	counter("sluice_transform_records_out_total", "Records the transform returned.", func(s *Status) float64 { return float64(s.RecordsOut) })
	counter("sluice_transform_batches_total", "Batches the transform ran on.", func(s *Status) float64 { return float64(s.Batches) })
	counter("sluice_transform_failures_total", "Batches the transform failed on (trap, timeout, bad output).", func(s *Status) float64 { return float64(s.Failures) })
	counter("sluice_transform_dropped_total", "Records dropped by the drop policy.", func(s *Status) float64 { return float64(s.Dropped) })
	counter("sluice_transform_dead_lettered_total", "Records written to the dead-letter topic.", func(s *Status) float64 { return float64(s.DeadLettered) })
	counter("sluice_transform_pauses_total", "Times the crash-loop breaker paused the transform.", func(s *Status) float64 { return float64(s.Pauses) })
	gauge("sluice_transform_latency_avg_seconds", "Moving average of the time one batch takes in the transform.", func(s *Status) float64 { return s.LatencyAvgUs / 1e6 })
	gauge("sluice_transform_running", "1 while the transform runs, 0 while paused or failed.", func(s *Status) float64 {
		if s.State == "running" {
			return 1
		}
		return 0
	})
}

// metricLabels are the labels of every transform sample.
var metricLabels = []string{"transform", "mode"}
