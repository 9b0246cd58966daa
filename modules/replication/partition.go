package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
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

// placement is a partition's role as of one metadata image. It is replaced whole, never
// modified, so the read path loads it without locks.
type placement struct {
	leader   int32
	epoch    int32
	replicas []int32
	isr      []int32 // always holds the leader when the leader is this node
	cfg      *kconfig.Topic
}

// epochEntry is one leader epoch and the first offset written in it.
type epochEntry struct {
	epoch       int32
	startOffset int64
}

// Partition is one local replica of a partition: its log, its placement (leader,
// leader epoch, replicas, ISR, config) and its high watermark.
//
// Partition.mu is never taken while holding Module.mu; purgatory.mu is taken last and
// never held while calling out.
type Partition struct {
	tp      kernel.TopicPartition
	topicID [16]byte
	log     kernel.Log
	self    int32
	pg      *purgatory

	// mu serialises appends (offset assignment and epoch stamping), HW moves and
	// placement changes.
	mu     sync.Mutex
	closed bool
	// epochs is the leader-epoch cache: ascending epochs with their start offsets.
	// In memory only in this issue (see doc.go).
	epochs []epochEntry
	// replicaLEO holds the log end offsets of followers (empty until follower fetch
	// exists); the leader's own LEO is the log's.
	replicaLEO map[int32]int64
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
}

// queuedMarker is a marker waiting for its listeners' call.
type queuedMarker struct {
	m      kernel.TxnMarker
	offset int64
}

func newPartition(tp kernel.TopicPartition, id [16]byte, log kernel.Log, self int32, pg *purgatory) *Partition {
	p := &Partition{tp: tp, topicID: id, log: log, self: self, pg: pg, replicaLEO: map[int32]int64{}}
	p.place.Store(&placement{leader: -1, epoch: -1, cfg: &kconfig.Topic{}})
	// With no HW checkpoint yet, a partition whose ISR is only this node has committed
	// everything in its log. The ISR issue restores the HW from a checkpoint instead.
	p.hw.Store(log.LogEndOffset())
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
// waiting operations care about changed (leadership, epoch, ISR).
func (p *Partition) update(version uint64, pi *kernel.PartitionImage, cfg *kconfig.Topic) bool {
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
	isr := slices.Clone(pi.ISR)
	if pi.Leader == p.self && !slices.Contains(isr, p.self) {
		isr = append(isr, p.self)
	}
	np := &placement{leader: pi.Leader, epoch: epoch, replicas: slices.Clone(pi.Replicas), isr: isr, cfg: cfg}
	if *old.cfg != *cfg {
		p.log.SetConfig(cfg.LogConfig)
	}
	if np.leader == p.self && (len(p.epochs) == 0 || p.epochs[len(p.epochs)-1].epoch < epoch) {
		p.epochs = append(p.epochs, epochEntry{epoch: epoch, startOffset: p.log.LogEndOffset()})
	}
	p.place.Store(np)
	changed := old.leader != np.leader || old.epoch != np.epoch || !slices.Equal(old.isr, np.isr)
	if np.leader == p.self {
		p.advanceHWLocked()
	}
	return changed
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
// With acksAll it first checks the ISR against min.insync.replicas.
func (p *Partition) appendLeader(records []byte, acksAll bool) (kernel.AppendResult, error) {
	return p.appendLocked(records, nil, acksAll, nil)
}

// appendProducer is appendLeader for one batch of an idempotent or transactional
// producer: Log.AppendProducer checks its sequence range seq atomically with the
// append (records nil: a produce transform dropped the batch; only seq is recorded).
// A duplicate appends nothing and returns the original append's result (Duplicate).
func (p *Partition) appendProducer(records []byte, seq kernel.SeqRange, acksAll bool) (kernel.AppendResult, error) {
	return p.appendLocked(records, &seq, acksAll, nil)
}

// appendLocked is the leader append under Partition.mu: AppendLeader when seq is
// nil, else AppendProducer. A non-nil marker (a COMMIT/ABORT the caller built) is
// queued for the TxnMarkerHook listeners at its offset under the same lock, so the
// queue is in log order.
func (p *Partition) appendLocked(records []byte, seq *kernel.SeqRange, acksAll bool, marker *kernel.TxnMarker) (kernel.AppendResult, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return kernel.AppendResult{}, ErrClosed
	}
	pl := p.place.Load()
	if pl.leader != p.self {
		p.mu.Unlock()
		return kernel.AppendResult{}, ErrNotLeader
	}
	if acksAll && int32(len(pl.isr)) < pl.cfg.MinInsyncReplicas {
		p.mu.Unlock()
		return kernel.AppendResult{}, ErrNotEnoughReplicas
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
			return res, ErrClosed
		}
		return res, fmt.Errorf("append to %s: %w", p.tp, err)
	}
	if res.Duplicate || len(records) == 0 {
		// Nothing was appended: no HW move, nothing to wake.
		p.mu.Unlock()
		return res, nil
	}
	if marker != nil {
		p.markers = append(p.markers, queuedMarker{m: *marker, offset: res.BaseOffset})
	}
	p.advanceHWLocked()
	p.mu.Unlock()
	p.pg.wake(p.tp)
	return res, nil
}

