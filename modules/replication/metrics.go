package replication

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/kernel"
)

// Replication metrics:
//
//	sluice_under_replicated_partitions      led partitions whose ISR is smaller than
//	                                        their replica set (Kafka's
//	                                        UnderReplicatedPartitions: each leader
//	                                        counts its own, so the cluster's is the
//	                                        sum over brokers)
//	sluice_under_min_isr_partitions         led partitions whose ISR is below
//	                                        min.insync.replicas (acks=all writes fail)
//	sluice_offline_replicas                 replicas whose log is offline (corrupt)
//	sluice_isr_shrinks_total, sluice_isr_expands_total
//	                                        changes of the ISR of a partition this
//	                                        broker leads, within a leader epoch
//	sluice_leader_elections_total           leader epochs this broker started for a
//	                                        partition it held (summed over brokers:
//	                                        the cluster's elections)
//	sluice_topic_bytes_in_total{topic}      record batch bytes appended as leader
//	sluice_topic_records_in_total{topic}    records appended as leader
//	sluice_topic_bytes_out_total{topic}     record batch bytes sent to consumers
//	                                        (followers' fetches are not counted)
//	sluice_replication_throttled_rate_bytes{side}
//	                                        bytes/s replicated for throttled replicas
//	                                        out of their ISR (side leader: sent to
//	                                        followers; follower: fetched), measured as
//	                                        the throttle measures it (throttle.go)
//	sluice_topic_records_out_total{topic}   offsets sent to consumers: from the
//	                                        fetch offset to the read's NextOffset
//	                                        (records, and the control records and
//	                                        compaction gaps between them; a log that
//	                                        gives no NextOffset counts none)
//
// The partition gauges are one pass over the open partitions per scrape. The topic
// counters are atomics each partition reaches through a pointer it took when it was
// opened, so the produce and fetch paths pay an atomic add and no lookup; a topic's
// series stays while this broker holds a partition of it.

// topicStats are one topic's traffic counters on this broker.
type topicStats struct{ bytesIn, recordsIn, bytesOut, recordsOut atomic.Int64 }

// in counts an append of bytes holding records (s may be nil: a partition built
// without a module, in tests).
func (s *topicStats) in(bytes, records int64) {
	if s != nil {
		s.bytesIn.Add(bytes)
		s.recordsIn.Add(records)
	}
}

// out counts bytes, and the offsets they span, sent to a consumer.
func (s *topicStats) out(bytes, offsets int64) {
	if s != nil && bytes > 0 {
		s.bytesOut.Add(bytes)
		s.recordsOut.Add(offsets)
	}
}

// topicStatsMap holds every topic's counters.
type topicStatsMap struct{ m sync.Map } // topic name -> *topicStats

// get returns topic's counters, creating them on first use.
func (t *topicStatsMap) get(topic string) *topicStats {
	if t == nil {
		return nil
	}
	if s, ok := t.m.Load(topic); ok {
		return s.(*topicStats)
	}
	s, _ := t.m.LoadOrStore(topic, &topicStats{})
	return s.(*topicStats)
}

// replicationCollector is the scrape-time view of the partitions and topics.
type replicationCollector struct {
	m                                                            *Module
	underReplicated, underMinISR, offline                        *prometheus.Desc
	topicBytesIn, topicRecordsIn, topicBytesOut, topicRecordsOut *prometheus.Desc
	throttledRate                                                *prometheus.Desc
}

