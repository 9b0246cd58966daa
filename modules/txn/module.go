package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
)

// ID is the module's ID.
const ID = "txn.coordinator"

// TxnTopic is the internal topic that holds the transactional ids' state.
const TxnTopic = "__transaction_state"

// offsetsTopic is the group coordinator's topic; AddOffsetsToTxn adds the group's
// partition of it to the transaction.
const offsetsTopic = "__consumer_offsets"

// Info registers the module.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: ID, New: func() kernel.Module { return New() }}
}

// Module is the transaction coordinator: producer ids (InitProducerId), transactional
// ids and their transactions (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the
// markers), DescribeTransactions and ListTransactions.
type Module struct {
	// SweepIntervalMs is how often the coordinator aborts timed-out transactions,
	// expires idle transactional ids and checks which __transaction_state partitions
	// it leads.
	SweepIntervalMs int64 `yaml:"sweep_interval_ms"`
	// LoadWaitMs is how long a request waits for its id's partition to load before it
	// is answered COORDINATOR_LOAD_IN_PROGRESS.
	LoadWaitMs int64 `yaml:"load_wait_ms"`
	// ConcurrentWaitMs is how long a request that would be answered
	// CONCURRENT_TRANSACTIONS (its id's previous transaction is still being
	// completed) waits for it instead; 0 answers at once, as Kafka does.
	ConcurrentWaitMs int64 `yaml:"concurrent_wait_ms"`
	// MarkerConcurrency is how many transactions have their markers written at once.
	MarkerConcurrency int `yaml:"marker_concurrency"`
	// MarkerPartitionConcurrency is how many partitions of one transaction get their
	// marker at once.
	MarkerPartitionConcurrency int `yaml:"marker_partition_concurrency"`
	// MarkerRetryBackoffMs is the first wait before a failed marker write is retried
	// (doubling up to 1s).
	MarkerRetryBackoffMs int64 `yaml:"marker_retry_backoff_ms"`

	log     *slog.Logger
	broker  kernel.BrokerInfo
	meta    kernel.Metadata
	creator kernel.TopicCreator
	parts   kernel.Partitions
	markers kernel.TxnMarkerWriter // nil until the replication module offers it
	pids    *pidBlocks
	now     func() time.Time

	settings atomic.Pointer[settings]
	jobs     jobQueue

	completed *kernel.Counter
	timedOut  *kernel.Counter

	mu            sync.Mutex
	shards        map[int32]*shard // __transaction_state partitions this broker coordinates
	stopping      bool
	cancel        context.CancelFunc
	wg            sync.WaitGroup // shard loaders and writers, the sweeper, marker workers
	noMarkerWarns atomic.Bool
}

// New returns a module with default settings and no side effects.
func New() *Module {
	return &Module{
		SweepIntervalMs:            200,
		LoadWaitMs:                 2000,
		ConcurrentWaitMs:           100,
		MarkerConcurrency:          64,
		MarkerPartitionConcurrency: 8,
		MarkerRetryBackoffMs:       50,
	}
}

// settings are the broker configs the coordinator follows, refreshed by the sweeper.
type settings struct {
	partitions        int32 // transaction.state.log.num.partitions
	rf                int16 // transaction.state.log.replication.factor
	minISR            int32 // transaction.state.log.min.isr
	maxTimeoutMs      int64 // transaction.max.timeout.ms
	idExpirationMs    int64 // transactional.id.expiration.ms
	offsetsPartitions int32 // offsets.topic.num.partitions
}

func (m *Module) readSettings(im *kernel.Image) *settings {
	var dynDefault, dynNode map[string]string
	if im != nil {
		dynDefault = im.BrokerConfigs[""]
		dynNode = im.BrokerConfigs[strconv.FormatInt(int64(m.broker.NodeID), 10)]
	}
	b := kconfig.ResolveBroker(kconfig.MergeBroker(m.broker.StaticConfigs, dynDefault, dynNode))
	return &settings{
		partitions:        b.TransactionStateLogNumPartitions,
		rf:                b.TransactionStateLogReplicationFactor,
		minISR:            b.TransactionStateLogMinISR,
		maxTimeoutMs:      b.TransactionMaxTimeoutMs,
		idExpirationMs:    b.TransactionalIDExpirationMs,
		offsetsPartitions: b.OffsetsTopicNumPartitions,
	}
}

