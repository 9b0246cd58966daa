package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// Errors of the partition leader path. Handlers map them to Kafka codes.
var (
	// ErrNotLeader: this broker is not the partition's leader (NOT_LEADER_OR_FOLLOWER).
	ErrNotLeader = errors.New("not the leader of the partition")
	// ErrNotEnoughReplicas: acks=all and the ISR is smaller than min.insync.replicas.
	ErrNotEnoughReplicas = errors.New("in-sync replicas fewer than min.insync.replicas")
	// ErrFencedLeaderEpoch: the request's leader epoch is older than ours.
	ErrFencedLeaderEpoch = errors.New("fenced leader epoch")
	// ErrUnknownLeaderEpoch: the request's leader epoch is newer than ours.
	ErrUnknownLeaderEpoch = errors.New("unknown leader epoch")
	// ErrClosed: the partition was closed (topic deleted or reassigned away).
	ErrClosed = errors.New("partition closed")
)

// placement is a partition's role as of one metadata image (and, on the leader, the
// ISR changes it proposed). It is replaced whole, never modified, so the read path
// loads it without locks.
type placement struct {
	leader         int32
	epoch          int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32 // committed ISR; always holds the leader when the leader is this node
	// maximal is the ISR the HW and acks=all count: isr plus the member an ISR
	// expansion in flight adds (a shrink in flight still counts the leaving members,
	// as Kafka's maximal ISR). Equal to isr when no change is in flight.
	maximal []int32
	cfg     *kconfig.Topic
	// leaderThrottled, followerThrottled: the topic's *.replication.throttled.replicas
	// name this partition on this broker (throttle.go).
	leaderThrottled, followerThrottled bool
}

// replicaState is what the leader knows of one follower, from its fetches.
type replicaState struct {
	leo                int64 // the follower's fetch offset; -1 until it fetched in this leader epoch
	lastCaughtUpMs     int64 // last time its fetch offset reached the leader's LEO of the time
	lastFetchLeaderLEO int64 // the leader's LEO at its previous fetch
	lastFetchMs        int64 // time of its previous fetch
	// lastSentHW is the HW the last answer to it carried (-1: none yet): a waiting
	// fetch of this follower completes when the HW passes it, so followers learn the
	// HW without waiting for data (as Kafka's delayed fetch does for followers).
	lastSentHW int64
}

// partitionEnv is what every partition of a module shares.
type partitionEnv struct {
	self int32
	pg   *purgatory
	log  *slog.Logger
	// alter: the metadata module changes ISRs (kernel.PartitionChanger); without it the
	// leader proposes no ISR change and the ISR is whatever images say.
	alter bool
	// stats holds the topics' traffic counters; elections counts leader epochs this
	// node started, isrShrinks and isrExpands the changes of a led partition's ISR
	// (metrics.go). All nil in tests that build partitions without a module.
	stats                             *topicStatsMap
	elections, isrShrinks, isrExpands *kernel.Counter
}

// Partition is one local replica of a partition: its log, its placement (leader,
// leader epoch, replicas, ISR, config) and its high watermark. On the leader it also
// tracks the followers (their LEOs and when they were last caught up) and the ISR
// change in flight; on a follower the fetcher appends what the leader sends.
//
// Partition.mu is never taken while holding Module.mu or a fetcher's lock;
// purgatory.mu is taken last and never held while calling out.
type Partition struct {
	tp      kernel.TopicPartition
	topicID [16]byte
	log     kernel.Log
	self    int32
	pg      *purgatory
	env     *partitionEnv
	stats   *topicStats // the topic's traffic counters (nil without a module)

	// mu serialises appends (offset assignment and epoch stamping, follower appends and
	// truncations), HW moves and placement changes.
	mu     sync.Mutex
	closed bool
	// followers are the leader's view of the other replicas (nil on a follower); reset
	// on every new leader epoch (their LEOs are unknown until they fetch again).
	followers map[int32]*replicaState
	// leaderEpochStart is the log end offset when this node became leader in the
	// current epoch: a follower joins the ISR only once it has reached it.
	leaderEpochStart int64
	// pending is the ISR change proposed to the controller and not answered yet (nil:
	// none; one change in flight per partition), matched by identity when its answer
	// comes. isrRetryMs delays the next proposal after a rejected one.
	pending    *kernel.AlterPartitionRequest
	isrRetryMs int64
	// version is the metadata image version of the current placement; an update from
	// an older image (a lazy open may apply a newer one first) is ignored.
	version uint64

	place atomic.Pointer[placement]
	hw    atomic.Int64

	// markers are the markers appended to this partition (of an internal topic, while
	// TxnMarkerHook listeners exist) not yet handed to the listeners, in log order;
	// under mu. deliverMu serialises handing them over, so listeners see one
	// partition's markers in log order (see deliverMarkers).
	markers   []queuedMarker
	deliverMu sync.Mutex

	// offline: a Log call answered kernel.ErrLogOffline and no truncation repaired the
	// log since (offline.go). offlineNoted (under mu): the resignation was logged.
	offline      atomic.Bool
	offlineNoted bool

	// gen counts changes to what a fetch answer for this partition depends on: records
	// appended or truncated, the HW, LSO or log start moved, the placement (leader,
	// epoch, ISR) changed, the partition closed. Invariant: every such change is
	// followed by changed(), which bumps gen after the change and then wakes the
	// partition's waiters; so a reader that loads gen before it reads the partition's
	// state and later finds gen unchanged knows that state is still what it read
	// (fetch sessions answer quiet partitions from it, session.go).
	gen atomic.Uint64
}

