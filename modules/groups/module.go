package groups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/internal/interbroker"
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

	// Share groups (KIP-932), with group.share.enable: shares serves the
	// share-partitions of the partitions this broker leads (share_leader.go), and
	// its sweep runs until shareStop; interbroker dials other brokers' coordinators.
	shares      *shareLeader
	waiter      kernel.PartitionWaiter // nil if replication does not offer it
	leaderOffs  kernel.LeaderOffsets   // nil if replication does not offer it
	interbroker *interbroker.Security
	shareDLQ    *kernel.Counter
	shareStop   context.CancelFunc
	shareDone   chan struct{}

	// assigning runs server-side assignments of classic groups (classic_assign.go);
	// each ends with its shard's context, and Stop waits for them.
	assigning sync.WaitGroup

	// coord holds the __consumer_offsets partitions this broker coordinates and runs
	// their loaders, writers and the sweeper.
	coord      *coordinator.Shards[*shard]
	lastExpire time.Time // the sweeper's
}

// New returns a module with default settings and no side effects.
func New() *Module {
	return &Module{
		Assignors:        []AssignorConfig{{Name: "uniform"}, {Name: "range"}},
		SweepIntervalMs:  100,
		LoadWaitMs:       2000,
		EmptyGroupIdleMs: 60_000,
		now:              time.Now,
	}
}

// settings are the broker configs the coordinator follows, refreshed by the sweeper.
type settings struct {
	offsetsPartitions int32
	offsetsRF         int16
	offsetsSegment    int64 // offsets.topic.segment.bytes
	retention         time.Duration
	retentionCheck    time.Duration
	metadataMax       int
	classic           classic.Config
	consumerSession   time.Duration
	consumerHeartbeat time.Duration
	consumerMaxSize   int
	migration         migrationPolicy // group.consumer.migration.policy
	share             shareSettings
}

// shareSettings are the broker configs of share groups (group.share.*).
type shareSettings struct {
	enable         bool
	session        time.Duration
	heartbeat      time.Duration
	maxSize        int
	lockDuration   time.Duration
	deliveryLimit  int
	maxRecordLocks int
}

func (m *Module) readSettings(im *kernel.Image) *settings {
	b := coordinator.BrokerConfig(m.broker, im)
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	delay := ms(b.GroupInitialRebalanceDelayMs)
	if delay == 0 {
		delay = -1 // classic.Config: 0 means the default, negative means none
	}
	return &settings{
		offsetsPartitions: b.OffsetsTopicNumPartitions,
		offsetsRF:         b.OffsetsTopicReplicationFactor,
		offsetsSegment:    b.OffsetsTopicSegmentBytes,
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
		migration:         migrationPolicy(strings.ToLower(b.GroupConsumerMigrationPolicy)),
		share: shareSettings{
			enable:         b.GroupShareEnable,
			session:        ms(b.GroupShareSessionTimeoutMs),
			heartbeat:      ms(b.GroupShareHeartbeatIntervalMs),
			maxSize:        int(b.GroupShareMaxSize),
			lockDuration:   ms(b.GroupShareRecordLockDurationMs),
			deliveryLimit:  int(b.GroupShareDeliveryCountLimit),
			maxRecordLocks: int(b.GroupSharePartitionMaxRecordLocks),
		},
	}
}

// Provision looks up metadata and replication and claims the group API keys.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log, m.broker = ctx.Logger(), ctx.Broker()
	if gr, ok := ctx.(kernel.GuestRegistry); ok {
		m.guests = gr.Registry()
	}
	if m.now == nil {
		m.now = time.Now
	}
	if err := coordinator.LookupDeps(ctx, &m.meta, &m.creator, &m.parts); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	m.coord = m.newCoordinator() // before the marker listener, which reads it
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
	m.commits, m.shareDLQ = &kernel.Counter{}, &kernel.Counter{}
	m.waiter, _ = kernel.LookupAs[kernel.PartitionWaiter](ctx, "replication")
	m.leaderOffs, _ = kernel.LookupAs[kernel.LeaderOffsets](ctx, "replication")
	var err error
	if m.interbroker, err = interbroker.New(m.broker, m.log.With("component", "tls")); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	if m.settings.Load().share.enable && m.poffs != nil {
		m.shares = newShareLeader(m)
	}
	if mt := ctx.Metrics(); mt != nil {
		m.commits = mt.Counter("sluice_group_offset_commits_total", "Offsets committed (one per partition).")
		m.shareDLQ = mt.Counter("sluice_share_records_delivery_limit_total", "Share group records archived because they reached the delivery count limit.")
		mt.Gauge("sluice_groups", "Groups in memory on this coordinator.", func() float64 { return float64(m.groupCount()) })
		ro, _ := kernel.LookupAs[kernel.ReplicaOffsets](ctx, "replication")
		lo, _ := kernel.LookupAs[kernel.LeaderOffsets](ctx, "replication")
		m.registerMetrics(mt, ro, lo)
	}
	ctx.HandleHTTP("GET /v1/plugins", http.HandlerFunc(m.servePlugins))
	if err := kernel.ClaimAll(ctx, m.claims()...); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	return nil
}

// Check runs Validate against the broker's registry before anything is provisioned, so
// an unknown assignor, offset store or guest key stops the broker before it touches
// its data dir.
func (m *Module) Check(cc kernel.CheckContext) error {
	m.guests = cc.Registry
	return m.Validate()
}

