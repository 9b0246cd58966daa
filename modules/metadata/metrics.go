package metadata

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/kernel"
)

// Metadata metrics:
//
//	sluice_metadata_image_version      index of the last entry applied to the image
//	sluice_metadata_is_controller      1 on the raft leader (Kafka's
//	                                   ActiveControllerCount)
//	sluice_metadata_commit_seconds     histogram: a proposal's time from raft.Apply to
//	                                   committed and applied, on the controller
//	sluice_offline_partitions          partitions without a leader (Kafka's
//	                                   OfflinePartitionsCount); reported by the
//	                                   controller alone, 0 elsewhere, so the cluster's
//	                                   count is the sum over brokers
//	sluice_brokers{state}              registered brokers, "active" or "fenced", as
//	                                   the controller sees them (controller alone)
//
// The controller's figures are one pass over the image per scrape.
type metadataCollector struct {
	m                *Module
	offline, brokers *prometheus.Desc
}

func (m *Module) registerMetrics(mt *kernel.Metrics) {
	mt.Gauge("sluice_metadata_image_version", "Index of the last metadata entry applied to this broker's image.",
		func() float64 { return float64(m.node.hub.image().Version) })
	mt.Gauge("sluice_metadata_is_controller", "1 if this broker is the metadata raft leader (the active controller).",
		func() float64 { return b2f(m.isController()) })
	commit := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_metadata_commit_seconds",
		Help:    "Time from a metadata proposal to its entry committed by the raft quorum and applied, on the controller.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}})
	m.node.commitTime = commit
	mt.Registerer().MustRegister(commit, &metadataCollector{
		m: m,
		offline: prometheus.NewDesc("sluice_offline_partitions",
			"Partitions without a leader, as the active controller sees them (0 on other brokers).", nil, nil),
		brokers: prometheus.NewDesc("sluice_brokers",
			"Registered brokers by state (active or fenced), as the active controller sees them (none on other brokers).", []string{"state"}, nil),
	})
}

// isController reports whether this node leads raft.
func (m *Module) isController() bool {
	r := m.node.raft.Load()
	return r != nil && r.State() == raft.Leader
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *metadataCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.offline
	ch <- c.brokers
}

func (c *metadataCollector) Collect(ch chan<- prometheus.Metric) {
	offline := 0
	if !c.m.isController() {
		ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, 0)
		return
	}
	im := c.m.node.hub.image()
	for _, t := range im.Topics() {
		for i := range t.Partitions {
			if t.Partitions[i].Leader < 0 {
				offline++
			}
		}
	}
	active, fenced := 0, 0
	for _, b := range im.Brokers {
		if b.Fenced {
			fenced++
		} else {
			active++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, float64(offline))
	ch <- prometheus.MustNewConstMetric(c.brokers, prometheus.GaugeValue, float64(active), "active")
	ch <- prometheus.MustNewConstMetric(c.brokers, prometheus.GaugeValue, float64(fenced), "fenced")
}