// changed records a change to the partition's fetchable state (gen) and wakes the
// operations watching it. Call it after the change, never before.
func (p *Partition) changed() {
	p.gen.Add(1)
	p.pg.wake(p.tp)
}

// queuedMarker is a marker waiting for its listeners' call.
type queuedMarker struct {
	m      kernel.TxnMarker
	offset int64
}

func newPartition(tp kernel.TopicPartition, id [16]byte, log kernel.Log, env *partitionEnv) *Partition {
	p := &Partition{tp: tp, topicID: id, log: log, self: env.self, pg: env.pg, env: env, stats: env.stats.get(tp.Topic)}
	p.place.Store(&placement{leader: -1, epoch: -1, cfg: &kconfig.Topic{}})
	// The checkpointed HW (the log start when none was ever recorded): what is below
	// it was committed before the restart. A leader with ISR = {self} moves it to the
	// log end at its first placement.
	p.hw.Store(log.HighWatermark())
	return p
}

// TopicPartition names the partition.
func (p *Partition) TopicPartition() kernel.TopicPartition { return p.tp }

// Log is the partition's log.
func (p *Partition) Log() kernel.Log { return p.log }

// HighWatermark is the offset below which every record is committed.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LeaderEpoch is the current leader epoch (-1 before the first image).
func (p *Partition) LeaderEpoch() int32 { return p.place.Load().epoch }

// IsLeader reports whether this node leads the partition.
func (p *Partition) IsLeader() bool { return p.place.Load().leader == p.self }

// stableOffsets returns the high watermark and the last stable offset: min(HW, the
// first offset of the earliest open transaction). The HW is loaded first, so a
// transaction opened after that load starts at or past it and cannot lower the LSO
// below what the HW allowed; both are batch boundaries.
func (p *Partition) stableOffsets() (hw, lso int64) {
	hw = p.hw.Load()
	lso = hw
	if fus, ok := p.log.FirstUnstableOffset(); ok && fus < lso {
		lso = fus
	}
	return hw, lso
}

// Config is the partition's resolved topic configuration.
func (p *Partition) Config() *kconfig.Topic { return p.place.Load().cfg }

// admitWrite is the free-space check of the log's own directory (kernel.SpaceLog:
// log.dirs on several disks), nil for storage without one.
func (p *Partition) admitWrite(n int64) error {
	if sl, ok := p.log.(kernel.SpaceLog); ok {
		return sl.AdmitWrite(n)
	}
	return nil
}

// ISR returns the in-sync replicas. The caller must not modify the slice.
func (p *Partition) ISR() []int32 { return p.place.Load().isr }

// checkEpoch validates a client's current leader epoch (-1 skips the check).
func checkEpoch(pl *placement, current int32) error {
	switch {
	case current < 0 || current == pl.epoch:
		return nil
	case current < pl.epoch:
		return ErrFencedLeaderEpoch
	default:
		return ErrUnknownLeaderEpoch
	}
}

