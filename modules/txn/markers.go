package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	tv     int16 // the transaction's version: 2 has the partitions check the bump
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
	results, ok := m.writeJobMarkers(ctx, j)
	if !ok {
		return
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

// writeJobMarkers writes the job's pending markers once and returns each one's
// outcome; ok is false when ctx ended first. A partition this broker leads (or whose
// leader the image does not know yet) is written through the replication module, at
// most MarkerPartitionConcurrency at once; the partitions another broker leads get one
// WriteTxnMarkers request per broker, all brokers at once. A partition whose topic is
// gone is done: there is nothing left to mark.
func (m *Module) writeJobMarkers(ctx context.Context, j *markerJob) ([]markerResult, bool) {
	im := m.meta.Image()
	results := make([]markerResult, len(j.pending))
	var local []int
	remote := map[int32][]int{}
	for i, tp := range j.pending {
		p := im.Partition(tp.Topic, tp.Partition)
		switch {
		case p == nil:
			m.log.Info("skipping the transaction marker of a deleted partition", "transactional_id", j.id, "topic", tp.Topic, "partition", tp.Partition)
			results[i] = markerDone
		case p.Leader >= 0 && p.Leader != m.broker.NodeID && m.peers != nil:
			remote[p.Leader] = append(remote[p.Leader], i)
		default:
			local = append(local, i)
		}
	}
	var wg sync.WaitGroup
	for broker, idx := range remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.writeRemoteMarkers(ctx, j, broker, idx, results)
		}()
	}
	sem := make(chan struct{}, m.MarkerPartitionConcurrency)
	for _, i := range local {
		if len(local) == 1 {
			results[i] = m.writeMarker(ctx, j, j.pending[i])
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, false
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = m.writeMarker(ctx, j, j.pending[i])
		}()
	}
	wg.Wait()
	return results, true
}

// marker is the job's marker as the partitions see it.
func (j *markerJob) marker() kernel.TxnMarker {
	return kernel.TxnMarker{ProducerID: j.pid, ProducerEpoch: j.epoch, CoordinatorEpoch: j.s.Epoch(), Commit: j.commit,
		TransactionVersion: j.tv}
}

// writeMarker writes the job's marker to tp, which this broker leads, once.
func (m *Module) writeMarker(ctx context.Context, j *markerJob, tp kernel.TopicPartition) markerResult {
	err := m.markers.WriteTxnMarker(ctx, tp, j.marker())
	switch {
	case err == nil:
		return markerDone
	case ctx.Err() != nil:
		return markerFenced
	case errors.Is(err, kernel.ErrInvalidProducerEpoch), errors.Is(err, kernel.ErrTxnCoordinatorFenced):
		m.markerRefused(j, tp, err)
		return markerFenced
	}
	m.markerFailed(j, tp, err)
	return markerRetry
}

// writeRemoteMarkers writes the job's marker to the partitions pending[idx], which
// broker leads, with one WriteTxnMarkers request, and sets their results.
func (m *Module) writeRemoteMarkers(ctx context.Context, j *markerJob, broker int32, idx []int, results []markerResult) {
	mk := j.marker()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = mk.ProducerID, mk.ProducerEpoch, mk.Commit, mk.CoordinatorEpoch
	rm.TransactionVersion = int8(mk.TransactionVersion) // v2+; an older broker checks as for version 0
	byTopic := map[string]int{}
	for _, i := range idx {
		tp := j.pending[i]
		k, ok := byTopic[tp.Topic]
		if !ok {
			k = len(rm.Topics)
			byTopic[tp.Topic] = k
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			rm.Topics = append(rm.Topics, rt)
		}
		rm.Topics[k].Partitions = append(rm.Topics[k].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	codes := map[kernel.TopicPartition]int16{}
	kresp, err := m.peers.Request(ctx, broker, req)
	if err == nil {
		for _, rm := range kresp.(*kmsg.WriteTxnMarkersResponse).Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					codes[kernel.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
				}
			}
		}
	}
	for _, i := range idx {
		tp := j.pending[i]
		code, answered := codes[tp]
		switch {
		case ctx.Err() != nil:
			results[i] = markerFenced
		case err != nil:
			m.markerFailed(j, tp, fmt.Errorf("broker %d: %w", broker, err))
			results[i] = markerRetry
		case !answered:
			m.markerFailed(j, tp, fmt.Errorf("broker %d left the partition out of its answer", broker))
			results[i] = markerRetry
		case code == 0:
			results[i] = markerDone
		case code == kerr.InvalidProducerEpoch.Code || code == kerr.TransactionCoordinatorFenced.Code:
			m.markerRefused(j, tp, fmt.Errorf("broker %d: %w", broker, kerr.ErrorForCode(code)))
			results[i] = markerFenced
		default:
			// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...: the
			// next attempt finds the partition's leader in a newer image. A deleted
			// topic is noticed there too (UNKNOWN_TOPIC_OR_PARTITION meanwhile).
			m.markerFailed(j, tp, fmt.Errorf("broker %d: %w", broker, kerr.ErrorForCode(code)))
			results[i] = markerRetry
		}
	}
}

// markerRefused logs a marker refused for good: a newer coordinator or producer epoch
// took over, so this job writes nothing more.
func (m *Module) markerRefused(j *markerJob, tp kernel.TopicPartition, err error) {
	m.log.Warn("transaction marker refused: a newer coordinator or producer epoch took over; not completing",
		"transactional_id", j.id, "producer_id", j.pid, "epoch", j.epoch, "coordinator_epoch", j.s.Epoch(),
		"topic", tp.Topic, "partition", tp.Partition, "err", err)
}

// markerFailed logs a transient marker failure, once every 20 attempts of the job.
func (m *Module) markerFailed(j *markerJob, tp kernel.TopicPartition, err error) {
	if j.attempt%20 == 0 {
		m.log.Warn("writing a transaction marker failed; retrying", "transactional_id", j.id,
			"topic", tp.Topic, "partition", tp.Partition, "attempt", j.attempt+1, "err", err)
	}
}
