package groups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/modules/groups/classic"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// ID is the module's ID.
const ID = "groups.coordinator"

// OffsetsTopic is the internal topic that holds committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

// Info registers the module.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: ID, New: func() kernel.Module { return New() }}
}

// Module is the group coordinator: FindCoordinator, the classic group protocol, the
// KIP-848 consumer group protocol, and committed offsets.
type Module struct {
	// Assignors are the server-side assignors of KIP-848 groups in the broker's
	// order of preference (Kafka's group.consumer.assignors); the first is the
	// default. Each names a groups.assignor guest (the built-ins "uniform", "range")
	// or is an assignor plugin (a mapping: see AssignorConfig, guests.go, plugins.go).
	Assignors []AssignorConfig `yaml:"assignors"`
	// OffsetsRaw picks the offset store, a groups.offsets guest (guests.go): badger
	// (the default) or memory, by name or as {use: name, ...its settings}.
	OffsetsRaw yaml.Node `yaml:"offsets"`
	// SweepIntervalMs is how often the coordinator fires group timers (session and
	// rebalance timeouts) and checks which __consumer_offsets partitions it leads.
	SweepIntervalMs int64 `yaml:"sweep_interval_ms"`
	// LoadWaitMs is how long a request waits for its group's partition to load before
	// it is answered COORDINATOR_LOAD_IN_PROGRESS.
	LoadWaitMs int64 `yaml:"load_wait_ms"`
	// EmptyGroupIdleMs is how long an empty group stays in memory; its offsets stay
	// in the store (and it is recreated on use) until offsets.retention.minutes.
	EmptyGroupIdleMs int64 `yaml:"empty_group_idle_ms"`

	log            *slog.Logger
	broker         kernel.BrokerInfo
	meta           kernel.Metadata
	creator        kernel.TopicCreator
	parts          kernel.Partitions
	now            func() time.Time
	assignors      []assignor.Assignor
	plugins        []*pluginAssignor            // the plugin-backed ones among assignors
	guests         *kernel.Registry             // the broker's registry; nil if never provisioned
	offsetsGuest   OffsetsGuest                 // from OffsetsRaw; opens store at Start
	poffs          kernel.PartitionOffsets      // nil if replication does not offer it
	txnLocator     kernel.TxnCoordinatorLocator // nil without a transaction coordinator
	txnVerifier    kernel.TxnVerifier           // nil if the transaction coordinator does not verify
	groupCfgLogged sync.Map                     // group id + "\x00" + configured assignor → logged once

	store    offsets.View
	settings atomic.Pointer[settings]

	commits *kernel.Counter

	mu       sync.Mutex
	shards   map[int32]*shard // __consumer_offsets partitions this broker coordinates
	stopping bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup // shard loaders and writers, the sweeper
}

// New returns a module with default settings and no side effects.
func New() *Module {
	return &Module{
		Assignors:        []AssignorConfig{{Name: "uniform"}, {Name: "range"}},
		SweepIntervalMs:  100,
		LoadWaitMs:       2000,
		EmptyGroupIdleMs: 60_000,
	}
}

// settings are the broker configs the coordinator follows, refreshed by the sweeper.
type settings struct {
	offsetsPartitions int32
	offsetsRF         int16
	retention         time.Duration
	retentionCheck    time.Duration
	metadataMax       int
	classic           classic.Config
	consumerSession   time.Duration
	consumerHeartbeat time.Duration
	consumerMaxSize   int
}

func (m *Module) readSettings(im *kernel.Image) *settings {
	var dynDefault, dynNode map[string]string
	if im != nil {
		dynDefault = im.BrokerConfigs[""]
		dynNode = im.BrokerConfigs[strconv.FormatInt(int64(m.broker.NodeID), 10)]
	}
	b := kconfig.ResolveBroker(kconfig.MergeBroker(m.broker.StaticConfigs, dynDefault, dynNode))
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	delay := ms(b.GroupInitialRebalanceDelayMs)
	if delay == 0 {
		delay = -1 // classic.Config: 0 means the default, negative means none
	}
	return &settings{
		offsetsPartitions: b.OffsetsTopicNumPartitions,
		offsetsRF:         b.OffsetsTopicReplicationFactor,
		retention:         ms(b.OffsetsRetentionMs),
		retentionCheck:    ms(b.OffsetsRetentionCheckIntervalMs),
		metadataMax:       int(b.OffsetMetadataMaxBytes),
		classic: classic.Config{
			MaxSize:               int(b.GroupMaxSize),
			InitialRebalanceDelay: delay,
			MinSessionTimeout:     ms(b.GroupMinSessionTimeoutMs),
			MaxSessionTimeout:     ms(b.GroupMaxSessionTimeoutMs),
		},
		consumerSession:   ms(b.GroupConsumerSessionTimeoutMs),
		consumerHeartbeat: ms(b.GroupConsumerHeartbeatIntervalMs),
		consumerMaxSize:   int(b.GroupConsumerMaxSize),
	}
}