// Provision looks up metadata (images, topic creation, producer-id blocks) and
// replication (the internal topic, markers) and claims the transaction API keys.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log = ctx.Logger()
	m.broker = ctx.Broker()
	if m.now == nil {
		m.now = time.Now
	}
	var err error
	if m.meta, err = kernel.LookupAs[kernel.Metadata](ctx, "metadata"); err != nil {
		return fmt.Errorf("txn: %w", err)
	}
	if m.creator, err = kernel.LookupAs[kernel.TopicCreator](ctx, "metadata"); err != nil {
		return fmt.Errorf("txn: internal topic: %w", err)
	}
	alloc, err := kernel.LookupAs[kernel.ProducerIDAllocator](ctx, "metadata")
	if err != nil {
		return fmt.Errorf("txn: producer ids: %w", err)
	}
	m.pids = &pidBlocks{alloc: alloc}
	if m.parts, err = kernel.LookupAs[kernel.Partitions](ctx, "replication"); err != nil {
		return fmt.Errorf("txn: internal topic: %w", err)
	}
	if w, err := kernel.LookupAs[kernel.TxnMarkerWriter](ctx, "replication"); err == nil {
		m.markers = w
	} else {
		m.log.Warn("the replication module writes no transaction markers: transactions cannot complete", "err", err)
	}
	// KIP-890 part 1: replication asks us before the first transactional batch of a
	// transaction is appended to a partition.
	if h, err := kernel.LookupAs[kernel.TxnVerifierHook](ctx, "replication"); err == nil {
		h.SetTxnVerifier(m)
	} else {
		m.log.Warn("the replication module does not verify transactional produce (KIP-890)", "err", err)
	}
	m.completed, m.timedOut = &kernel.Counter{}, &kernel.Counter{}
	if mt := ctx.Metrics(); mt != nil {
		m.completed = mt.Counter("sluice_txn_completed_total", "Transactions completed (committed or aborted, markers written).")
		m.timedOut = mt.Counter("sluice_txn_timed_out_total", "Transactions aborted by the coordinator after transaction.timeout.ms.")
		mt.Gauge("sluice_transactional_ids", "Transactional ids in memory on this coordinator.", func() float64 { return float64(m.idCount()) })
	}
	if err := kernel.ClaimAll(ctx, m.claims()...); err != nil {
		return fmt.Errorf("txn: %w", err)
	}
	return nil
}

// Validate checks the settings.
func (m *Module) Validate() error {
	switch {
	case m.SweepIntervalMs <= 0:
		return errors.New("txn: sweep_interval_ms must be > 0")
	case m.LoadWaitMs < 0:
		return errors.New("txn: load_wait_ms must be >= 0")
	case m.ConcurrentWaitMs < 0:
		return errors.New("txn: concurrent_wait_ms must be >= 0")
	case m.MarkerConcurrency <= 0:
		return errors.New("txn: marker_concurrency must be > 0")
	case m.MarkerPartitionConcurrency <= 0:
		return errors.New("txn: marker_partition_concurrency must be > 0")
	case m.MarkerRetryBackoffMs <= 0:
		return errors.New("txn: marker_retry_backoff_ms must be > 0")
	}
	return nil
}

// Start starts the sweeper and the marker workers.
func (m *Module) Start(ctx context.Context) error {
	m.settings.Store(m.readSettings(m.meta.Image()))
	bg, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	if m.shards == nil {
		m.shards = map[int32]*shard{}
	}
	m.cancel = cancel
	m.mu.Unlock()
	m.jobs.init()
	m.wg.Add(1 + m.MarkerConcurrency)
	go m.sweeper(bg)
	for range m.MarkerConcurrency {
		go m.markerWorker(bg)
	}
	return nil
}