// updateFollower records a follower's log end offset (what its fetch position says it
// has) and advances the HW, waking operations waiting for it (acks=all produces,
// fetches). The follower fetch path of the ISR issue calls it; today only tests do.
func (p *Partition) updateFollower(replica int32, leo int64) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.replicaLEO[replica] = leo
	old := p.hw.Load()
	p.advanceHWLocked()
	moved := p.hw.Load() != old
	p.mu.Unlock()
	if moved {
		p.pg.wake(p.tp)
	}
}

// advanceHWLocked moves the HW to the smallest LEO among the ISR. With ISR = {self}
// that is the log end offset. It never moves the HW down.
func (p *Partition) advanceHWLocked() {
	pl := p.place.Load()
	hw := p.log.LogEndOffset()
	for _, r := range pl.isr {
		if r == p.self {
			continue
		}
		leo, ok := p.replicaLEO[r]
		if !ok {
			leo = p.hw.Load()
		}
		hw = min(hw, leo)
	}
	if hw > p.hw.Load() {
		p.hw.Store(hw)
	}
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
	p.pg.wake(p.tp)
	return p.log.LogStartOffset(), nil
}

// endOffsetForEpoch answers OffsetForLeaderEpoch from the leader-epoch cache: the
// largest epoch <= requested and the start offset of the first epoch after it (the log
// end offset for the current epoch). (-1, -1) when the epoch is unknown.
func (p *Partition) endOffsetForEpoch(requested int32) (int32, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if requested < 0 || len(p.epochs) == 0 {
		return -1, -1
	}
	last := p.epochs[len(p.epochs)-1]
	if requested == last.epoch {
		return requested, p.log.LogEndOffset()
	}
	// first entry with an epoch > requested
	i, _ := slices.BinarySearchFunc(p.epochs, requested+1, func(e epochEntry, t int32) int { return int(e.epoch) - int(t) })
	if i == len(p.epochs) {
		return -1, -1 // newer than anything we know
	}
	if i == 0 {
		return requested, p.epochs[0].startOffset
	}
	return p.epochs[i-1].epoch, p.epochs[i].startOffset
}

// epochForOffset returns the leader epoch in which offset was written, as far as the
// cache knows (-1 when it does not).
func (p *Partition) epochForOffset(offset int64) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := int32(-1)
	for _, ent := range p.epochs {
		if ent.startOffset > offset {
			break
		}
		e = ent.epoch
	}
	return e
}

// latestEpoch is the newest epoch in the cache (-1 when empty).
func (p *Partition) latestEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.epochs) == 0 {
		return -1
	}
	return p.epochs[len(p.epochs)-1].epoch
}
