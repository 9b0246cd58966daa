package txn

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// Coordinator operations on a loaded shard. Each validates under s.mu, marks the id's
// transition pending, writes it without the lock and answers once it is committed.

// newProducerID returns a fresh producer id or the code to answer when no block can
// be reserved (the metadata log has no leader yet, or this broker cannot write it):
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
func (m *Module) newProducerID(ctx context.Context) (int64, *kerr.Error) {
	id, err := m.pids.nextID(ctx)
	if err != nil {
		m.log.Warn("cannot reserve producer ids", "err", err)
		return -1, kerr.CoordinatorLoadInProgress
	}
	return id, nil
}

// initProducerID is InitProducerId with a transactional id. It returns the producer id
// and epoch to hand out.
func (s *shard) initProducerID(ctx context.Context, id string, timeoutMs int32, expected *pidEpoch) (int64, int16, *kerr.Error) {
	s.mu.Lock()
	t, e := s.lookupLocked(id)
	if e == nil && t == nil {
		// A new id: reserve its producer id outside the lock (it may write the
		// metadata log), then create it with epoch -1 (never handed out) unless a
		// concurrent request did first; the bump below makes the epoch 0. The lookup
		// is repeated so that t is the id's entry in the map when it transits (an
		// entry dropped meanwhile, by expiry, must not be written for).
		s.mu.Unlock()
		pid, perr := s.m.newProducerID(ctx)
		if perr != nil {
			return -1, -1, perr
		}
		s.mu.Lock()
		if t, e = s.lookupLocked(id); e == nil && t == nil {
			t = &txnMeta{id: id, cur: txnData{
				ProducerID: pid, LastProducerID: -1, Epoch: -1, LastEpoch: -1,
				TimeoutMs: timeoutMs, State: stEmpty, StartMs: -1, UpdateMs: s.m.now().UnixMilli(),
			}}
			s.txns[id] = t
		}
	}
	if e != nil {
		s.mu.Unlock()
		return -1, -1, e
	}
	newID := func() (int64, *kerr.Error) { return s.m.newProducerID(ctx) }
	next, fence, e := t.initTransit(timeoutMs, expected, newID, s.m.now().UnixMilli())
	if e != nil {
		s.mu.Unlock()
		return -1, -1, e
	}
	t.pending = next
	s.mu.Unlock()
	if e := s.commitOne(ctx, t, next); e != nil {
		return -1, -1, e
	}
	if fence {
		s.m.log.Info("fencing producer: aborting its ongoing transaction", "transactional_id", id,
			"producer_id", next.ProducerID, "bumped_epoch", next.Epoch)
		s.m.jobs.push(s.jobFor(id, next))
		return -1, -1, kerr.ConcurrentTransactions
	}
	return next.ProducerID, next.Epoch, nil
}

// addPartitions is AddPartitionsToTxn (and AddOffsetsToTxn, with the group's
// __consumer_offsets partition) under transaction version tv (2 when a broker adds
// the partition for its produce, KIP-890 part 2).
func (s *shard) addPartitions(ctx context.Context, id string, pid int64, epoch int16, ps []kernel.TopicPartition, tv int16) *kerr.Error {
	_, e := s.transitExisting(ctx, id, func(t *txnMeta, nowMs int64) (*txnData, *kerr.Error) {
		return t.addPartitionsTransit(pid, epoch, ps, tv, nowMs)
	})
	return e
}

// transitExisting applies a transition to the existing transactional id (an unknown
// id is INVALID_PRODUCER_ID_MAPPING): under the shard lock it computes the next state
// with fn and marks it pending, then writes it. It returns the state written, or nil
// when fn found nothing to write.
func (s *shard) transitExisting(ctx context.Context, id string, fn func(t *txnMeta, nowMs int64) (*txnData, *kerr.Error)) (*txnData, *kerr.Error) {
	s.mu.Lock()
	t, e := s.lookupLocked(id)
	if e == nil && t == nil {
		e = kerr.InvalidProducerIDMapping
	}
	if e != nil {
		s.mu.Unlock()
		return nil, e
	}
	next, e := fn(t, s.m.now().UnixMilli())
	if e != nil || next == nil {
		s.mu.Unlock()
		return nil, e
	}
	t.pending = next
	s.mu.Unlock()
	if e := s.commitOne(ctx, t, next); e != nil {
		return nil, e
	}
	return next, nil
}

// endTxn is EndTxn under transaction version tv: it writes PrepareCommit/PrepareAbort,
// answers, and leaves the markers and the Complete* record to a marker worker. It
// returns the producer id and epoch to answer (EndTxn v5+).
func (s *shard) endTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool, tv int16) (pidEpoch, *kerr.Error) {
	answer := pidEpoch{id: -1, epoch: -1}
	newID := func() (int64, *kerr.Error) { return s.m.newProducerID(ctx) }
	next, e := s.transitExisting(ctx, id, func(t *txnMeta, nowMs int64) (*txnData, *kerr.Error) {
		next, a, e := t.endTransit(pid, epoch, commit, tv, newID, nowMs)
		answer = a
		return next, e
	})
	if e != nil {
		return pidEpoch{id: -1, epoch: -1}, e
	}
	if next != nil {
		s.m.jobs.push(s.jobFor(id, next))
	}
	return answer, nil
}

// complete writes Complete* for a transaction whose markers are all written, if the id
// is still in that transaction's Prepare state.
func (s *shard) complete(j *markerJob) {
	s.mu.Lock()
	t, e := s.lookupLocked(j.id)
	if e != nil || t == nil {
		s.mu.Unlock()
		return
	}
	next, ok := t.completeTransit(j.pid, j.epoch, j.commit, s.m.now().UnixMilli())
	if !ok {
		s.mu.Unlock()
		return
	}
	t.pending = next
	s.mu.Unlock()
	if e := s.commitOne(s.Context(), t, next); e != nil {
		s.m.log.Debug("writing the end of a transaction failed; the next load resumes it", "transactional_id", j.id, "err", e)
		return
	}
	s.m.completed.Add(1)
}

// markersWritten records that the job's markers to tps are written.
func (s *shard) markersWritten(j *markerJob, tps []kernel.TopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, e := s.lookupLocked(j.id)
	if e != nil || t == nil || t.cur.ProducerID != j.pid || t.cur.Epoch != j.epoch || !t.cur.State.isPrepare() {
		return
	}
	if t.marked == nil {
		t.marked = map[kernel.TopicPartition]bool{}
	}
	for _, tp := range tps {
		t.marked[tp] = true
	}
}

// snapshot returns a copy of the id's current state; a Prepare* transaction's
// partitions whose marker is written are left out.
func (s *shard) snapshot(id string) (txnData, bool, *kerr.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, e := s.lookupLocked(id)
	if e != nil {
		return txnData{}, false, e
	}
	if t == nil || t.cur.Epoch < 0 && t.pending != nil {
		// Unknown, or a new id whose first record is still being written.
		return txnData{}, false, nil
	}
	d := t.cur.clone()
	if len(t.marked) > 0 {
		d.Partitions = slices.DeleteFunc(d.Partitions, func(tp kernel.TopicPartition) bool { return t.marked[tp] })
	}
	return d, true, nil
}

// each calls fn with a copy of every id's state (ids being created excluded).
func (s *shard) each(fn func(id string, d *txnData)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	for id, t := range s.txns {
		if t.cur.Epoch < 0 && t.pending != nil {
			continue
		}
		d := t.cur.clone()
		fn(id, &d)
	}
}
