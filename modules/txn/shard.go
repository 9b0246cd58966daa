package txn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// A shard is one __transaction_state partition this broker leads, with the
// transactional ids that hash to it (partitionFor). Its life:
//
//	newShard ─► load: replay the partition into txns ─► ready: writer running,
//	            Prepare* transactions resumed (markers, then Complete*) ─► unload
//	            (leadership lost, a failed write, Stop): state dropped, writer stopped
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
	m     *Module
	tp    kernel.TopicPartition
	epoch int32 // leader epoch of tp = coordinator epoch

	ctx    context.Context // cancelled by unload: stops the writer, loads and marker jobs
	cancel context.CancelFunc
	prev   *shard // the shard this one replaced; its writer must finish first

	// loading ends when the replay does (internal/coordinator).
	loading coordinator.Load
	done    chan struct{} // closed when the writer exits (or the load failed)
	writes  chan *writeReq

	mu      sync.Mutex
	dead    bool
	txns    map[string]*txnMeta
	changed chan struct{} // closed (and replaced) when a transition ends; see waitChange
}

// writeReq is one record to append; done gets the outcome (buffered 1).
type writeReq struct {
	key, value []byte
	done       chan *kerr.Error
}

// maxFlushRecords bounds the records of one append.
const maxFlushRecords = 1024

func newShard(m *Module, tp kernel.TopicPartition, epoch int32) *shard {
	ctx, cancel := context.WithCancel(context.Background())
	return &shard{
		m: m, tp: tp, epoch: epoch,
		ctx: ctx, cancel: cancel,
		loading: coordinator.NewLoad(),
		done:    make(chan struct{}),
		writes:  make(chan *writeReq, 256),
		txns:    map[string]*txnMeta{},
		changed: make(chan struct{}),
	}
}

// unload drops the shard's state and stops its writer and marker jobs.
func (s *shard) unload() {
	s.mu.Lock()
	s.dead = true
	s.txns = map[string]*txnMeta{}
	s.mu.Unlock()
	s.cancel()
}

// load replays the partition, resumes the transactions it finds in Prepare*, then runs
// the writer. It owns one m.wg count.
func (s *shard) load() {
	defer s.m.wg.Done()
	if s.prev != nil {
		select {
		case <-s.prev.done:
		case <-s.ctx.Done():
		}
		s.prev = nil
	}
	start := time.Now()
	n, err := s.replay()
	if err == nil && s.ctx.Err() != nil {
		err = s.ctx.Err()
	}
	if err != nil {
		close(s.done)
		s.loading.Done(err)
		if !errors.Is(err, context.Canceled) {
			s.m.log.Warn("loading __transaction_state partition failed", "partition", s.tp.Partition, "err", err)
		}
		return
	}
	s.m.wg.Add(1)
	var resume []*markerJob
	s.mu.Lock()
	for _, t := range s.txns {
		if t.cur.State.isPrepare() {
			resume = append(resume, s.jobFor(t.id, &t.cur))
		}
	}
	ids := len(s.txns)
	s.mu.Unlock()
	s.loading.Done(nil)
	s.m.log.Info("coordinating __transaction_state partition", "partition", s.tp.Partition,
		"leader_epoch", s.epoch, "replayed_records", n, "transactional_ids", ids,
		"resumed_transactions", len(resume), "took", time.Since(start))
	for _, j := range resume {
		s.m.jobs.push(j)
	}
	s.writer()
}

// replay reads the whole partition into txns; the last record of an id wins, a
// tombstone forgets it.
func (s *shard) replay() (int, error) {
	var d recordbatch.Decoder
	n := 0
	err := s.m.parts.ReadCommitted(s.ctx, s.tp, 0, func(batch []byte) error {
		h, err := recordbatch.ParseHeader(batch)
		if err != nil {
			return err
		}
		if h.IsControl() {
			return nil
		}
		_, err = d.Records(batch, func(r *recordbatch.Record) error {
			n++
			id, err := decodeKey(r.Key)
			if errors.Is(err, errNotTxnRecord) {
				return nil
			}
			if err != nil {
				s.m.log.Warn("skipping unreadable __transaction_state record", "partition", s.tp.Partition, "offset", r.Offset, "err", err)
				return nil
			}
			if r.Value == nil {
				delete(s.txns, id)
				return nil
			}
			v, err := decodeValue(r.Value)
			if err != nil {
				s.m.log.Warn("skipping unreadable __transaction_state record", "partition", s.tp.Partition, "offset", r.Offset, "transactional_id", id, "err", err)
				return nil
			}
			switch v.State {
			case stDead:
				delete(s.txns, id)
				return nil
			case stPrepareEpochFence:
				// Never written by Kafka or Sluice; keep the id as Ongoing so the
				// timeout aborts it.
				v.State = stOngoing
			}
			s.txns[id] = &txnMeta{id: id, cur: v}
			return nil
		})
		return err
	})
	return n, err
}