// leaderFor returns the placement if this node leads and the epoch check passes.
func (p *Partition) leaderFor(currentEpoch int32) (*placement, error) {
	pl := p.place.Load()
	if pl.leader != p.self {
		return pl, ErrNotLeader
	}
	return pl, checkEpoch(pl, currentEpoch)
}

// update applies a placement from a metadata image and reports whether anything that
// waiting operations care about changed (leadership, epoch, ISR, HW). nowMs is the time of
// the call (a new leader's followers count as caught up from then).
func (p *Partition) update(version uint64, pi *kernel.PartitionImage, cfg *kconfig.Topic, nowMs int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || version < p.version {
		return false
	}
	p.version = version
	old := p.place.Load()
	epoch := pi.LeaderEpoch
	if epoch < old.epoch { // epochs only grow; an older image is ignored
		epoch = old.epoch
	}
	np := &placement{leader: pi.Leader, epoch: epoch, partitionEpoch: pi.PartitionEpoch,
		replicas: slices.Clone(pi.Replicas), isr: slices.Clone(pi.ISR), cfg: cfg}
	if np.epoch == old.epoch && np.partitionEpoch < old.partitionEpoch {
		// An image older than an AlterPartition answer this leader already applied.
		np.isr, np.partitionEpoch = old.isr, old.partitionEpoch
	}
	if np.leader == p.self && !slices.Contains(np.isr, p.self) {
		np.isr = append(np.isr, p.self)
	}
	if *old.cfg != *cfg {
		p.log.SetConfig(cfg.LogConfig)
		np.leaderThrottled = throttledReplica(cfg.LeaderReplicationThrottledReplicas, p.tp.Partition, p.self)
		np.followerThrottled = throttledReplica(cfg.FollowerReplicationThrottledReplicas, p.tp.Partition, p.self)
	} else {
		np.leaderThrottled, np.followerThrottled = old.leaderThrottled, old.followerThrottled
	}
	leader := np.leader == p.self
	if leader && (old.leader != p.self || old.epoch != np.epoch) {
		if c := p.env.elections; c != nil && old.epoch >= 0 {
			c.Add(1) // not the first placement after opening (a restart)
		}
		p.becomeLeaderLocked(np, nowMs)
	} else if leader {
		p.countISRChange(old.isr, np.isr) // by an image: the controller's, or ours
		p.syncFollowersLocked(np, nowMs)
	}
	if !leader {
		// Markers queued as leader are never delivered now: a new leader's log
		// decides what is committed (they may be truncated away).
		p.followers, p.pending, p.markers = nil, nil, nil
	}
	np.maximal = maximalISR(np.isr, p.pendingISR())
	p.place.Store(np)
	hw := p.hw.Load()
	if leader {
		p.advanceHWLocked()
	}
	return old.leader != np.leader || old.epoch != np.epoch || !slices.Equal(old.isr, np.isr) || p.hw.Load() != hw
}

// becomeLeaderLocked starts a leader epoch (mu held): the epoch is assigned at the log
// end (Kafka's makeLeader), followers' LEOs are unknown until they fetch, and the
// ISR members count as caught up from now, so none is dropped before it had
// replica.lag.time.max.ms to fetch. The HW stays what this replica knew (a follower's
// HW, or the checkpoint) until the ISR's fetches move it.
func (p *Partition) becomeLeaderLocked(np *placement, nowMs int64) {
	leo := p.log.LogEndOffset()
	if err := p.log.AssignEpoch(np.epoch, leo); err != nil {
		p.env.log.Error("assign leader epoch", "topic", p.tp.Topic, "partition", p.tp.Partition, "epoch", np.epoch, "offset", leo, "err", err)
	}
	p.leaderEpochStart = leo
	p.pending = nil
	p.followers = make(map[int32]*replicaState, len(np.replicas))
	p.syncFollowersLocked(np, nowMs)
	if hw := p.hw.Load(); hw > leo {
		p.setHWLocked(leo)
	}
}

// syncFollowersLocked matches the followers to a new replica set within a leader
// epoch (mu held): new replicas are unknown until they fetch (an ISR member counts as
// caught up from now), removed ones are forgotten.
func (p *Partition) syncFollowersLocked(np *placement, nowMs int64) {
	for _, r := range np.replicas {
		if r == p.self || p.followers[r] != nil {
			continue
		}
		rs := &replicaState{leo: -1, lastFetchLeaderLEO: -1, lastSentHW: -1}
		if slices.Contains(np.isr, r) {
			rs.lastCaughtUpMs = nowMs
		}
		p.followers[r] = rs
	}
	for r := range p.followers {
		if !slices.Contains(np.replicas, r) {
			delete(p.followers, r)
		}
	}
}

