package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/internal/interbroker"
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
	// peers reach the other brokers: markers for the partitions they lead, and
	// partitions added by their produce path at this coordinator (nil in unit tests:
	// every partition is written through markers).
	peers *interbroker.Peers
	pids  *pidBlocks
	now   func() time.Time

	settings atomic.Pointer[settings]
	jobs     jobQueue

	completed *kernel.Counter
	timedOut  *kernel.Counter

	// coord holds the __transaction_state partitions this broker coordinates and
	// runs their loaders, writers, the sweeper and the marker workers.
	coord         *coordinator.Shards[*shard]
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
		now:                        time.Now,
	}
}

// settings are the broker configs the coordinator follows, refreshed by the sweeper.
type settings struct {
	partitions        int32 // transaction.state.log.num.partitions
	rf                int16 // transaction.state.log.replication.factor
	minISR            int32 // transaction.state.log.min.isr
	segmentBytes      int64 // transaction.state.log.segment.bytes
	maxTimeoutMs      int64 // transaction.max.timeout.ms
	idExpirationMs    int64 // transactional.id.expiration.ms
	offsetsPartitions int32 // offsets.topic.num.partitions
}

func (m *Module) readSettings(im *kernel.Image) *settings {
	b := coordinator.BrokerConfig(m.broker, im)
	return &settings{
		partitions:        b.TransactionStateLogNumPartitions,
		rf:                b.TransactionStateLogReplicationFactor,
		minISR:            b.TransactionStateLogMinISR,
		segmentBytes:      b.TransactionStateLogSegmentBytes,
		maxTimeoutMs:      b.TransactionMaxTimeoutMs,
		idExpirationMs:    b.TransactionalIDExpirationMs,
		offsetsPartitions: b.OffsetsTopicNumPartitions,
	}
}

// Provision looks up metadata (images, topic creation, producer-id blocks) and
// replication (the internal topic, markers) and claims the transaction API keys.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log, m.broker = ctx.Logger(), ctx.Broker()
	if err := coordinator.LookupDeps(ctx, &m.meta, &m.creator, &m.parts); err != nil {
		return fmt.Errorf("txn: %w", err)
	}
	m.coord = m.newCoordinator()
	alloc, err := kernel.LookupAs[kernel.ProducerIDAllocator](ctx, "metadata")
	if err != nil {
		return fmt.Errorf("txn: producer ids: %w", err)
	}
	m.pids = &pidBlocks{alloc: alloc}
	sec, err := interbroker.New(m.broker, m.log.With("component", "tls"))
	if err != nil {
		return fmt.Errorf("txn: %w", err)
	}
	m.peers = interbroker.NewPeers(sec, m.meta.Image, fmt.Sprintf("sluice-txn-%d", m.broker.NodeID))
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

// Check runs Validate before anything is provisioned: the settings it checks need
// nothing else, so a bad value stops the broker before it touches its data dir.
func (m *Module) Check(kernel.CheckContext) error { return m.Validate() }

// Validate checks the settings.
func (m *Module) Validate() error {
	switch {
	case m.ConcurrentWaitMs < 0:
		return errors.New("txn: concurrent_wait_ms must be >= 0")
	case m.MarkerConcurrency <= 0:
		return errors.New("txn: marker_concurrency must be > 0")
	case m.MarkerPartitionConcurrency <= 0:
		return errors.New("txn: marker_partition_concurrency must be > 0")
	case m.MarkerRetryBackoffMs <= 0:
		return errors.New("txn: marker_retry_backoff_ms must be > 0")
	}
	if err := coordinator.CheckIntervals(m.SweepIntervalMs, m.LoadWaitMs); err != nil {
		return fmt.Errorf("txn: %w", err)
	}
	return nil
}

// newCoordinator returns the skeleton that follows the __transaction_state
// partitions this broker leads, with this module's shards as their state.
func (m *Module) newCoordinator() *coordinator.Shards[*shard] {
	cfg := coordinator.Config{
		Topic: TxnTopic, Log: m.log, Meta: m.meta, Creator: m.creator, Parts: m.parts, Now: m.now,
		SweepIntervalMs: m.SweepIntervalMs, LoadWaitMs: m.LoadWaitMs, MaxBatchRecords: maxFlushRecords,
		NoTopic: kerr.NotCoordinator,
	}
	// The sweeper refreshes the settings, then aborts and expires (shard.Sweep).
	cfg.BeforeSweep = func(im *kernel.Image) { m.settings.Store(m.readSettings(im)) }
	return coordinator.New(cfg, func(sh *coordinator.Shard) *shard { return newShard(m, sh) })
}