// Provision looks up metadata and replication and claims the group API keys.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log = ctx.Logger()
	m.broker = ctx.Broker()
	if gr, ok := ctx.(kernel.GuestRegistry); ok {
		m.guests = gr.Registry()
	}
	if m.now == nil {
		m.now = time.Now
	}
	var err error
	if m.meta, err = kernel.LookupAs[kernel.Metadata](ctx, "metadata"); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	if m.creator, err = kernel.LookupAs[kernel.TopicCreator](ctx, "metadata"); err != nil {
		return fmt.Errorf("groups: internal topics: %w", err)
	}
	if m.parts, err = kernel.LookupAs[kernel.Partitions](ctx, "replication"); err != nil {
		return fmt.Errorf("groups: internal topics: %w", err)
	}
	m.poffs, _ = kernel.LookupAs[kernel.PartitionOffsets](ctx, "replication")
	// Transactions are optional: without a "txn" module FindCoordinator type 1 answers
	// COORDINATOR_NOT_AVAILABLE; without the marker hook transactional offset commits
	// become visible only when a load replays their marker (logged).
	m.txnLocator, _ = kernel.LookupAs[kernel.TxnCoordinatorLocator](ctx, "txn")
	m.txnVerifier, _ = kernel.LookupAs[kernel.TxnVerifier](ctx, "txn")
	if hook, err := kernel.LookupAs[kernel.TxnMarkerHook](ctx, "replication"); err == nil {
		hook.AddTxnMarkerListener(m.onTxnMarker)
	} else if m.txnLocator != nil {
		m.log.Warn("the replication module has no transaction marker hook; transactional offset commits apply only on reload", "err", err)
	}
	m.settings.Store(m.readSettings(nil))
	m.shards = map[int32]*shard{}
	m.commits = &kernel.Counter{}
	if mt := ctx.Metrics(); mt != nil {
		m.commits = mt.Counter("sluice_group_offset_commits_total", "Offsets committed (one per partition).")
		mt.Gauge("sluice_groups", "Groups in memory on this coordinator.", func() float64 { return float64(m.groupCount()) })
	}
	ctx.HandleHTTP("GET /v1/plugins", http.HandlerFunc(m.servePlugins))
	if err := kernel.ClaimAll(ctx, m.claims()...); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	return nil
}

// Validate checks the settings and makes the guests they name (loadGuests).
func (m *Module) Validate() error {
	switch {
	case m.SweepIntervalMs <= 0:
		return errors.New("groups: sweep_interval_ms must be > 0")
	case m.LoadWaitMs < 0:
		return errors.New("groups: load_wait_ms must be >= 0")
	case m.EmptyGroupIdleMs < 0:
		return errors.New("groups: empty_group_idle_ms must be >= 0")
	case len(m.Assignors) == 0:
		return errors.New("groups: assignors must name at least one assignor")
	}
	return m.loadGuests()
}

// Start opens the offset store and starts the sweeper.
func (m *Module) Start(ctx context.Context) error {
	st, err := m.offsetsGuest.OpenOffsets(m.broker, m.log)
	if err != nil {
		return fmt.Errorf("groups: open offset store: %w", err)
	}
	m.store = st
	bg, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.cancel = cancel
	m.mu.Unlock()
	m.wg.Add(1)
	go m.sweeper(bg)
	m.startPlugins()
	return nil
}

// Stop unloads every group (waiting requests get NOT_COORDINATOR), stops the
// sweeper, loaders and writers and waits for them.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	m.stopping = true
	cancel := m.cancel
	shards := m.shards
	m.shards = map[int32]*shard{}
	m.mu.Unlock()
	for _, s := range shards {
		s.unload(kerr.NotCoordinator)
	}
	if cancel != nil {
		cancel()
	}
	perr := m.stopPlugins(ctx) // after the groups are dead: no new calls, in-flight ones finish
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		if perr != nil {
			return fmt.Errorf("groups: stop: %w", perr)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("groups: stop: %w", ctx.Err())
	}
}

// Cleanup closes the offset store.
func (m *Module) Cleanup() error {
	if m.store == nil {
		return nil
	}
	return m.store.Close()
}