// maximalISR is isr plus the members pending adds (pending nil: isr itself).
func maximalISR(isr, pending []int32) []int32 {
	if pending == nil {
		return isr
	}
	out := isr
	for _, r := range pending {
		if !slices.Contains(out, r) {
			if len(out) == len(isr) {
				out = slices.Clone(isr)
			}
			out = append(out, r)
		}
	}
	return out
}

// close marks the partition closed: appends fail with ErrClosed from now on.
func (p *Partition) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// isClosed reports whether close was called.
func (p *Partition) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// appendLeader stamps the leader epoch into every batch of records (concatenated,
// validated v2 batches), appends them (the log assigns offsets) and advances the HW.
// With acksAll it first checks the ISR against min.insync.replicas. It returns the
// leader epoch the records were written in (an acks=all wait fails when it changes).
func (p *Partition) appendLeader(records []byte, acksAll bool) (kernel.AppendResult, int32, error) {
	return p.appendLocked(records, nil, acksAll, nil)
}

// appendProducer is appendLeader for one batch of an idempotent or transactional
// producer: Log.AppendProducer checks its sequence range seq atomically with the
// append (records nil: a produce transform dropped the batch; only seq is recorded).
// A duplicate appends nothing and returns the original append's result (Duplicate).
func (p *Partition) appendProducer(records []byte, seq kernel.SeqRange, acksAll bool) (kernel.AppendResult, int32, error) {
	return p.appendLocked(records, &seq, acksAll, nil)
}

// markerAppend is the COMMIT/ABORT marker a records batch of appendLocked holds.
type markerAppend struct {
	m     kernel.TxnMarker
	queue bool // for the TxnMarkerHook listeners
}

// checkLocked applies the transaction version 2 rule of kernel.TxnMarker (the
// producer-state rules of every version are the Log's). Call with p.mu held.
func (mk *markerAppend) checkLocked(l kernel.Log) error {
	if mk.m.TransactionVersion < 2 {
		return nil
	}
	st, ok := l.Producer(mk.m.ProducerID)
	if !ok || st.Epoch < mk.m.ProducerEpoch || (st.Epoch == mk.m.ProducerEpoch && st.TxnStartOffset < 0) {
		return nil
	}
	return fmt.Errorf("%w: transaction version 2 marker of producer %d at epoch %d, the producer is at %d (open transaction: %v)",
		kernel.ErrInvalidProducerEpoch, mk.m.ProducerID, mk.m.ProducerEpoch, st.Epoch, st.TxnStartOffset >= 0)
}

// appendLocked is the leader append under Partition.mu: AppendLeader when seq is
// nil, else AppendProducer. A marker's records (mk non-nil, built by the caller) are
// checked first, and queued for the TxnMarkerHook listeners at their offset under the
// same lock when mk.queue, so the queue is in log order.
func (p *Partition) appendLocked(records []byte, seq *kernel.SeqRange, acksAll bool, mk *markerAppend) (kernel.AppendResult, int32, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return kernel.AppendResult{}, -1, ErrClosed
	}
	pl := p.place.Load()
	if pl.leader != p.self {
		p.mu.Unlock()
		return kernel.AppendResult{}, -1, ErrNotLeader
	}
	// As Kafka: the committed ISR (not the maximal one) against min.insync.replicas.
	if acksAll && int32(len(pl.isr)) < pl.cfg.MinInsyncReplicas {
		p.mu.Unlock()
		return kernel.AppendResult{}, -1, ErrNotEnoughReplicas
	}
	if mk != nil {
		if err := mk.checkLocked(p.log); err != nil {
			p.mu.Unlock()
			return kernel.AppendResult{}, -1, err
		}
	}
	for b := records; len(b) >= recordbatch.HeaderSize; {
		n := int(binary.BigEndian.Uint32(b[recordbatch.OffBatchLength:])) + recordbatch.LogOverhead
		binary.BigEndian.PutUint32(b[recordbatch.OffLeaderEpoch:], uint32(pl.epoch))
		if n > len(b) {
			break
		}
		b = b[n:]
	}
	var res kernel.AppendResult
	var err error
	if seq != nil {
		res, err = p.log.AppendProducer(records, *seq)
	} else {
		res, err = p.log.AppendLeader(records)
	}
	if err != nil {
		p.mu.Unlock()
		if errors.Is(err, kernel.ErrLogClosed) {
			return res, -1, ErrClosed
		}
		return res, -1, fmt.Errorf("append to %s: %w", p.tp, err)
	}
	if res.Duplicate || len(records) == 0 {
		// Nothing was appended: no HW move, nothing to wake.
		p.mu.Unlock()
		return res, pl.epoch, nil
	}
	if mk != nil && mk.queue {
		p.markers = append(p.markers, queuedMarker{m: mk.m, offset: res.BaseOffset})
	}
	p.advanceHWLocked()
	p.mu.Unlock()
	p.changed()
	return res, pl.epoch, nil
}

