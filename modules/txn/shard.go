package txn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/kernel"
)

// A shard is one __transaction_state partition this broker leads, with the
// transactional ids that hash to it (partitionFor): the state machine the
// coordinator skeleton (internal/coordinator) loads, writes for and sweeps. Its life:
//
//	load: replay the partition into txns ─► ready: Prepare* transactions resumed
//	(markers, then Complete*) ─► Unload (leadership lost, a failed write, Stop):
//	state dropped
//
// Invariants:
//   - Records reach the partition only through the shard's single writer, and an
//     id's next transition starts only after its previous one's record is committed
//     (txnMeta.pending), so per id the log's order is the transition order.
//   - A failed or ambiguous append (anything but success) drops the shard: the next
//     load replays the log, so memory never holds what the log does not, nor the
//     reverse.
//   - One leader epoch, one shard; its epoch is the coordinator epoch of the markers
//     it writes, so a deposed coordinator's late markers are refused by the partitions
//     (TRANSACTION_COORDINATOR_FENCED).
type shard struct {
	*coordinator.Shard // partition, leader epoch (= coordinator epoch), writer; its
	// Context ends at unload: it stops the writer and the shard's marker jobs
	m *Module

	mu      sync.Mutex
	dead    bool
	txns    map[string]*txnMeta
	changed chan struct{} // closed (and replaced) when a transition ends; see waitChange
}

// maxFlushRecords bounds the records of one append.
const maxFlushRecords = 1024

func newShard(m *Module, sh *coordinator.Shard) *shard {
	return &shard{Shard: sh, m: m, txns: map[string]*txnMeta{}, changed: make(chan struct{})}
}

// Unload drops the shard's state (coordinator.State).
func (s *shard) Unload(*kerr.Error) {
	s.mu.Lock()
	s.dead = true
	s.txns = map[string]*txnMeta{}
	s.mu.Unlock()
}

// ReplayFrom: the whole partition (coordinator.State).
func (s *shard) ReplayFrom() int64 { return 0 }

// Replay reads a batch into txns; the last record of an id wins, a tombstone forgets
// it (coordinator.State).
func (s *shard) Replay(b coordinator.Batch) error {
	for _, r := range b.Records {
		id, err := decodeKey(r.Key)
		if errors.Is(err, errNotTxnRecord) {
			continue
		}
		if err != nil {
			s.m.log.Warn("skipping unreadable __transaction_state record", "partition", s.TP().Partition, "offset", r.Offset, "err", err)
			continue
		}
		if r.Value == nil {
			delete(s.txns, id)
			continue
		}
		v, err := decodeValue(r.Value)
		if err != nil {
			s.m.log.Warn("skipping unreadable __transaction_state record", "partition", s.TP().Partition, "offset", r.Offset, "transactional_id", id, "err", err)
			continue
		}
		switch v.State {
		case stDead:
			delete(s.txns, id)
			continue
		case stPrepareEpochFence:
			// Never written by Kafka or Sluice; keep the id as Ongoing so the
			// timeout aborts it.
			v.State = stOngoing
		}
		s.txns[id] = &txnMeta{id: id, cur: v}
	}
	return nil
}

// Loaded resumes the transactions the replay found in Prepare*: their markers, then
// Complete* (coordinator.State).
func (s *shard) Loaded() ([]any, error) {
	var resume []*markerJob
	s.mu.Lock()
	for _, t := range s.txns {
		if t.cur.State.isPrepare() {
			resume = append(resume, s.jobFor(t.id, &t.cur))
		}
	}
	ids := len(s.txns)
	s.mu.Unlock()
	for _, j := range resume {
		s.m.jobs.push(j)
	}
	return []any{"transactional_ids", ids, "resumed_transactions", len(resume)}, nil
}

// Appended: commit applies a write once it returns (coordinator.State).
func (s *shard) Appended([]coordinator.Record, *coordinator.Producer) error { return nil }

// Sweep aborts timed-out transactions and expires idle ids (coordinator.State).
func (s *shard) Sweep(now time.Time) { s.tick(now.UnixMilli(), s.m.settings.Load().idExpirationMs) }

// write appends one record per transit and waits for each outcome. Waiting does not
// end with ctx: once queued, a record's outcome decides the in-memory state (see
// commit), so only the shard's end stops the wait.
func (s *shard) write(ctx context.Context, recs []coordinator.KV) []*kerr.Error {
	out := make([]*kerr.Error, len(recs))
	ws := make([]*coordinator.Pending, len(recs))
	for i := range recs {
		ws[i], out[i] = s.Enqueue(ctx, recs[i:i+1])
	}
	for i, w := range ws {
		if w != nil {
			out[i] = w.Wait(context.Background())
		}
	}
	return out
}