// sweeper fires group timers, follows which __consumer_offsets partitions this broker
// leads (loading and unloading shards), and expires offsets.
func (m *Module) sweeper(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(time.Duration(m.SweepIntervalMs) * time.Millisecond)
	defer t.Stop()
	var lastExpire time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		im := m.meta.Image()
		set := m.readSettings(im)
		m.settings.Store(set)
		m.followLeadership(im)
		now := m.now()
		for _, s := range m.loadedShards() {
			s.tick(now, time.Duration(m.EmptyGroupIdleMs)*time.Millisecond)
		}
		if now.Sub(lastExpire) >= set.retentionCheck {
			lastExpire = now
			for _, s := range m.loadedShards() {
				s.expireOffsets(ctx, now, set.retention)
			}
		}
	}
}

// followLeadership loads the partitions of __consumer_offsets this broker leads and
// unloads the ones it no longer leads.
func (m *Module) followLeadership(im *kernel.Image) {
	t := im.Topic(OffsetsTopic)
	if t == nil {
		return
	}
	for p := range t.Partitions {
		_, _ = m.shard(int32(p)) // loads if led, unloads if not
	}
}

func (m *Module) loadedShards() []*shard {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*shard, 0, len(m.shards))
	for _, s := range m.shards {
		if s.loading.IsReady() {
			out = append(out, s)
		}
	}
	return out
}

func (m *Module) groupCount() int {
	n := 0
	for _, s := range m.loadedShards() {
		s.mu.Lock()
		n += len(s.groups)
		s.mu.Unlock()
	}
	return n
}

// shard returns the shard of __consumer_offsets partition p if this broker leads it,
// creating it (and starting its load) when it is new or the leader epoch changed.
func (m *Module) shard(p int32) (*shard, *kerr.Error) {
	tp := kernel.TopicPartition{Topic: OffsetsTopic, Partition: p}
	epoch, leads := m.parts.Leader(tp)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		return nil, kerr.CoordinatorNotAvailable
	}
	s := m.shards[p]
	if !leads {
		if s != nil {
			delete(m.shards, p)
			go s.unload(kerr.NotCoordinator)
		}
		return nil, kerr.NotCoordinator
	}
	if s != nil && s.epoch == epoch && !s.loading.Failed() {
		return s, nil
	}
	old := s
	if old != nil {
		go old.unload(kerr.NotCoordinator)
	}
	s = newShard(m, tp, epoch)
	s.prev = old
	m.shards[p] = s
	m.wg.Add(1)
	go s.load()
	return s, nil
}

// dropShard forgets s (if it is still the shard of its partition) after a failure
// that needs a reload; the next request or sweep loads the partition again.
func (m *Module) dropShard(s *shard, err *kerr.Error) {
	m.mu.Lock()
	if m.shards[s.tp.Partition] == s {
		delete(m.shards, s.tp.Partition)
	}
	m.mu.Unlock()
	s.unload(err)
}

// coordinatorFor returns the loaded shard that coordinates group, or the error code
// to answer: COORDINATOR_NOT_AVAILABLE (no __consumer_offsets yet, or its partition
// failed to load), NOT_COORDINATOR (another broker leads the partition) or
// COORDINATOR_LOAD_IN_PROGRESS (still replaying after LoadWaitMs).
func (m *Module) coordinatorFor(ctx context.Context, group string) (*shard, *kerr.Error) {
	t := m.meta.Image().Topic(OffsetsTopic)
	if t == nil || len(t.Partitions) == 0 {
		return nil, kerr.CoordinatorNotAvailable
	}
	s, e := m.shard(offsets.PartitionFor(group, int32(len(t.Partitions))))
	if e != nil {
		return nil, e
	}
	if e := s.loading.Wait(ctx, time.Duration(m.LoadWaitMs)*time.Millisecond); e != nil {
		return nil, e
	}
	return s, nil
}

// ensureOffsetsTopic creates __consumer_offsets if it does not exist (Kafka creates it
// on the first FindCoordinator for a group).
func (m *Module) ensureOffsetsTopic(ctx context.Context) (*kernel.TopicImage, error) {
	im := m.meta.Image()
	if t := im.Topic(OffsetsTopic); t != nil {
		return t, nil
	}
	set := m.settings.Load()
	rf := set.offsetsRF
	live := 0
	for _, b := range im.Brokers {
		if !b.Fenced {
			live++
		}
	}
	if live > 0 && int(rf) > live {
		m.log.Warn("fewer live brokers than offsets.topic.replication.factor; creating __consumer_offsets with fewer replicas",
			"offsets.topic.replication.factor", rf, "live_brokers", live)
		rf = int16(live)
	}
	return m.creator.CreateTopic(ctx, OffsetsTopic, set.offsetsPartitions, rf, map[string]string{
		"cleanup.policy":   "compact",
		"compression.type": "producer",
		"segment.bytes":    "104857600",
	})
}