// ackState reports whether a write whose last offset is last, appended in leader epoch
// epoch, is settled: committed (nil), or failed: the partition closed (ErrClosed),
// leadership moved or a new epoch began (ErrNotLeader: the records may be truncated
// away), or the HW passed it with the maximal ISR below min.insync.replicas
// (ErrNotEnoughReplicasAfterAppend, as Kafka; the records stay). done is false while
// the HW is at or below last.
func (p *Partition) ackState(last int64, epoch int32) (done bool, err error) {
	if p.isClosed() {
		return true, ErrClosed
	}
	pl := p.place.Load()
	switch {
	case pl.leader != p.self || pl.epoch != epoch:
		return true, ErrNotLeader
	case p.hw.Load() <= last:
		return false, nil
	case int32(len(pl.maximal)) < pl.cfg.MinInsyncReplicas:
		return true, ErrNotEnoughReplicasAfterAppend
	}
	return true, nil
}

// followerFetched records a follower's fetch at fetchOffset (its log end offset: a
// follower fetches from its LEO) made when the leader's LEO was leaderLEO, as Kafka's
// replica state does: it was caught up at nowMs when fetchOffset reached leaderLEO, or
// at its previous fetch's time when fetchOffset reached the leader's LEO of that
// fetch. The HW advances (waking acks=all produces), and an ISR expansion is returned
// when the follower qualifies (see maybeExpandLocked). ok is false when this node does
// not lead, or replica is not one of the partition's replicas. hwNews reports that the
// HW is past the one last sent to the follower (its fetch should be answered now).
func (p *Partition) followerFetched(replica int32, fetchOffset, leaderLEO, nowMs int64) (prop *kernel.AlterPartitionRequest, hwNews, ok bool) {
	p.mu.Lock()
	pl := p.place.Load()
	rs := p.followers[replica]
	if p.closed || pl.leader != p.self || rs == nil {
		p.mu.Unlock()
		return nil, false, false
	}
	rs.leo = fetchOffset
	switch {
	case fetchOffset >= leaderLEO:
		rs.lastCaughtUpMs = max(rs.lastCaughtUpMs, nowMs)
	case fetchOffset >= rs.lastFetchLeaderLEO && rs.lastFetchLeaderLEO >= 0:
		rs.lastCaughtUpMs = max(rs.lastCaughtUpMs, rs.lastFetchMs)
	}
	rs.lastFetchLeaderLEO, rs.lastFetchMs = leaderLEO, nowMs
	old := p.hw.Load()
	p.advanceHWLocked()
	moved := p.hw.Load() != old
	prop = p.maybeExpandLocked(pl, replica, rs, nowMs)
	if prop == nil {
		prop = p.shrinkBehindLocked(pl, replica, fetchOffset)
	}
	hwNews = p.hw.Load() > rs.lastSentHW
	p.mu.Unlock()
	if moved {
		p.changed()
	}
	return prop, hwNews, true
}

// sentHW records the HW an answer to follower replica carried.
func (p *Partition) sentHW(replica int32, hw int64) {
	p.mu.Lock()
	if rs := p.followers[replica]; rs != nil {
		rs.lastSentHW = hw
	}
	p.mu.Unlock()
}