// transit is a transition being written: t.pending == next until commit.
type transit struct {
	t    *txnMeta
	next *txnData // nil: a tombstone (expiry)
}

// commit writes the transits' records and applies the successful ones: cur = next
// (or, for a tombstone, the id is forgotten). Call without s.mu, with each t.pending
// set (under s.mu) to the transit's pending state.
func (s *shard) commit(ctx context.Context, ts []transit) []*kerr.Error {
	recs := make([]coordinator.KV, len(ts))
	for i, tr := range ts {
		recs[i].Key = encodeKey(tr.t.id)
		if tr.next != nil {
			recs[i].Value = encodeValue(tr.next)
		}
	}
	codes := s.write(ctx, recs)
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed) // wake requests waiting out CONCURRENT_TRANSACTIONS
	s.changed = make(chan struct{})
	for i, tr := range ts {
		t := tr.t
		if codes[i] != nil {
			t.pending = nil
			continue
		}
		if tr.next == nil {
			if s.txns[t.id] == t {
				delete(s.txns, t.id)
			}
			t.pending = nil
			continue
		}
		t.cur = *tr.next
		t.pending = nil
		t.marked = nil
	}
	return codes
}

func (s *shard) commitOne(ctx context.Context, t *txnMeta, next *txnData) *kerr.Error {
	return s.commit(ctx, []transit{{t: t, next: next}})[0]
}

// jobFor returns the marker job that ends a Prepare* transaction d of id.
func (s *shard) jobFor(id string, d *txnData) *markerJob {
	return &markerJob{
		s: s, id: id,
		pid: d.ProducerID, epoch: d.Epoch,
		commit: d.State == stPrepareCommit,
		tv:     d.ClientTV,
		parts:  d.Partitions,
	}
}

// tick aborts the shard's timed-out transactions (bumping the epoch) and writes
// tombstones for ids idle longer than expirationMs.
func (s *shard) tick(nowMs, expirationMs int64) {
	var ts []transit
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return
	}
	for _, t := range s.txns {
		if next, ok := t.timeoutTransit(nowMs); ok {
			t.pending = next
			ts = append(ts, transit{t: t, next: next})
			continue
		}
		if t.expired(nowMs, expirationMs) {
			t.pending = &txnData{State: stDead}
			ts = append(ts, transit{t: t})
		}
	}
	s.mu.Unlock()
	if len(ts) == 0 {
		return
	}
	codes := s.commit(s.Context(), ts)
	for i, tr := range ts {
		switch {
		case codes[i] != nil:
			s.m.log.Debug("timer transition failed", "transactional_id", tr.t.id, "err", codes[i])
		case tr.next == nil:
			s.m.log.Info("expired transactional id", "transactional_id", tr.t.id, "partition", s.TP().Partition)
		default:
			s.m.timedOut.Add(1)
			s.m.log.Info("aborting timed-out transaction", "transactional_id", tr.t.id,
				"producer_id", tr.next.ProducerID, "bumped_epoch", tr.next.Epoch, "partitions", len(tr.next.Partitions))
			s.m.jobs.push(s.jobFor(tr.t.id, tr.next))
		}
	}
}

// retryConcurrent runs op, and while it answers CONCURRENT_TRANSACTIONS (a transition
// of the id is being written, or its markers are: both usually take well under a
// millisecond) runs it again after the shard's next transition, for at most
// ConcurrentWaitMs. The answer is the one the client would get by retrying, without
// its backoff (20 ms or more): a producer that begins its next transaction right
// after EndTxn does not wait for it.
func (s *shard) retryConcurrent(ctx context.Context, op func() *kerr.Error) *kerr.Error {
	var deadline <-chan time.Time
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		e := op()
		if e != kerr.ConcurrentTransactions || s.m.ConcurrentWaitMs <= 0 {
			return e
		}
		if deadline == nil {
			t := time.NewTimer(time.Duration(s.m.ConcurrentWaitMs) * time.Millisecond)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
		case <-deadline:
			return e
		case <-ctx.Done():
			return e
		case <-s.Context().Done():
			return e
		}
	}
}

// lookup returns the id's metadata, or NOT_COORDINATOR once the shard is unloaded.
// Call with s.mu held.
func (s *shard) lookupLocked(id string) (*txnMeta, *kerr.Error) {
	if s.dead {
		return nil, kerr.NotCoordinator
	}
	return s.txns[id], nil
}

// verify is VerifyTxnPartition's check on a loaded shard.
func (s *shard) verify(id string, pid int64, epoch int16, tp kernel.TopicPartition) *kerr.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, e := s.lookupLocked(id)
	if e != nil {
		return e
	}
	if t == nil {
		return kerr.InvalidProducerIDMapping
	}
	return t.verify(pid, epoch, tp)
}