// Stop unloads every partition (pending requests get NOT_COORDINATOR; transactions
// whose markers were not all written stay Prepare* in the log and resume on the next
// load), stops the sweeper, the writers and the marker workers and waits for them.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	m.stopping = true
	cancel := m.cancel
	shards := m.shards
	m.shards = map[int32]*shard{}
	m.mu.Unlock()
	for _, s := range shards {
		s.unload()
	}
	if cancel != nil {
		cancel()
	}
	m.jobs.close()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("txn: stop: %w", ctx.Err())
	}
}

// sweeper follows which __transaction_state partitions this broker leads (loading and
// unloading them), aborts timed-out transactions and expires idle transactional ids.
func (m *Module) sweeper(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(time.Duration(m.SweepIntervalMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		im := m.meta.Image()
		set := m.readSettings(im)
		m.settings.Store(set)
		if tt := im.Topic(TxnTopic); tt != nil {
			for p := range tt.Partitions {
				_, _ = m.shard(int32(p)) // loads if led, unloads if not
			}
		}
		now := m.now().UnixMilli()
		for _, s := range m.readyShards() {
			s.tick(now, set.idExpirationMs)
		}
	}
}

func (m *Module) readyShards() []*shard {
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

// loading reports whether a partition this broker leads is still loading.
func (m *Module) loading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.shards {
		select {
		case <-s.loading.Ready():
		default:
			return true
		}
	}
	return false
}

func (m *Module) idCount() int {
	n := 0
	for _, s := range m.readyShards() {
		s.mu.Lock()
		n += len(s.txns)
		s.mu.Unlock()
	}
	return n
}

// shard returns the shard of __transaction_state partition p if this broker leads it,
// creating it (and starting its load) when it is new or the leader epoch changed.
func (m *Module) shard(p int32) (*shard, *kerr.Error) {
	tp := kernel.TopicPartition{Topic: TxnTopic, Partition: p}
	epoch, leads := m.parts.Leader(tp)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping || m.shards == nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	s := m.shards[p]
	if !leads {
		if s != nil {
			delete(m.shards, p)
			s.unload() // lock order: Module.mu, then shard.mu
		}
		return nil, kerr.NotCoordinator
	}
	if s != nil && s.epoch == epoch && !s.loading.Failed() {
		return s, nil
	}
	old := s
	if old != nil {
		old.unload()
	}
	s = newShard(m, tp, epoch)
	s.prev = old
	m.shards[p] = s
	m.wg.Add(1)
	go s.load()
	return s, nil
}

// dropShard forgets s (if it is still the shard of its partition) after a failure
// that needs a reload: the next request or sweep loads the partition again from the
// log, so memory never disagrees with it.
func (m *Module) dropShard(s *shard) {
	m.mu.Lock()
	if m.shards[s.tp.Partition] == s {
		delete(m.shards, s.tp.Partition)
	}
	m.mu.Unlock()
	s.unload()
}

// coordinatorFor returns the loaded shard that coordinates transactional id, or the
// error to answer: NOT_COORDINATOR (no __transaction_state yet, or another broker
// leads the id's partition), COORDINATOR_LOAD_IN_PROGRESS (still replaying after
// LoadWaitMs) or COORDINATOR_NOT_AVAILABLE (the load failed, or stopping).
func (m *Module) coordinatorFor(ctx context.Context, id string) (*shard, *kerr.Error) {
	t := m.meta.Image().Topic(TxnTopic)
	if t == nil || len(t.Partitions) == 0 {
		return nil, kerr.NotCoordinator
	}
	s, e := m.shard(partitionFor(id, int32(len(t.Partitions))))
	if e != nil {
		return nil, e
	}
	if e := s.loading.Wait(ctx, time.Duration(m.LoadWaitMs)*time.Millisecond); e != nil {
		return nil, e
	}
	return s, nil
}

// ensureTxnTopic creates __transaction_state if it does not exist (Kafka creates it
// on the first FindCoordinator for a transactional id).
func (m *Module) ensureTxnTopic(ctx context.Context) (*kernel.TopicImage, error) {
	im := m.meta.Image()
	if t := im.Topic(TxnTopic); t != nil {
		return t, nil
	}
	set := m.settings.Load()
	if set == nil {
		set = m.readSettings(im)
	}
	rf := set.rf
	live := 0
	for _, b := range im.Brokers {
		if !b.Fenced {
			live++
		}
	}
	if live > 0 && int(rf) > live {
		m.log.Warn("fewer live brokers than transaction.state.log.replication.factor; creating __transaction_state with fewer replicas",
			"transaction.state.log.replication.factor", rf, "live_brokers", live)
		rf = int16(live)
	}
	minISR := min(set.minISR, int32(max(rf, 1)))
	return m.creator.CreateTopic(ctx, TxnTopic, set.partitions, rf, map[string]string{
		"cleanup.policy":                 "compact",
		"compression.type":               "producer",
		"segment.bytes":                  "104857600",
		"min.insync.replicas":            strconv.FormatInt(int64(minISR), 10),
		"unclean.leader.election.enable": "false",
	})
}

// TxnStatePartition returns the __transaction_state partition that owns
// transactionalID, creating the topic on first use (kernel.TxnCoordinatorLocator).
// When this broker leads it, its load starts now, so the id's first request finds it
// ready.
func (m *Module) TxnStatePartition(ctx context.Context, transactionalID string) (kernel.TopicPartition, error) {
	t, err := m.ensureTxnTopic(ctx)
	if err != nil {
		return kernel.TopicPartition{}, fmt.Errorf("txn: create %s: %w", TxnTopic, err)
	}
	if t == nil || len(t.Partitions) == 0 {
		return kernel.TopicPartition{}, fmt.Errorf("txn: %s has no partitions", TxnTopic)
	}
	p := partitionFor(transactionalID, int32(len(t.Partitions)))
	if _, leads := m.parts.Leader(kernel.TopicPartition{Topic: TxnTopic, Partition: p}); leads {
		_, _ = m.shard(p)
	}
	return kernel.TopicPartition{Topic: TxnTopic, Partition: p}, nil
}

// VerifyTxnPartition reports whether transactionalID's ongoing transaction, of
// producerID and epoch, includes tp (kernel.TxnVerifier, KIP-890 part 1). Errors wrap
// a *kerr.Error with the produce path's codes: INVALID_PRODUCER_ID_MAPPING,
// INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS (the transaction is ending),
// INVALID_TXN_STATE (no ongoing transaction, or tp is not in it),
// COORDINATOR_LOAD_IN_PROGRESS; or kernel.ErrNotCoordinator.
func (m *Module) VerifyTxnPartition(ctx context.Context, transactionalID string, producerID int64, epoch int16, tp kernel.TopicPartition) error {
	t := m.meta.Image().Topic(TxnTopic)
	if t == nil || len(t.Partitions) == 0 {
		return fmt.Errorf("txn: verify %q: %w", transactionalID, kernel.ErrNotCoordinator)
	}
	s, e := m.shard(partitionFor(transactionalID, int32(len(t.Partitions))))
	if e != nil {
		return fmt.Errorf("txn: verify %q: %w", transactionalID, kernel.ErrNotCoordinator)
	}
	if !s.loading.IsReady() {
		if s.loading.Failed() {
			return fmt.Errorf("txn: verify %q: %w", transactionalID, kerr.CoordinatorNotAvailable)
		}
		return fmt.Errorf("txn: verify %q: %w", transactionalID, kerr.CoordinatorLoadInProgress)
	}
	e = s.verify(transactionalID, producerID, epoch, tp)
	if e == kerr.ProducerFenced {
		e = kerr.InvalidProducerEpoch
	}
	if e != nil {
		return fmt.Errorf("txn: verify %q producer %d epoch %d in %s: %w", transactionalID, producerID, epoch, tp, e)
	}
	return nil
}

var (
	_ kernel.Provisioner           = (*Module)(nil)
	_ kernel.Validator             = (*Module)(nil)
	_ kernel.Starter               = (*Module)(nil)
	_ kernel.Stopper               = (*Module)(nil)
	_ kernel.TxnCoordinatorLocator = (*Module)(nil)
	_ kernel.TxnVerifier           = (*Module)(nil)
)