// maybeExpandLocked proposes adding replica to the ISR when it is in sync as Kafka
// defines it: its LEO has reached the HW and the start of the current leader epoch
// (so it holds everything this leader committed). One change is in flight at a time.
func (p *Partition) maybeExpandLocked(pl *placement, replica int32, rs *replicaState, nowMs int64) *kernel.AlterPartitionRequest {
	if !p.env.alter || p.pending != nil || nowMs < p.isrRetryMs || slices.Contains(pl.isr, replica) {
		return nil
	}
	if rs.leo < p.hw.Load() || rs.leo < p.leaderEpochStart {
		return nil
	}
	return p.proposeLocked(pl, append(slices.Clone(pl.isr), replica))
}

// shrinkBehindLocked proposes removing ISR member replica at once when its fetch
// offset is below the HW: it lost committed records (its log was cut at a damaged
// batch, or an unclean restart dropped an unsynced tail) and must not be elected
// before it has them again; it rejoins as any follower that caught up. mu held.
func (p *Partition) shrinkBehindLocked(pl *placement, replica int32, fetchOffset int64) *kernel.AlterPartitionRequest {
	if !p.env.alter || p.pending != nil || fetchOffset >= p.hw.Load() || !slices.Contains(pl.isr, replica) {
		return nil
	}
	keep := slices.DeleteFunc(slices.Clone(pl.isr), func(id int32) bool { return id == replica })
	p.env.log.Warn("ISR member fetches below the high watermark; removing it from the ISR", "topic", p.tp.Topic, "partition", p.tp.Partition,
		"replica", replica, "fetch_offset", fetchOffset, "high_watermark", p.hw.Load())
	return p.proposeLocked(pl, keep)
}

// maybeShrink proposes removing the ISR followers that were not caught up within
// lagMs (replica.lag.time.max.ms), as Kafka's periodic ISR expiration does. nil when
// nothing changes, a change is in flight, or this node does not lead.
func (p *Partition) maybeShrink(nowMs, lagMs int64) *kernel.AlterPartitionRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.place.Load()
	if p.closed || pl.leader != p.self || !p.env.alter || p.pending != nil || nowMs < p.isrRetryMs {
		return nil
	}
	if ol, ok := p.log.(kernel.OfflineLog); ok && !p.offline.Load() && ol.Offline() != nil {
		p.offline.Store(true) // found idle: its log dir failed (JBOD)
	}
	if p.offline.Load() {
		// Not a shrink: the leader's own log is offline (offline.go).
		return p.resignLocked(pl, nowMs)
	}
	var keep []int32
	for _, r := range pl.isr {
		if rs := p.followers[r]; r != p.self && (rs == nil || nowMs-rs.lastCaughtUpMs > lagMs) {
			continue
		}
		keep = append(keep, r)
	}
	if len(keep) == len(pl.isr) {
		return nil
	}
	return p.proposeLocked(pl, keep)
}

// proposeLocked records isr as the change in flight and returns the request for it.
func (p *Partition) proposeLocked(pl *placement, isr []int32) *kernel.AlterPartitionRequest {
	p.pending = &kernel.AlterPartitionRequest{
		Topic: p.tp.Topic, TopicID: p.topicID, Partition: p.tp.Partition,
		Leader: p.self, LeaderEpoch: pl.epoch, PartitionEpoch: pl.partitionEpoch, ISR: isr,
	}
	np := *pl
	np.maximal = maximalISR(pl.isr, isr)
	p.place.Store(&np)
	return p.pending
}

// pendingISR is the ISR of the change in flight (nil: none); mu held.
func (p *Partition) pendingISR() []int32 {
	if p.pending == nil {
		return nil
	}
	return p.pending.ISR
}

// isrChanged ends the change in flight req: with the controller's answer res when err
// is nil (applied unless an image already brought something newer), else dropped;
// retryAfterMs delays the next proposal (0: none). It reports whether the placement
// changed (waiting operations should re-check).
func (p *Partition) isrChanged(req *kernel.AlterPartitionRequest, res *kernel.PartitionImage, retryAtMs int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != req {
		return false // a new leader epoch dropped it already
	}
	p.pending = nil
	p.isrRetryMs = retryAtMs
	pl := p.place.Load()
	np := *pl
	if res != nil && !p.closed && pl.leader == p.self && res.LeaderEpoch == pl.epoch && res.PartitionEpoch > pl.partitionEpoch {
		np.isr, np.partitionEpoch = slices.Clone(res.ISR), res.PartitionEpoch
		if !slices.Contains(np.isr, p.self) {
			np.isr = append(np.isr, p.self)
		}
		p.countISRChange(pl.isr, np.isr)
	}
	np.maximal = np.isr
	p.place.Store(&np)
	if pl.leader == p.self {
		p.advanceHWLocked()
	}
	return true
}