// Start starts the sweeper and the marker workers.
func (m *Module) Start(ctx context.Context) error {
	m.settings.Store(m.readSettings(m.meta.Image()))
	m.jobs.init()
	m.coord.Start()
	for range m.MarkerConcurrency {
		m.coord.Go(m.markerWorker)
	}
	return nil
}

// Stop unloads every partition (pending requests get NOT_COORDINATOR; transactions
// whose markers were not all written stay Prepare* in the log and resume on the next
// load), stops the sweeper, the writers and the marker workers and waits for them.
func (m *Module) Stop(ctx context.Context) error {
	m.coord.Close()
	m.jobs.close()
	if m.peers != nil {
		m.peers.Close() // fails the remote requests in flight, so the workers end
	}
	if err := m.coord.Wait(ctx); err != nil {
		return fmt.Errorf("txn: stop: %w", err)
	}
	return nil
}

func (m *Module) readyShards() []*shard { return m.coord.Ready() }

// loading reports whether a partition this broker leads is still loading.
func (m *Module) loading() bool { return m.coord.Loading() }

func (m *Module) idCount() int {
	return m.coord.Sum(func(s *shard) int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.txns) })
}

// fencedCode is e's code as a request of the given version reads it: a version before
// fencedSince (the first that knows PRODUCER_FENCED) gets INVALID_PRODUCER_EPOCH
// instead. nil is 0.
func fencedCode(e *kerr.Error, version, fencedSince int16) int16 {
	switch {
	case e == nil:
		return 0
	case e == kerr.ProducerFenced && version < fencedSince:
		return kerr.InvalidProducerEpoch.Code
	}
	return e.Code
}

// coordinatorFor returns the loaded shard that coordinates transactional id, or the
// error to answer: NOT_COORDINATOR (no __transaction_state yet, or another broker
// leads the id's partition), COORDINATOR_LOAD_IN_PROGRESS (still replaying after
// LoadWaitMs) or COORDINATOR_NOT_AVAILABLE (the load failed, or stopping).
func (m *Module) coordinatorFor(ctx context.Context, id string) (*shard, *kerr.Error) {
	return m.coord.Lookup(ctx, id)
}

// onCoordinator runs op on the shard that lookup (coordinatorFor, or
// internalCoordinator for kernel.InternalTxns) finds for id, again while op answers
// CONCURRENT_TRANSACTIONS (shard.retryConcurrent); or answers lookup's error.
func (m *Module) onCoordinator(ctx context.Context, lookup func(context.Context, string) (*shard, *kerr.Error), id string, op func(s *shard) *kerr.Error) *kerr.Error {
	s, e := lookup(ctx, id)
	if e != nil {
		return e
	}
	return s.retryConcurrent(ctx, func() *kerr.Error { return op(s) })
}