// writer appends queued records to the partition in batches. It owns one m.wg count.
func (s *shard) writer() {
	defer s.m.wg.Done()
	defer close(s.done)
	var batch []*writeReq
	b, _ := recordbatch.NewBuilder(recordbatch.Options{})
	for {
		select {
		case <-s.ctx.Done():
			s.failQueued()
			return
		case w := <-s.writes:
			batch = append(batch[:0], w)
		}
	more:
		for len(batch) < maxFlushRecords {
			select {
			case w := <-s.writes:
				batch = append(batch, w)
			default:
				break more
			}
		}
		code := s.flush(b, batch)
		for _, w := range batch {
			w.done <- code
		}
	}
}

func (s *shard) failQueued() {
	for {
		select {
		case w := <-s.writes:
			w.done <- kerr.NotCoordinator
		default:
			return
		}
	}
}

// flush appends ws as one batch and waits for it to commit. Any failure drops the
// shard (the append may or may not have happened: a reload finds out).
func (s *shard) flush(b *recordbatch.Builder, ws []*writeReq) *kerr.Error {
	nowMs := s.m.now().UnixMilli()
	if err := b.Reset(recordbatch.Options{BaseTimestamp: nowMs, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}); err != nil {
		return kerr.UnknownServerError
	}
	for _, w := range ws {
		b.Add(&recordbatch.Record{Key: w.key, Value: w.value})
	}
	raw, err := b.AppendTo(nil)
	if err != nil {
		return kerr.UnknownServerError
	}
	if _, err := s.m.parts.Append(s.ctx, s.tp, raw); err != nil {
		code := kerr.CoordinatorNotAvailable
		if errors.Is(err, kernel.ErrNotLeader) || s.ctx.Err() != nil {
			code = kerr.NotCoordinator
		}
		if s.ctx.Err() == nil {
			s.m.log.Warn("appending to __transaction_state failed; reloading the partition", "partition", s.tp.Partition, "records", len(ws), "err", err)
		}
		s.m.dropShard(s) // the writer holds no lock here
		return code
	}
	return nil
}

// write appends one record per transit and waits for each outcome. Waiting does not
// end with ctx: once queued, a record's outcome decides the in-memory state (see
// commit), so only the shard's end stops the wait.
func (s *shard) write(ctx context.Context, recs []*writeReq) []*kerr.Error {
	out := make([]*kerr.Error, len(recs))
	for _, w := range recs {
		w.done = make(chan *kerr.Error, 1)
		select {
		case s.writes <- w:
		case <-s.ctx.Done():
			w.done <- kerr.NotCoordinator
		case <-ctx.Done():
			w.done <- kerr.RequestTimedOut
		}
	}
	for i, w := range recs {
		select {
		case out[i] = <-w.done:
		case <-s.done:
			select {
			case out[i] = <-w.done:
			default:
				out[i] = kerr.NotCoordinator
			}
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
	recs := make([]*writeReq, len(ts))
	for i, tr := range ts {
		recs[i] = &writeReq{key: encodeKey(tr.t.id)}
		if tr.next != nil {
			recs[i].value = encodeValue(tr.next)
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
	codes := s.commit(s.ctx, ts)
	for i, tr := range ts {
		switch {
		case codes[i] != nil:
			s.m.log.Debug("timer transition failed", "transactional_id", tr.t.id, "err", codes[i])
		case tr.next == nil:
			s.m.log.Info("expired transactional id", "transactional_id", tr.t.id, "partition", s.tp.Partition)
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
		case <-s.ctx.Done():
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
