package telemetry

import (
	"github.com/sluicehq/sluice/kernel"
)

// registerMetrics adds the module's families to /metrics.
func (m *Module) registerMetrics(mt *kernel.Metrics) {
	m.pushes = mt.Counter("sluice_client_telemetry_pushes_total", "Client metrics pushes accepted (PushTelemetry, KIP-714).")
	m.refused = mt.Counter("sluice_client_telemetry_refused_total", "Client metrics pushes refused (too early, outdated subscription, too large, undecodable, ...).")
	m.dropped = mt.Counter("sluice_client_telemetry_dropped_total", "Pushes some of whose points were dropped because max_series series exist.")
	mt.Gauge("sluice_client_telemetry_clients", "Client instances this broker remembers (GetTelemetrySubscriptions, PushTelemetry).", func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return float64(len(m.clients))
	})
	mt.Collect("sluice_client_metric", "The latest value of each metric clients pushed (KIP-714): the metric's OTLP name, its data point's attributes.",
		kernel.KindGauge, []string{"client_id", "client_instance_id", "client_software", "metric", "attributes"},
		func(emit func(v float64, labelValues ...string)) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.expireLocked(m.now())
			for _, c := range m.clients {
				id := formatUUID(c.id)
				sw := c.info.SoftwareName
				if c.info.SoftwareVersion != "" {
					sw += "/" + c.info.SoftwareVersion
				}
				for k, v := range c.series {
					emit(v, c.info.ClientID, id, sw, k.metric, k.attrs)
				}
			}
		})
}