func (m *Module) registerMetrics(mt *kernel.Metrics) {
	reg := mt.Registerer()
	if m.env != nil {
		m.env.isrShrinks = mt.Counter("sluice_isr_shrinks_total", "ISR shrinks of partitions this broker leads (its own proposals, or the controller removing a fenced broker).")
		m.env.isrExpands = mt.Counter("sluice_isr_expands_total", "ISR expansions of partitions this broker leads.")
		m.env.elections = mt.Counter("sluice_leader_elections_total",
			"Leader epochs this broker started for partitions it already held: it was elected leader (not its first placement after a restart).")
	}
	topic := []string{"topic"}
	reg.MustRegister(&replicationCollector{
		m: m,
		underReplicated: prometheus.NewDesc("sluice_under_replicated_partitions",
			"Partitions this broker leads whose ISR is smaller than their replica set.", nil, nil),
		underMinISR: prometheus.NewDesc("sluice_under_min_isr_partitions",
			"Partitions this broker leads whose ISR is below min.insync.replicas (acks=all produces fail).", nil, nil),
		offline: prometheus.NewDesc("sluice_offline_replicas",
			"Replicas on this broker whose log is offline (a corrupt stored batch or a failed log dir; KAFKA_STORAGE_ERROR).", nil, nil),
		topicBytesIn: prometheus.NewDesc("sluice_topic_bytes_in_total",
			"Record batch bytes appended to a topic on this broker as leader.", topic, nil),
		topicRecordsIn: prometheus.NewDesc("sluice_topic_records_in_total",
			"Records appended to a topic on this broker as leader.", topic, nil),
		topicBytesOut: prometheus.NewDesc("sluice_topic_bytes_out_total",
			"Record batch bytes of a topic this broker sent to consumers (not to followers).", topic, nil),
		topicRecordsOut: prometheus.NewDesc("sluice_topic_records_out_total",
			"Offsets of a topic this broker sent to consumers: its records, with the control records and compaction gaps among them.", topic, nil),
		throttledRate: prometheus.NewDesc("sluice_replication_throttled_rate_bytes",
			"Bytes per second replicated for throttled replicas out of their ISR (leader.replication.throttled.rate, follower.replication.throttled.rate), by side.", []string{"side"}, nil),
	})
}

func (c *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.underReplicated, c.underMinISR, c.offline, c.topicBytesIn, c.topicRecordsIn, c.topicBytesOut, c.topicRecordsOut, c.throttledRate} {
		ch <- d
	}
}

func (c *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.RLock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	m.mu.RUnlock()
	var under, underMin, offline int
	topics := map[string]*topicStats{}
	for _, p := range parts {
		topics[p.tp.Topic] = p.stats
		if p.offline.Load() {
			offline++
		}
		pl := p.place.Load()
		if pl.leader != p.self {
			continue
		}
		if len(pl.isr) < len(pl.replicas) {
			under++
		}
		if pl.cfg != nil && len(pl.isr) < int(pl.cfg.MinInsyncReplicas) {
			underMin++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.underReplicated, prometheus.GaugeValue, float64(under))
	ch <- prometheus.MustNewConstMetric(c.underMinISR, prometheus.GaugeValue, float64(underMin))
	ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, float64(offline))
	if rc := m.rcfg.Load(); rc != nil {
		now := m.now()
		ch <- prometheus.MustNewConstMetric(c.throttledRate, prometheus.GaugeValue, m.rthrottle.rate(leaderSide, rc, now), "leader")
		ch <- prometheus.MustNewConstMetric(c.throttledRate, prometheus.GaugeValue, m.rthrottle.rate(followerSide, rc, now), "follower")
	}
	for name, s := range topics {
		if s == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.topicBytesIn, prometheus.CounterValue, float64(s.bytesIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.topicRecordsIn, prometheus.CounterValue, float64(s.recordsIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.topicBytesOut, prometheus.CounterValue, float64(s.bytesOut.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.topicRecordsOut, prometheus.CounterValue, float64(s.recordsOut.Load()), name)
	}
	// Topics no partition here belongs to any more are forgotten (a topic deleted
	// and created again starts from zero, which Prometheus reads as a reset).
	m.stats.m.Range(func(k, _ any) bool {
		if _, ok := topics[k.(string)]; !ok {
			m.stats.m.Delete(k)
		}
		return true
	})
}
