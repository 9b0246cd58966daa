package groups

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
// The lag of a partition with a replica on the coordinator (leader or follower;
// kernel.ReplicaOffsets) costs one high watermark read and, when it lags, one index
// lookup and one batch header read. For a partition with no replica here both come
// from its leader, asked off the scrape path (kernel.LeaderOffsets: one ListOffsets
// and one small Fetch per leader broker at most every 5 s, started by a scrape and
// used by the next; a partition where groups stand at several offsets gets a fetch
// round per offset, at most 8); its time lag is left out while unknown (a batch over
// 64 KiB). With sluice.metrics.partition.series=false the lag families drop the
// partition label: the lag summed over a topic's partitions, the time lag the
// largest.
type groupCollector struct {
	m          *Module
	offs       kernel.ReplicaOffsets // nil: no lag families
	leaders    kernel.LeaderOffsets  // nil: partitions without a replica here are left out
	partitions bool
	remote     remoteHWs

	lag, lagSeconds, members, state, generation                                         *prometheus.Desc
	pluginUp, pluginCalls, pluginErrors, pluginFallbacks, pluginRestarts, pluginLatency *prometheus.Desc
}

func newGroupCollector(m *Module, ro kernel.ReplicaOffsets, lo kernel.LeaderOffsets, partitions bool) *groupCollector {
	lagLabels := []string{"group", "topic", "partition"}
	if !partitions {
		lagLabels = lagLabels[:2]
	}
	return &groupCollector{
		m: m, offs: ro, leaders: lo, partitions: partitions, remote: remoteHWs{vals: map[kernel.TopicPartition]int64{}},
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
func (m *Module) registerMetrics(mt *kernel.Metrics, ro kernel.ReplicaOffsets, lo kernel.LeaderOffsets) {
	b := kconfig.ResolveBroker(kconfig.MergeBroker(m.broker.StaticConfigs, nil, nil))
	mt.Registerer().MustRegister(newGroupCollector(m, ro, lo, b.SluiceMetricsPartitions))
}

// remoteRefreshEvery is how stale the leaders' high watermarks may get before a
// scrape starts asking again.
const remoteRefreshEvery = 5 * time.Second

// remoteHWs caches the high watermarks of partitions with no replica here, asked of
// their leaders off the scrape path: a scrape uses what the last refresh learned and
// starts the next one when it is older than remoteRefreshEvery (one at a time).
type remoteHWs struct {
	mu         sync.Mutex
	vals       map[kernel.TopicPartition]int64
	ts         map[offsetAt]int64 // the batch timestamp at a partition's offset
	at         time.Time
	refreshing bool
}

// offsetAt is an offset of a partition.
type offsetAt struct {
	tp     kernel.TopicPartition
	offset int64
}

// get returns tp's cached high watermark.
func (r *remoteHWs) get(tp kernel.TopicPartition) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hw, ok := r.vals[tp]
	return hw, ok
}

// timestamp returns the cached timestamp of tp's batch at offset.
func (r *remoteHWs) timestamp(tp kernel.TopicPartition, offset int64) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts, ok := r.ts[offsetAt{tp, offset}]
	return ts, ok
}

// maxTimestampRounds bounds the fetches one refresh sends a leader for the time lags:
// a partition on which more groups stand at different offsets gets the smallest
// offsets' times only.
const maxTimestampRounds = 8

// remoteWant is what a scrape found missing: partitions without a replica here, and
// for those behind, the committed offsets to ask the times of.
type remoteWant struct {
	tps []kernel.TopicPartition
	at  map[offsetAt]bool
}

func (w *remoteWant) behind(tp kernel.TopicPartition, offset int64) {
	if w.at == nil {
		w.at = map[offsetAt]bool{}
	}
	w.at[offsetAt{tp, offset}] = true
}

// rounds splits the wanted offsets into fetches of one offset per partition: round i
// asks each partition's i-th smallest offset.
func (w *remoteWant) rounds() []map[kernel.TopicPartition]int64 {
	byTP := map[kernel.TopicPartition][]int64{}
	for oa := range w.at {
		byTP[oa.tp] = append(byTP[oa.tp], oa.offset)
	}
	var out []map[kernel.TopicPartition]int64
	for tp, offs := range byTP {
		slices.Sort(offs)
		for i, off := range offs[:min(len(offs), maxTimestampRounds)] {
			if i == len(out) {
				out = append(out, map[kernel.TopicPartition]int64{})
			}
			out[i][tp] = off
		}
	}
	return out
}

// refresh asks the leaders of the wanted partitions in the background when the
// cache is stale: their high watermarks, then the timestamps at the offsets of those
// behind.
func (c *groupCollector) refresh(want remoteWant) {
	wanted := want.tps
	r := &c.remote
	r.mu.Lock()
	if r.refreshing || len(wanted) == 0 || c.m.now().Sub(r.at) < remoteRefreshEvery {
		r.mu.Unlock()
		return
	}
	r.refreshing = true
	r.mu.Unlock()
	slices.SortFunc(wanted, func(a, b kernel.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	wanted = slices.Compact(wanted) // a partition several groups commit on
	c.m.coord.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, remoteRefreshEvery)
		defer cancel()
		got := c.leaders.LeaderHighWatermarks(ctx, wanted)
		ts := map[offsetAt]int64{}
		for _, round := range want.rounds() {
			for tp, t := range c.leaders.LeaderBatchTimestamps(ctx, round) {
				ts[offsetAt{tp, round[tp]}] = t
			}
		}
		r.mu.Lock()
		r.vals, r.ts, r.at, r.refreshing = got, ts, c.m.now(), false
		r.mu.Unlock()
	})
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
	var wanted remoteWant
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
		c.collectLag(ch, e.id, &wanted)
	}
	c.refresh(wanted)
}

// topicLag is a topic's aggregate when partition series are off.
type topicLag struct {
	lag        int64
	lagSeconds float64
}

// collectLag emits group's lag families, adding to wanted the partitions it found no
// replica of here.
func (c *groupCollector) collectLag(ch chan<- prometheus.Metric, group string, wanted *remoteWant) {
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
		_, hw, local := c.offs.ReplicaOffsets(tp)
		if !local {
			if c.leaders == nil {
				continue
			}
			wanted.tps = append(wanted.tps, tp)
			var ok bool
			if hw, ok = c.remote.get(tp); !ok {
				continue
			}
		}
		lag := max(hw-cm.Offset, 0)
		// The time lag is the batch's timestamp: from a replica here, or as the
		// partition's leader last told it for this committed offset.
		var lagSeconds float64
		knownSeconds := lag == 0
		if lag > 0 {
			ts, ok := int64(0), false
			if local {
				ts, ok = c.offs.BatchTimestamp(tp, cm.Offset)
			} else {
				wanted.behind(tp, cm.Offset)
				ts, ok = c.remote.timestamp(tp, cm.Offset)
			}
			if ok {
				lagSeconds, knownSeconds = max(float64(nowMs-ts)/1000, 0), true
			}
		}
		if c.partitions {
			p := strconv.Itoa(int(tp.Partition))
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag), group, tp.Topic, p)
			if knownSeconds {
				ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, lagSeconds, group, tp.Topic, p)
			}
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
	switch g.kind() {
	case kindConsumer:
		return g.consumer.Size(), g.consumer.GroupEpoch()
	case kindShare:
		return g.share.Size(), g.share.GroupEpoch()
	}
	n, _ := g.classic.Size()
	return n, g.classic.Generation()
}
