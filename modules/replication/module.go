package replication

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/interbroker"
	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/ratelog"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// ID is the module's ID.
const ID = "replication.isr"

// Info registers the module.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: ID, New: func() kernel.Module { return New() }}
}

// Module is the partition-leader path: Produce, Fetch, ListOffsets, DeleteRecords and
// OffsetForLeaderEpoch for the partitions this node leads.
type Module struct {
	// FetchSessionCacheSlots bounds the number of cached fetch sessions (KIP-227);
	// Kafka's max.incremental.fetch.session.cache.slots. 0 disables sessions.
	FetchSessionCacheSlots int `yaml:"fetch_session_cache_slots"`
	// MaxIncrementalFetchSessionCacheSlots is Kafka's name for FetchSessionCacheSlots,
	// accepted for familiarity; when set it wins.
	MaxIncrementalFetchSessionCacheSlots int `yaml:"max_incremental_fetch_session_cache_slots"`
	// FetchSessionEvictionMs is how long a session must be unused before a new session
	// may evict it.
	FetchSessionEvictionMs int64 `yaml:"fetch_session_eviction_ms"`
	// MaxProduceRecordsBytes bounds the record bytes of one Produce request; partitions
	// past the bound get RECORD_LIST_TOO_LARGE.
	MaxProduceRecordsBytes int64 `yaml:"max_produce_records_bytes"`
	// FollowerReads turns on rack-aware follower reads (KIP-392; Kafka's
	// replica.selector.class = RackAwareReplicaSelector): a leader answers a consumer
	// whose client.rack matches an in-sync follower's broker rack (and not its own)
	// with that follower as preferred read replica, and followers serve consumer
	// fetches up to their HW. Off by default (as Kafka).
	FollowerReads bool `yaml:"follower_reads"`

	log     *slog.Logger
	broker  kernel.BrokerInfo
	sec     *interbroker.Security // the inter-broker listener's security (fetcher.connect); nil in unit tests: plaintext
	storage kernel.Storage
	meta    kernel.Metadata
	now     func() time.Time

	pg       *purgatory
	sessions *sessionCache

	produceBytes, fetchBytes *kernel.Counter
	stats                    topicStatsMap // per-topic traffic (metrics.go)
	// transformer is the registered kernel.ProduceTransformer (nil: none); see
	// SetProduceTransformer.
	transformer hookSlot[kernel.ProduceTransformer]
	// verifier is the registered kernel.TxnVerifier (nil: none); see SetTxnVerifier.
	verifier hookSlot[kernel.TxnVerifier]
	// quotas charges clients' produce and fetch bytes (role "quotas"; nil without).
	quotas kernel.Quotas
	// markerFns are the TxnMarkerHook listeners (copy-on-write; markerMu serialises
	// writers).
	markerMu  sync.Mutex
	markerFns atomic.Pointer[markerListeners]
	// fetchMaxBytes is the broker's fetch.max.bytes (caps a Fetch's max_bytes),
	// refreshed from every image.
	fetchMaxBytes atomic.Int64
	// dbudget bounds decompressed output across produce requests
	// (queued.max.decompressed.bytes); set once by the first setBrokerLimits.
	dbudget atomic.Pointer[recordbatch.DecompressBudget]
	// recompressors keeps *recordbatch.Recompressor between produce requests: an
	// encoder at a high zstd level costs milliseconds to make.
	recompressors sync.Pool
	// rcfg is the replica.* configuration, refreshed from every image.
	rcfg atomic.Pointer[replicaConfig]
	// rthrottle measures the replication throttles' rates (throttle.go).
	rthrottle replThrottle

	// env is shared by every partition.
	env *partitionEnv
	// changer is the metadata module's kernel.PartitionChanger (nil: ISRs change only
	// through images; no shrink or expansion is proposed).
	changer kernel.PartitionChanger
	// fetchers follow the partitions this broker replicates from their leaders.
	fetchers *fetcherSet
	// fetchPaused (a test hook) idles every fetcher, as if the broker stopped
	// fetching.
	fetchPaused atomic.Bool
	// runCtx ends at Stop; background work (the ISR check, AlterPartition calls) runs
	// under it, started by goBG and waited for with bg.
	runCtx    context.Context
	runCancel context.CancelFunc
	bgMu      sync.Mutex
	bgStopped bool
	bg        sync.WaitGroup

	// openLocks serialise opening logs and dropping partitions, per partition (the
	// stripe openLock picks; taken before mu, held across Storage.Open and
	// Storage.Remove): Storage.Open hands back the open Log of a name, so an open of a
	// re-created topic racing the removal of the old incarnation would otherwise get
	// the old Log, about to be deleted. Different partitions open in parallel.
	openLocks [64]sync.Mutex
	lockSeed  maphash.Seed

	// Subscription goroutine only (apply.go): the last image applied whole and the
	// broker configs it resolved against, the followed partitions and the shard count
	// they were assigned with.
	last      *kernel.Image
	lastBcfg  map[string]string
	follows   map[kernel.TopicPartition]*follow
	followN   int
	forceFull bool // test hook: walk every image whole (the cost before diffs)
	// applyVisited counts partitions applyImage looked at (tests, benchmarks).
	applyVisited atomic.Int64
	// appliedDone is the version of the last image whose opens and removals
	// finished (removeStrays waits for it).
	appliedDone atomic.Uint64
	// retryWake (cap 1) wakes retryLoop when an open fails; openLog rate-limits the
	// open failure log lines, storageLog those of failed Log calls (storageCode).
	retryWake  chan struct{}
	openLog    ratelog.Limiter
	storageLog ratelog.Limiter

	mu      sync.RWMutex
	parts   map[kernel.TopicPartition]*Partition
	applied uint64 // newest image version acted on (subscription or lazy open)
	// adhoc are the partitions opened outside the subscription since its last apply
	// (checked against the next image); failed are the partitions whose open failed.
	adhoc    map[kernel.TopicPartition]adhocOpen
	failed   map[kernel.TopicPartition]*openFailure
	unsub    func()
	stopping bool
}

