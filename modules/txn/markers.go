package txn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// markerJob ends one transaction: a marker to each of its partitions, then the
// Complete* record.
type markerJob struct {
	s      *shard
	id     string
	pid    int64
	epoch  int16
	commit bool
	parts  []kernel.TopicPartition // not modified
}

// jobQueue is an unbounded FIFO of marker jobs served by MarkerConcurrency workers, so
// EndTxn never waits for a worker and the goroutines stay bounded.
type jobQueue struct {
	mu     sync.Mutex
	q      []*markerJob
	signal chan struct{} // capacity 1: "the queue may be non-empty"
	closed bool
}

func (q *jobQueue) init() {
	q.mu.Lock()
	q.signal = make(chan struct{}, 1)
	q.mu.Unlock()
}

func (q *jobQueue) push(j *markerJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.signal == nil {
		return // stopping: the log keeps Prepare*, the next load resumes it
	}
	q.q = append(q.q, j)
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// pop returns the next job, or nil once ctx ends.
func (q *jobQueue) pop(ctx context.Context) *markerJob {
	for {
		q.mu.Lock()
		if len(q.q) > 0 {
			j := q.q[0]
			q.q[0] = nil
			q.q = q.q[1:]
			if len(q.q) > 0 {
				select {
				case q.signal <- struct{}{}: // wake another worker
				default:
				}
			}
			q.mu.Unlock()
			return j
		}
		sig := q.signal
		q.mu.Unlock()
		select {
		case <-sig:
		case <-ctx.Done():
			return nil
		}
	}
}

func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.q = nil
	q.mu.Unlock()
}

// markerWorker runs marker jobs until ctx ends. It owns one m.wg count.
func (m *Module) markerWorker(ctx context.Context) {
	defer m.wg.Done()
	for {
		j := m.jobs.pop(ctx)
		if j == nil {
			return
		}
		m.runJob(j)
	}
}

// runJob writes the job's markers, its partitions in parallel (at most
// MarkerPartitionConcurrency at once), then completes the transaction.
//
// Invariant: Complete* is written only after every partition's marker is committed
// (or its topic is gone); a job that cannot write a marker (the shard was unloaded, or
// a newer coordinator or producer epoch fenced it) writes nothing more, and the
// transaction stays Prepare* in the log until a coordinator resumes it.
func (m *Module) runJob(j *markerJob) {
	ctx := j.s.ctx
	if m.markers == nil {
		if !m.noMarkerWarns.Swap(true) {
			m.log.Error("cannot end transactions: the replication module writes no markers", "transactional_id", j.id)
		}
		return
	}
	var failed atomic.Bool
	if len(j.parts) == 1 {
		failed.Store(!m.writeMarker(ctx, j, j.parts[0]))
	} else {
		sem := make(chan struct{}, m.MarkerPartitionConcurrency)
		var wg sync.WaitGroup
	loop:
		for _, tp := range j.parts {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				failed.Store(true)
				break loop
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if !m.writeMarker(ctx, j, tp) {
					failed.Store(true)
				}
			}()
		}
		wg.Wait()
	}
	if failed.Load() || ctx.Err() != nil {
		return
	}
	j.s.complete(j)
}

// writeMarker writes the job's marker to tp, retrying with backoff while the partition
// has no leader here, until it is written (true) or cannot be (false: the shard was
// unloaded, or the partition fenced this coordinator or this producer epoch). A
// partition whose topic is gone is skipped (true): there is nothing left to mark.
func (m *Module) writeMarker(ctx context.Context, j *markerJob, tp kernel.TopicPartition) bool {
	mk := kernel.TxnMarker{ProducerID: j.pid, ProducerEpoch: j.epoch, CoordinatorEpoch: j.s.epoch, Commit: j.commit}
	backoff := time.Duration(m.MarkerRetryBackoffMs) * time.Millisecond
	for attempt := 0; ; attempt++ {
		if m.meta.Image().Partition(tp.Topic, tp.Partition) == nil {
			m.log.Info("skipping the transaction marker of a deleted partition", "transactional_id", j.id, "topic", tp.Topic, "partition", tp.Partition)
			return true
		}
		err := m.markers.WriteTxnMarker(ctx, tp, mk)
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil:
			return false
		case errors.Is(err, kernel.ErrInvalidProducerEpoch), errors.Is(err, kernel.ErrTxnCoordinatorFenced):
			m.log.Warn("transaction marker refused: a newer coordinator or producer epoch took over; not completing",
				"transactional_id", j.id, "producer_id", j.pid, "epoch", j.epoch, "coordinator_epoch", j.s.epoch,
				"topic", tp.Topic, "partition", tp.Partition, "err", err)
			return false
		}
		if attempt%20 == 0 {
			m.log.Warn("writing a transaction marker failed; retrying", "transactional_id", j.id,
				"topic", tp.Topic, "partition", tp.Partition, "attempt", attempt+1, "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		backoff = min(2*backoff, time.Second)
	}
}