// Validate checks the settings and makes the guests they name (loadGuests).
func (m *Module) Validate() error {
	if err := coordinator.CheckIntervals(m.SweepIntervalMs, m.LoadWaitMs); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	switch {
	case m.EmptyGroupIdleMs < 0:
		return errors.New("groups: empty_group_idle_ms must be >= 0")
	case len(m.Assignors) == 0:
		return errors.New("groups: assignors must name at least one assignor")
	}
	return m.loadGuests()
}

// newCoordinator returns the skeleton that follows the __consumer_offsets partitions
// this broker leads, with this module's shards as their state.
func (m *Module) newCoordinator() *coordinator.Shards[*shard] {
	return coordinator.New(coordinator.Config{
		Topic: OffsetsTopic, NoTopic: kerr.CoordinatorNotAvailable, MaxBatchRecords: maxFlushRecords,
		Log: m.log, Meta: m.meta, Creator: m.creator, Parts: m.parts, Now: m.now,
		SweepIntervalMs: m.SweepIntervalMs, LoadWaitMs: m.LoadWaitMs,
		// The sweeper refreshes the settings, fires group timers (shard.Sweep), then
		// expires offsets.
		BeforeSweep: func(im *kernel.Image) { m.settings.Store(m.readSettings(im)) },
		AfterSweep:  m.expireOffsets,
	}, func(sh *coordinator.Shard) *shard { return newShard(m, sh) })
}

// Start opens the offset store and starts the sweeper.
func (m *Module) Start(ctx context.Context) error {
	st, err := m.offsetsGuest.OpenOffsets(m.broker, m.log)
	if err != nil {
		return fmt.Errorf("groups: open offset store: %w", err)
	}
	m.store = st
	m.coord.Start()
	m.startPlugins()
	if m.shares != nil {
		ctx, cancel := context.WithCancel(context.Background())
		m.shareStop, m.shareDone = cancel, make(chan struct{})
		go m.shares.run(ctx, time.Duration(m.SweepIntervalMs)*time.Millisecond, m.shareDone)
	}
	return nil
}

// Stop unloads every group (waiting requests get NOT_COORDINATOR), stops the
// sweeper, loaders and writers and waits for them.
func (m *Module) Stop(ctx context.Context) error {
	if m.shareStop != nil {
		m.shareStop()
		select {
		case <-m.shareDone:
		case <-ctx.Done():
			return fmt.Errorf("groups: stop: %w", ctx.Err())
		}
		m.shares.remote.peers.Close()
	}
	m.coord.Close()
	if err := kernel.WaitGroup(ctx, &m.assigning); err != nil { // their shards' contexts are done
		return fmt.Errorf("groups: stop: %w", err)
	}
	perr := m.stopPlugins(ctx) // after the groups are dead: no new calls, in-flight ones finish
	if err := m.coord.Wait(ctx); err != nil {
		return fmt.Errorf("groups: stop: %w", err)
	}
	if perr != nil {
		return fmt.Errorf("groups: stop: %w", perr)
	}
	return nil
}

// Cleanup closes the offset store.
func (m *Module) Cleanup() error {
	if m.store == nil {
		return nil
	}
	return m.store.Close()
}

// expireOffsets writes tombstones for expired offsets every
// offsets.retention.check.interval.ms, after a sweep (the sweeper's goroutine).
func (m *Module) expireOffsets(ctx context.Context, now time.Time) {
	set := m.settings.Load()
	if now.Sub(m.lastExpire) < set.retentionCheck {
		return
	}
	m.lastExpire = now
	for _, s := range m.loadedShards() {
		s.expireOffsets(ctx, now, set.retention)
	}
}

func (m *Module) loadedShards() []*shard { return m.coord.Ready() }

func (m *Module) groupCount() int {
	return m.coord.Sum(func(s *shard) int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.groups) })
}

// shard returns the shard of __consumer_offsets partition p if this broker leads it,
// creating it (and starting its load) when it is new or the leader epoch changed.
func (m *Module) shard(p int32) (*shard, *kerr.Error) { return m.coord.Shard(p) }

// coordinatorFor returns the loaded shard that coordinates group, or the error code
// to answer: COORDINATOR_NOT_AVAILABLE (no __consumer_offsets yet, or its partition
// failed to load), NOT_COORDINATOR (another broker leads the partition) or
// COORDINATOR_LOAD_IN_PROGRESS (still replaying after LoadWaitMs).
func (m *Module) coordinatorFor(ctx context.Context, group string) (*shard, *kerr.Error) {
	return m.coord.Lookup(ctx, group)
}

// groupShard authorizes op on group id and returns its shard: GROUP_AUTHORIZATION_FAILED
// without op on the group, INVALID_GROUP_ID for "", then coordinatorFor's codes.
func (m *Module) groupShard(ctx context.Context, req *kernel.Request, op kernel.Operation, id string) (*shard, *kerr.Error) {
	if !req.Allowed(ctx, op, kernel.ResGroup, id) {
		return nil, kerr.GroupAuthorizationFailed
	}
	if id == "" {
		return nil, kerr.InvalidGroupID
	}
	return m.coordinatorFor(ctx, id)
}

// ensureOffsetsTopic creates __consumer_offsets if it does not exist (Kafka creates it
// on the first FindCoordinator for a group).
func (m *Module) ensureOffsetsTopic(ctx context.Context) (*kernel.TopicImage, error) {
	set := m.settings.Load()
	return m.coord.EnsureTopic(ctx, set.offsetsPartitions, set.offsetsRF, "offsets.topic.replication.factor", func(int16) map[string]string {
		return map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "producer",
			"segment.bytes":    strconv.FormatInt(set.offsetsSegment, 10),
		}
	})
}