// New returns a module with default settings and no side effects.
func New() *Module {
	return &Module{
		FetchSessionCacheSlots: 1000,
		FetchSessionEvictionMs: 120_000,
		MaxProduceRecordsBytes: 100 << 20,
	}
}

// Provision looks up storage and metadata and claims the API keys.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log = ctx.Logger()
	m.broker = ctx.Broker()
	if m.now == nil {
		m.now = time.Now
	}
	var err error
	if m.storage, err = kernel.LookupAs[kernel.Storage](ctx, "storage"); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	if m.meta, err = kernel.LookupAs[kernel.Metadata](ctx, "metadata"); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	m.changer, _ = m.meta.(kernel.PartitionChanger)
	if q, err := kernel.LookupAs[kernel.Quotas](ctx, "quotas"); err == nil {
		m.quotas = q // optional: without a quotas module nobody is throttled
	}
	// How followers reach leaders: the inter-broker listener's TLS and SASL.
	if m.sec, err = interbroker.New(m.broker, m.log.With("component", "tls")); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	m.pg = newPurgatory()
	m.env = &partitionEnv{self: m.broker.NodeID, pg: m.pg, log: m.log, alter: m.changer != nil, stats: &m.stats, elections: &kernel.Counter{}}
	m.fetchers = newFetcherSet(m)
	m.setBrokerLimits(m.brokerConfigs(nil))
	m.parts = make(map[kernel.TopicPartition]*Partition)
	m.follows = map[kernel.TopicPartition]*follow{}
	m.lockSeed = maphash.MakeSeed()
	m.retryWake = make(chan struct{}, 1)
	m.openLog.N, m.openLog.Every = openLogBurst, openLogEvery
	m.storageLog.N, m.storageLog.Every = openLogBurst, openLogEvery
	slots := m.FetchSessionCacheSlots
	if m.MaxIncrementalFetchSessionCacheSlots > 0 {
		slots = m.MaxIncrementalFetchSessionCacheSlots
	}
	m.sessions = newSessionCache(slots, time.Duration(m.FetchSessionEvictionMs)*time.Millisecond, m.now)
	m.produceBytes, m.fetchBytes = &kernel.Counter{}, &kernel.Counter{}
	if mt := ctx.Metrics(); mt != nil {
		m.registerMetrics(mt)
		mt.Gauge("sluice_fetch_sessions", "Cached fetch sessions (KIP-227).", func() float64 { return float64(m.sessions.len()) })
		mt.Gauge("sluice_leader_partitions", "Partitions this broker leads.", func() float64 { return float64(m.leaderCount()) })
		mt.Gauge("sluice_purgatory_waiting", "Fetches and acks=all produces waiting in the purgatory.", func() float64 { return float64(m.pg.n.Load()) })
		mt.Gauge("sluice_follower_partitions", "Partitions this broker fetches from their leaders.", func() float64 { n, _ := m.fetchers.partitions(); return float64(n) })
		mt.Gauge("sluice_replica_fetchers", "Replica fetcher goroutines (one per source broker and shard).", func() float64 { _, n := m.fetchers.partitions(); return float64(n) })
		m.produceBytes = mt.Counter("sluice_produce_bytes_total", "Record batch bytes appended by Produce.")
		m.fetchBytes = mt.Counter("sluice_fetch_bytes_total", "Record batch bytes returned by Fetch.")
	}

	if err := kernel.ClaimAll(ctx, m.claims()...); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	return nil
}