// ensureTxnTopic creates __transaction_state if it does not exist (Kafka creates it
// on the first FindCoordinator for a transactional id).
func (m *Module) ensureTxnTopic(ctx context.Context) (*kernel.TopicImage, error) {
	set := m.settings.Load()
	if set == nil {
		set = m.readSettings(m.meta.Image())
	}
	return m.coord.EnsureTopic(ctx, set.partitions, set.rf, "transaction.state.log.replication.factor", func(rf int16) map[string]string {
		minISR := min(set.minISR, int32(max(rf, 1)))
		return map[string]string{
			"cleanup.policy":                 "compact",
			"compression.type":               "producer",
			"segment.bytes":                  strconv.FormatInt(set.segmentBytes, 10),
			"min.insync.replicas":            strconv.FormatInt(int64(minISR), 10),
			"unclean.leader.election.enable": "false",
		}
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
		_, _ = m.coord.Shard(p)
	}
	return kernel.TopicPartition{Topic: TxnTopic, Partition: p}, nil
}

// VerifyTxnPartition reports whether transactionalID's ongoing transaction, of
// producerID and epoch, includes tp, adding it first with add (kernel.TxnVerifier,
// KIP-890 parts 1 and 2). Another broker's coordinator is asked with
// AddPartitionsToTxn v4+ (VerifyOnly unless add). Errors wrap a *kerr.Error with the
// produce path's codes: INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH,
// CONCURRENT_TRANSACTIONS (the transaction is ending), INVALID_TXN_STATE (no ongoing
// transaction, or tp is not in it), COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR; or
// kernel.ErrNotCoordinator; or the failure to reach the coordinator.
func (m *Module) VerifyTxnPartition(ctx context.Context, transactionalID string, producerID int64, epoch int16, tp kernel.TopicPartition, add bool) error {
	p, ok := m.coord.PartitionOf(transactionalID)
	if !ok {
		return fmt.Errorf("txn: verify %q: %w", transactionalID, kernel.ErrNotCoordinator)
	}
	s, e := m.coord.Shard(p)
	if e != nil {
		return m.verifyRemote(ctx, p, transactionalID, producerID, epoch, tp, add)
	}
	if !s.Loading().IsReady() {
		if s.Loading().Failed() {
			return fmt.Errorf("txn: verify %q: %w", transactionalID, kerr.CoordinatorNotAvailable)
		}
		return fmt.Errorf("txn: verify %q: %w", transactionalID, kerr.CoordinatorLoadInProgress)
	}
	if add {
		e = s.retryConcurrent(ctx, func() *kerr.Error {
			return s.addPartitions(ctx, transactionalID, producerID, epoch, []kernel.TopicPartition{tp}, 2)
		})
	} else {
		e = s.verify(transactionalID, producerID, epoch, tp)
	}
	return verifyErr(transactionalID, producerID, epoch, tp, e)
}

// verifyErr wraps a coordinator's answer to a verification as VerifyTxnPartition
// returns it: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, which produce clients
// of every version know.
func verifyErr(id string, pid int64, epoch int16, tp kernel.TopicPartition, e *kerr.Error) error {
	if e == kerr.ProducerFenced {
		e = kerr.InvalidProducerEpoch
	}
	if e != nil {
		return fmt.Errorf("txn: verify %q producer %d epoch %d in %s: %w", id, pid, epoch, tp, e)
	}
	return nil
}

// verifyRemote is VerifyTxnPartition through the broker that leads the id's
// __transaction_state partition p. A coordinator too old for the broker form of
// AddPartitionsToTxn (v4, KIP-890 part 1) is kernel.ErrNotCoordinator.
func (m *Module) verifyRemote(ctx context.Context, p int32, id string, pid int64, epoch int16, tp kernel.TopicPartition, add bool) error {
	pi := m.meta.Image().Partition(TxnTopic, p)
	switch {
	case pi == nil || pi.Leader < 0:
		return fmt.Errorf("txn: verify %q: %w", id, kerr.CoordinatorNotAvailable)
	case pi.Leader == m.broker.NodeID:
		return fmt.Errorf("txn: verify %q: %w", id, kerr.NotCoordinator) // this broker is between leadership changes
	case m.peers == nil:
		return fmt.Errorf("txn: verify %q: %w", id, kernel.ErrNotCoordinator) // unit tests: no other broker to ask
	}
	if v, err := m.peers.MaxVersion(ctx, pi.Leader, kmsg.AddPartitionsToTxn.Int16()); err != nil {
		return fmt.Errorf("txn: verify %q at broker %d: %w", id, pi.Leader, err)
	} else if v < 4 {
		return fmt.Errorf("txn: verify %q: broker %d serves AddPartitionsToTxn up to v%d: %w", id, pi.Leader, v, kernel.ErrNotCoordinator)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, !add
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	kresp, err := m.peers.Request(ctx, pi.Leader, req)
	if err != nil {
		return fmt.Errorf("txn: verify %q at broker %d: %w", id, pi.Leader, err)
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return verifyErr(id, pid, epoch, tp, kerrOf(resp.ErrorCode))
	}
	for _, rt := range resp.Transactions {
		for _, t := range rt.Topics {
			for _, rp := range t.Partitions {
				if rt.TransactionalID == id && t.Topic == tp.Topic && rp.Partition == tp.Partition {
					if rp.ErrorCode == 0 {
						return nil
					}
					return verifyErr(id, pid, epoch, tp, kerrOf(rp.ErrorCode))
				}
			}
		}
	}
	return fmt.Errorf("txn: verify %q: broker %d left %s out of its answer", id, pi.Leader, tp)
}

// kerrOf is the *kerr.Error of a code (UNKNOWN_SERVER_ERROR for one kerr does not know).
func kerrOf(code int16) *kerr.Error {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e
	}
	return kerr.UnknownServerError
}

var (
	_ kernel.Provisioner           = (*Module)(nil)
	_ kernel.Validator             = (*Module)(nil)
	_ kernel.Starter               = (*Module)(nil)
	_ kernel.Stopper               = (*Module)(nil)
	_ kernel.TxnCoordinatorLocator = (*Module)(nil)
	_ kernel.TxnVerifier           = (*Module)(nil)
)
