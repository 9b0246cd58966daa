package groups

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// Group metrics, computed at scrape time from state the coordinator already has (no
// work on the request path). Each broker reports the groups it coordinates: those of
// the __consumer_offsets partitions it leads, in memory or with committed offsets
// only.
//
//	sluice_consumer_group_lag{group,topic,partition}          high watermark minus
//	    the committed offset (0 when caught up)
//	sluice_consumer_group_lag_seconds{group,topic,partition}  now minus the timestamp
//	    of the first unconsumed record (its batch's first, so at most the producer's
//	    batching window early); 0 when caught up
//	sluice_consumer_group_members{group}
//	sluice_consumer_group_state{group,state}                  1 for the current state
//	sluice_consumer_group_generation{group}                   a classic group's
//	    generation or a KIP-848 group's epoch: it grows with every rebalance
//	sluice_assignor_plugin_{up,calls_total,errors_total,fallbacks_total,
//	    restarts_total,last_call_seconds}{assignor}           each assignor plugin
//
// The lag of a partition needs a replica of it on the coordinator (leader or
// follower; kernel.ReplicaOffsets): one high watermark read and, when it lags, one
// index lookup and one batch header read. Partitions with no replica here are left
// out. With sluice.metrics.partition.series=false the lag families drop the
// partition label: the lag summed over a topic's partitions, the time lag the
// largest.
type groupCollector struct {
	m          *Module
	offs       kernel.ReplicaOffsets // nil: no lag families
	partitions bool

	lag, lagSeconds, members, state, generation                                         *prometheus.Desc
	pluginUp, pluginCalls, pluginErrors, pluginFallbacks, pluginRestarts, pluginLatency *prometheus.Desc
}

func newGroupCollector(m *Module, ro kernel.ReplicaOffsets, partitions bool) *groupCollector {
	lagLabels := []string{"group", "topic", "partition"}
	if !partitions {
		lagLabels = lagLabels[:2]
	}
	return &groupCollector{
		m: m, offs: ro, partitions: partitions,
		lag: prometheus.NewDesc("sluice_consumer_group_lag",
			"Records a group has yet to consume: the high watermark minus its committed offset.", lagLabels, nil),
		lagSeconds: prometheus.NewDesc("sluice_consumer_group_lag_seconds",
			"How far behind a group is in time: now minus the timestamp of its first unconsumed record (0 when caught up).", lagLabels, nil),
		members: prometheus.NewDesc("sluice_consumer_group_members",
			"Members of a group this broker coordinates.", []string{"group"}, nil),
		state: prometheus.NewDesc("sluice_consumer_group_state",
			"1 for a group's current state (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead; Assigning, Reconciling for KIP-848 groups).", []string{"group", "state"}, nil),
		generation: prometheus.NewDesc("sluice_consumer_group_generation",
			"A classic group's generation or a KIP-848 group's epoch; it grows with every rebalance.", []string{"group"}, nil),
		pluginUp: prometheus.NewDesc("sluice_assignor_plugin_up",
			"1 while an assignor plugin's process serves, 0 while it is down (its fallback assigns).", []string{"assignor"}, nil),
		pluginCalls: prometheus.NewDesc("sluice_assignor_plugin_calls_total",
			"Assignments asked of an assignor plugin.", []string{"assignor"}, nil),
		pluginErrors: prometheus.NewDesc("sluice_assignor_plugin_errors_total",
			"Assignor plugin calls that failed (an error, a timeout, an invalid assignment).", []string{"assignor"}, nil),
		pluginFallbacks: prometheus.NewDesc("sluice_assignor_plugin_fallbacks_total",
			"Assignments made by an assignor plugin's built-in fallback.", []string{"assignor"}, nil),
		pluginRestarts: prometheus.NewDesc("sluice_assignor_plugin_restarts_total",
			"Times an assignor plugin's process was started again.", []string{"assignor"}, nil),
		pluginLatency: prometheus.NewDesc("sluice_assignor_plugin_last_call_seconds",
			"Duration of an assignor plugin's latest call.", []string{"assignor"}, nil),
	}
}