// Check runs Validate before anything is provisioned: the settings it checks need
// nothing else, so a bad value stops the broker before it touches its data dir.
func (m *Module) Check(kernel.CheckContext) error { return m.Validate() }

// Validate checks the settings.
func (m *Module) Validate() error {
	switch {
	case m.FetchSessionCacheSlots < 0 || m.MaxIncrementalFetchSessionCacheSlots < 0:
		return errors.New("replication: fetch session cache slots must be >= 0")
	case m.FetchSessionEvictionMs < 0:
		return errors.New("replication: fetch_session_eviction_ms must be >= 0")
	case m.MaxProduceRecordsBytes <= 0:
		return errors.New("replication: max_produce_records_bytes must be > 0")
	}
	return nil
}

// Start subscribes to metadata images; each image opens, reconfigures and removes
// local partitions and (re)targets the replica fetchers. With a
// kernel.PartitionChanger it also starts the periodic ISR check.
func (m *Module) Start(context.Context) error {
	m.bgMu.Lock()
	m.runCtx, m.runCancel = context.WithCancel(context.Background())
	m.bgMu.Unlock()
	if m.changer != nil {
		m.goBG(m.isrLoop)
	}
	m.goBG(m.retryLoop)
	if sr, ok := m.storage.(kernel.StrayRemover); ok {
		m.goBG(func(ctx context.Context) { m.removeStrays(ctx, sr) })
	}
	unsub := m.meta.Subscribe(m.applyImage)
	m.mu.Lock()
	m.unsub = unsub
	m.mu.Unlock()
	return nil
}

// Stop completes waiting fetches and produces, unsubscribes, stops the fetchers and
// the background work, and waits for all of it. It may be called more than once.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	m.stopping = true
	unsub := m.unsub
	m.unsub = nil
	m.mu.Unlock()
	if m.pg != nil {
		m.pg.close()
	}
	if unsub != nil {
		unsub() // waits for a running applyImage; none runs after
	}
	if m.fetchers != nil {
		m.fetchers.stopAll()
	}
	m.bgMu.Lock()
	m.bgStopped = true
	if m.runCancel != nil {
		m.runCancel()
	}
	m.bgMu.Unlock()
	m.bg.Wait()
	if m.pg != nil {
		return m.pg.drain(ctx)
	}
	return nil
}

// Cleanup forgets the partitions; the storage module closes the logs.
func (m *Module) Cleanup() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parts = nil
	return nil
}

func (m *Module) leaderCount() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, p := range m.parts {
		if p.IsLeader() {
			n++
		}
	}
	return n
}

// brokerConfigs merges static configs, dynamic cluster defaults and this node's
// dynamic configs (later wins).
func (m *Module) brokerConfigs(im *kernel.Image) map[string]string {
	var dynDefault, dynNode map[string]string
	if im != nil {
		dynDefault = im.BrokerConfigs[""]
		dynNode = im.BrokerConfigs[strconv.FormatInt(int64(m.broker.NodeID), 10)]
	}
	return kconfig.MergeBroker(m.broker.StaticConfigs, dynDefault, dynNode)
}

// defaultFetchMaxBytes is Kafka's fetch.max.bytes default (55 MiB).
const defaultFetchMaxBytes = 55 << 20

// setBrokerLimits reads the broker configs this module honours directly.
func (m *Module) setBrokerLimits(bcfg map[string]string) {
	n := int64(defaultFetchMaxBytes)
	if v, err := strconv.ParseInt(bcfg["fetch.max.bytes"], 10, 32); err == nil && v > 0 {
		n = v
	}
	m.fetchMaxBytes.Store(n)
	b := kconfig.ResolveBroker(bcfg)
	m.rcfg.Store(newReplicaConfig(&b))
	if m.dbudget.Load() == nil { // static: set once, not rebuilt per image
		m.dbudget.CompareAndSwap(nil, recordbatch.NewDecompressBudget(b.QueuedMaxDecompressedBytes))
	}
}

func (m *Module) hosts(pi *kernel.PartitionImage) bool {
	return pi.Leader == m.broker.NodeID || slices.Contains(pi.Replicas, m.broker.NodeID)
}

