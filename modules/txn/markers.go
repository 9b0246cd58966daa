package txn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// markerJob ends one transaction: a marker to each of its partitions, then the
// Complete* record. parts, pid, epoch and commit never change; pending (the
// partitions still without a marker), attempt and backoff belong to the worker that
// runs the job (one at a time: a job is in the queue, with a worker, or waiting for
// its retry timer).
type markerJob struct {
	s      *shard
	id     string
	pid    int64
	epoch  int16
	commit bool
	parts  []kernel.TopicPartition

	pending []kernel.TopicPartition // nil: not started (all of parts)
	attempt int
	backoff time.Duration
}

// jobQueue is an unbounded FIFO of marker jobs served by MarkerConcurrency workers, so
// EndTxn never waits for a worker and the goroutines stay bounded.
type jobQueue struct {
	mu     sync.Mutex
	q      []*markerJob
	signal chan struct{} // capacity 1: "the queue may be non-empty"
	closed bool
	timers map[*time.Timer]struct{} // retries waiting for their backoff (later)
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

// later pushes j after d, unless the queue is closed first.
func (q *jobQueue) later(d time.Duration, j *markerJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if q.timers == nil {
		q.timers = map[*time.Timer]struct{}{}
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		q.mu.Lock()
		delete(q.timers, t)
		q.mu.Unlock()
		q.push(j)
	})
	q.timers[t] = struct{}{}
}

// close drops the queued jobs and the waiting retries; later pushes are ignored.
func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.q = nil
	for t := range q.timers {
		t.Stop()
	}
	q.timers = nil
	q.mu.Unlock()
}

// markerWorker runs marker jobs until ctx ends (started with m.coord.Go).
func (m *Module) markerWorker(ctx context.Context) {
	for {
		j := m.jobs.pop(ctx)
		if j == nil {
			return
		}
		m.runJob(j)
	}
}

// runJob tries to write the job's pending markers, its partitions in parallel (at
// most MarkerPartitionConcurrency at once). When all are written it completes the
// transaction; when some failed with a retriable error the job goes back to the
// queue after a backoff (doubling up to 1s), so a partition without a leader never
// holds a worker.
//
// Invariant: Complete* is written only after every partition's marker is committed
// (or its topic is gone); a job that cannot write a marker (the shard was unloaded, or
// a newer coordinator or producer epoch fenced it) writes nothing more, and the
// transaction stays Prepare* in the log until a coordinator resumes it.
func (m *Module) runJob(j *markerJob) {
	ctx := j.s.Context()
	if ctx.Err() != nil {
		return
	}
	if m.markers == nil {
		if !m.noMarkerWarns.Swap(true) {
			m.log.Error("cannot end transactions: the replication module writes no markers", "transactional_id", j.id)
		}
		return
	}
	if j.pending == nil {
		j.pending = j.parts
		j.backoff = time.Duration(m.MarkerRetryBackoffMs) * time.Millisecond
	}
	results := make([]markerResult, len(j.pending))
	if len(j.pending) == 1 {
		results[0] = m.writeMarker(ctx, j, j.pending[0])
	} else {
		sem := make(chan struct{}, m.MarkerPartitionConcurrency)
		var wg sync.WaitGroup
		for i, tp := range j.pending {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				results[i] = m.writeMarker(ctx, j, tp)
			}()
		}
		wg.Wait()
	}
	var retry, done []kernel.TopicPartition
	for i, r := range results {
		switch r {
		case markerFenced:
			return
		case markerRetry:
			retry = append(retry, j.pending[i])
		case markerDone:
			done = append(done, j.pending[i])
		}
	}
	if ctx.Err() != nil {
		return
	}
	if len(retry) == 0 {
		j.s.complete(j)
		return
	}
	j.s.markersWritten(j, done)
	j.pending = retry
	j.attempt++
	d := j.backoff
	j.backoff = min(2*j.backoff, time.Second)
	// After Stop the retry is dropped (the queue is closed): the transaction stays
	// Prepare* in the log and the next load resumes it.
	m.jobs.later(d, j)
}

// markerResult is the outcome of one marker write.
type markerResult int8

const (
	markerDone   markerResult = iota // written, or its topic is gone
	markerRetry                      // a transient failure (no leader here, ...)
	markerFenced                     // refused for good, or the shard was unloaded
)

// writeMarker writes the job's marker to tp once. A partition whose topic is gone is
// skipped (done): there is nothing left to mark.
func (m *Module) writeMarker(ctx context.Context, j *markerJob, tp kernel.TopicPartition) markerResult {
	if m.meta.Image().Partition(tp.Topic, tp.Partition) == nil {
		m.log.Info("skipping the transaction marker of a deleted partition", "transactional_id", j.id, "topic", tp.Topic, "partition", tp.Partition)
		return markerDone
	}
	mk := kernel.TxnMarker{ProducerID: j.pid, ProducerEpoch: j.epoch, CoordinatorEpoch: j.s.Epoch(), Commit: j.commit}
	err := m.markers.WriteTxnMarker(ctx, tp, mk)
	switch {
	case err == nil:
		return markerDone
	case ctx.Err() != nil:
		return markerFenced
	case errors.Is(err, kernel.ErrInvalidProducerEpoch), errors.Is(err, kernel.ErrTxnCoordinatorFenced):
		m.log.Warn("transaction marker refused: a newer coordinator or producer epoch took over; not completing",
			"transactional_id", j.id, "producer_id", j.pid, "epoch", j.epoch, "coordinator_epoch", j.s.Epoch(),
			"topic", tp.Topic, "partition", tp.Partition, "err", err)
		return markerFenced
	}
	if j.attempt%20 == 0 {
		m.log.Warn("writing a transaction marker failed; retrying", "transactional_id", j.id,
			"topic", tp.Topic, "partition", tp.Partition, "attempt", j.attempt+1, "err", err)
	}
	return markerRetry
}