// registerMetrics registers the group families on mt.
func (m *Module) registerMetrics(mt *kernel.Metrics, ro kernel.ReplicaOffsets) {
	b := kconfig.ResolveBroker(kconfig.MergeBroker(m.broker.StaticConfigs, nil, nil))
	mt.Registerer().MustRegister(newGroupCollector(m, ro, b.SluiceMetricsPartitions))
}

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lag, c.lagSeconds, c.members, c.state, c.generation,
		c.pluginUp, c.pluginCalls, c.pluginErrors, c.pluginFallbacks, c.pluginRestarts, c.pluginLatency} {
		ch <- d
	}
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	for _, p := range m.PluginStats() {
		up := 0.0
		if p.State == PluginRunning {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.pluginUp, prometheus.GaugeValue, up, p.Name)
		ch <- prometheus.MustNewConstMetric(c.pluginCalls, prometheus.CounterValue, float64(p.Calls), p.Name)
		ch <- prometheus.MustNewConstMetric(c.pluginErrors, prometheus.CounterValue, float64(p.Errors), p.Name)
		ch <- prometheus.MustNewConstMetric(c.pluginFallbacks, prometheus.CounterValue, float64(p.Fallbacks), p.Name)
		ch <- prometheus.MustNewConstMetric(c.pluginRestarts, prometheus.CounterValue, float64(p.Restarts), p.Name)
		ch <- prometheus.MustNewConstMetric(c.pluginLatency, prometheus.GaugeValue, p.LastLatencyMs/1000, p.Name)
	}
	if m.coord == nil || m.store == nil {
		return
	}
	// Every group this broker coordinates, live (in memory) or with committed offsets
	// only (an empty group no longer kept in memory), in id order (see collectLag).
	type entry struct {
		id string
		g  *group // nil: offsets only
	}
	var all []entry
	led := map[int32]bool{}
	seen := map[string]bool{}
	for _, s := range m.loadedShards() {
		led[s.tp.Partition] = true
		for _, g := range s.allGroups() {
			all = append(all, entry{g.id, g})
			seen[g.id] = true
		}
	}
	if n := m.offsetsPartitions(); n > 0 && len(led) > 0 {
		if ids, err := m.store.Groups(); err == nil {
			for _, id := range ids {
				if !seen[id] && led[offsets.PartitionFor(id, n)] {
					all = append(all, entry{id: id})
				}
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.id, b.id) })
	for _, e := range all {
		members, gen, state := 0, int32(0), "Empty"
		if e.g != nil {
			members, gen = e.g.size()
			state = e.g.state()
		}
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(members), e.id)
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, 1, e.id, state)
		if e.g != nil {
			ch <- prometheus.MustNewConstMetric(c.generation, prometheus.GaugeValue, float64(gen), e.id)
		}
		c.collectLag(ch, e.id)
	}
}

// topicLag is a topic's aggregate when partition series are off.
type topicLag struct {
	lag        int64
	lagSeconds float64
}

// collectLag emits group's lag families.
func (c *groupCollector) collectLag(ch chan<- prometheus.Metric, group string) {
	if c.offs == nil {
		return
	}
	committed, err := c.m.store.FetchGroup(group)
	if err != nil || len(committed) == 0 {
		return
	}
	nowMs := c.m.now().UnixMilli()
	var byTopic map[string]*topicLag
	if !c.partitions {
		byTopic = map[string]*topicLag{}
	}
	// In the registry's order (label values compared as strings, labels by name:
	// group, partition, topic): it sorts each family's samples, which costs a scan
	// when they come sorted and a real sort of 10,000s of samples otherwise.
	tps := slices.SortedFunc(maps.Keys(committed), func(a, b offsets.TopicPartition) int {
		if c := cmpDecimal(a.Partition, b.Partition); c != 0 {
			return c
		}
		return strings.Compare(a.Topic, b.Topic)
	})
	for _, otp := range tps {
		cm := committed[otp]
		tp := kernel.TopicPartition{Topic: otp.Topic, Partition: otp.Partition}
		_, hw, ok := c.offs.ReplicaOffsets(tp)
		if !ok {
			continue
		}
		lag := max(hw-cm.Offset, 0)
		var lagSeconds float64
		if lag > 0 {
			if ts, ok := c.offs.BatchTimestamp(tp, cm.Offset); ok && nowMs > ts {
				lagSeconds = float64(nowMs-ts) / 1000
			}
		}
		if c.partitions {
			p := strconv.Itoa(int(tp.Partition))
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag), group, tp.Topic, p)
			ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, lagSeconds, group, tp.Topic, p)
			continue
		}
		t := byTopic[tp.Topic]
		if t == nil {
			t = &topicLag{}
			byTopic[tp.Topic] = t
		}
		t.lag += lag
		t.lagSeconds = max(t.lagSeconds, lagSeconds)
	}
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		t := byTopic[topic]
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(t.lag), group, topic)
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, t.lagSeconds, group, topic)
	}
}

// cmpDecimal compares a and b as their decimal strings compare ("10" < "9"),
// without allocating.
func cmpDecimal(a, b int32) int {
	var ab, bb [12]byte
	return bytes.Compare(strconv.AppendInt(ab[:0], int64(a), 10), strconv.AppendInt(bb[:0], int64(b), 10))
}

// size returns the group's members and its generation (classic) or epoch (KIP-848).
func (g *group) size() (members int, generation int32) {
	if g.consumer != nil {
		return g.consumer.Size(), g.consumer.GroupEpoch()
	}
	n, _ := g.classic.Size()
	return n, g.classic.Generation()
}