// drop closes a partition that left this node (or its topic) and deletes its data.
func (m *Module) drop(p *Partition) {
	p.close()
	p.changed()
	if err := m.storage.Remove(p.tp); err != nil {
		m.log.Error("remove partition", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
	}
}

// open returns the open partition tp of topic incarnation id, opening its log if
// needed (without holding Module.mu). An older incarnation of a re-created topic is
// dropped first. A new partition gets its placement before it is published in the
// map, so no request ever sees a partition without a leader.
func (m *Module) open(tp kernel.TopicPartition, id [16]byte, version uint64, pi *kernel.PartitionImage, cfg *kconfig.Topic) (*Partition, error) {
	m.mu.RLock()
	p := m.parts[tp]
	m.mu.RUnlock()
	if p != nil && p.topicID == id {
		return p, nil
	}
	l := m.openLock(tp)
	l.Lock()
	defer l.Unlock()
	m.mu.RLock()
	p = m.parts[tp]
	m.mu.RUnlock()
	if p != nil && p.topicID == id {
		return p, nil // opened while we waited
	}
	if p != nil {
		m.mu.Lock()
		mine := m.parts[tp] == p
		if mine {
			delete(m.parts, tp)
		}
		m.mu.Unlock()
		if mine {
			m.drop(p)
		}
	}
	lg, err := m.storage.Open(tp, id, cfg.LogConfig)
	if err != nil {
		err = fmt.Errorf("open %s: %w", tp, err)
		m.openFailedErr(tp, id, err)
		return nil, err
	}
	m.openSucceeded(tp)
	p = newPartition(tp, id, lg, m.env)
	p.update(version, pi, cfg, m.now().UnixMilli())
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping || m.parts == nil {
		return nil, errStopped
	}
	if q := m.parts[tp]; q != nil && q.topicID == id {
		return q, nil // opened concurrently; Storage.Open returned the same Log
	}
	m.parts[tp] = p
	return p, nil
}

// partition returns the local partition tp, opening it from the current image when
// the subscription has not caught up with a just-created topic yet. nil when the image
// has no such partition on this node, or when its log failed to open (absentCode
// tells the two apart).
func (m *Module) partition(tp kernel.TopicPartition) *Partition {
	m.mu.RLock()
	p := m.parts[tp]
	m.mu.RUnlock()
	if p != nil {
		return p
	}
	return m.openFromImage(tp, false)
}

// hookSlot holds a hook another module registers (an interface value, nil: none)
// behind an atomic pointer, so it can be set at any time and read without a lock.
type hookSlot[T any] struct{ p atomic.Pointer[hookBox[T]] }

// hookBox boxes a hook: an atomic.Pointer holds a pointer, not an interface.
type hookBox[T any] struct{ v T }

// set registers v; a nil v unsets the hook.
func (s *hookSlot[T]) set(v T) {
	if any(v) == nil {
		s.p.Store(nil)
		return
	}
	s.p.Store(&hookBox[T]{v: v})
}

// get returns the registered hook, or T's zero (nil) when none is.
func (s *hookSlot[T]) get() T {
	if b := s.p.Load(); b != nil {
		return b.v
	}
	var zero T
	return zero
}

// SetTxnVerifier registers the verifier Produce asks before the first transactional
// batch of a transaction in a partition (kernel.TxnVerifierHook); nil unsets it. The
// txn module calls it at its Provision.
func (m *Module) SetTxnVerifier(v kernel.TxnVerifier) { m.verifier.set(v) }

// txnVerifier returns the registered kernel.TxnVerifier, or nil when none is.
func (m *Module) txnVerifier() kernel.TxnVerifier { return m.verifier.get() }

// SetProduceTransformer registers the transformer that Produce calls for the
// partitions of bound topics (kernel.TransformHook); nil unsets it. The transforms
// module calls it at its Provision; it is safe at any time, and applies from the next
// Produce request. Appends through kernel.Partitions (internal writers) are never
// transformed.
func (m *Module) SetProduceTransformer(t kernel.ProduceTransformer) { m.transformer.set(t) }

// Interface guards.
var (
	_ kernel.TransformHook   = (*Module)(nil)
	_ kernel.TxnVerifierHook = (*Module)(nil)
	_ kernel.Provisioner     = (*Module)(nil)
	_ kernel.Validator       = (*Module)(nil)
	_ kernel.Starter         = (*Module)(nil)
	_ kernel.Stopper         = (*Module)(nil)
	_ kernel.CleanerUpper    = (*Module)(nil)
)