// countISRChange counts a led partition's committed ISR going from old to isr within
// a leader epoch: a shrink or an expansion, whoever made it (this leader's
// AlterPartition, or the controller removing a fenced broker). Each change is seen
// once: by the answer or by the image, whichever comes first.
func (p *Partition) countISRChange(old, isr []int32) {
	var c *kernel.Counter
	switch {
	case len(isr) < len(old):
		c = p.env.isrShrinks
	case len(isr) > len(old):
		c = p.env.isrExpands
	}
	if c != nil {
		c.Add(1)
	}
}

// stillProposing reports whether req is still the change in flight (a retry of a
// transient failure is pointless otherwise).
func (p *Partition) stillProposing(req *kernel.AlterPartitionRequest) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.place.Load()
	return !p.closed && pl.leader == p.self && pl.epoch == req.LeaderEpoch && p.pending == req
}

// preferredReadReplica picks the replica a consumer in rack should fetch offset from
// (KIP-392, Kafka's RackAwareReplicaSelector): -1 (this leader) when this broker is in
// that rack or no in-sync, unfenced follower there has reached offset (its LEO; it
// serves up to its HW, which follows); else such a follower, the one with the highest
// LEO (the lowest id among equals).
func (p *Partition) preferredReadReplica(im *kernel.Image, rack string, offset int64) int32 {
	if b := im.Brokers[p.self]; b == nil || b.Rack == rack {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.place.Load()
	best, bestLEO := int32(-1), int64(-1)
	for _, r := range pl.isr {
		rs := p.followers[r]
		b := im.Brokers[r]
		if r == p.self || rs == nil || b == nil || b.Fenced || b.Rack != rack || rs.leo < offset {
			continue
		}
		if rs.leo > bestLEO || rs.leo == bestLEO && r < best {
			best, bestLEO = r, rs.leo
		}
	}
	return best
}

// advanceHWLocked moves the HW to the smallest LEO among the maximal ISR (a follower
// whose LEO is not known yet holds it where it is). With ISR = {self} that is the log
// end offset. It never moves the HW down, and persists it (Log.SetHighWatermark).
func (p *Partition) advanceHWLocked() {
	pl := p.place.Load()
	cur := p.hw.Load()
	hw := p.log.LogEndOffset()
	for _, r := range pl.maximal {
		if r == p.self {
			continue
		}
		rs := p.followers[r]
		if rs == nil || rs.leo < 0 {
			hw = min(hw, cur)
			continue
		}
		hw = min(hw, rs.leo)
	}
	if hw > cur {
		p.setHWLocked(hw)
	}
}

// setHWLocked stores and persists the HW (mu held).
func (p *Partition) setHWLocked(hw int64) {
	p.hw.Store(hw)
	p.log.SetHighWatermark(hw)
}

// deleteRecordsBefore moves the log start offset to offset (-1 = HW) and returns the
// new low watermark.
func (p *Partition) deleteRecordsBefore(offset int64) (int64, error) {
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, kernel.ErrOffsetOutOfRange
	}
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		return -1, err
	}
	p.changed()
	return p.log.LogStartOffset(), nil
}

// endOffsetForEpoch answers OffsetForLeaderEpoch from the log's leader-epoch cache
// (Log.EndOffsetForEpoch): the largest epoch <= requested and the start offset of the
// first epoch after it (the log end offset for the current epoch). (-1, -1) when the
// epoch is unknown.
func (p *Partition) endOffsetForEpoch(requested int32) (int32, int64) {
	return p.log.EndOffsetForEpoch(requested)
}

// epochForOffset returns the leader epoch in which offset was written, as far as the
// log's cache knows (-1 when it does not).
func (p *Partition) epochForOffset(offset int64) int32 {
	e := int32(-1)
	for _, ent := range p.log.Epochs() {
		if ent.StartOffset > offset {
			break
		}
		e = ent.Epoch
	}
	return e
}

// latestEpoch is the newest epoch in the log's cache (-1 when empty).
func (p *Partition) latestEpoch() int32 {
	es := p.log.Epochs()
	if len(es) == 0 {
		return -1
	}
	return es[len(es)-1].Epoch
}
