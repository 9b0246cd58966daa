package replication

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// ISR changes: the leader proposes them to the controller through the metadata
// module's kernel.PartitionChanger (Kafka's AlterPartition), one in flight per
// partition. Expansions come from follower fetches (followerFetched), shrinks from a
// periodic check (isrLoop, every replica.lag.time.max.ms / 2, as Kafka).

// alterTimeout bounds one AlterPartition call.
const alterTimeout = 30 * time.Second

// goBG runs fn on a goroutine that Stop waits for; false (fn not run) once stopping.
func (m *Module) goBG(fn func(ctx context.Context)) bool {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	if m.bgStopped || m.runCtx == nil {
		return false
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		fn(m.runCtx)
	}()
	return true
}

// proposeISR sends req (the partition's change in flight) to the controller.
func (m *Module) proposeISR(p *Partition, req *kernel.AlterPartitionRequest) {
	if !m.goBG(func(ctx context.Context) { m.alterPartition(ctx, p, req) }) {
		p.isrChanged(req, nil, 0)
	}
}

// alterPartition proposes req until the controller answers it for good: accepted (the
// new ISR and partition epoch are applied), or rejected because a newer image is
// coming (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...) or
// the proposal is invalid (INELIGIBLE_REPLICA, INVALID_REQUEST): the change is dropped
// and may be proposed again after replica.fetch.backoff.ms. Transient failures
// (NOT_CONTROLLER, REQUEST_TIMED_OUT, a timeout) are retried with a growing pause
// while the proposal is still the partition's change in flight.
func (m *Module) alterPartition(ctx context.Context, p *Partition, req *kernel.AlterPartitionRequest) {
	pause := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, alterTimeout)
		res, err := m.changer.AlterPartition(actx, *req)
		cancel()
		if err == nil {
			if p.isrChanged(req, &res, 0) {
				p.changed()
			}
			m.log.Info("ISR changed", "topic", req.Topic, "partition", req.Partition, "isr", res.ISR,
				"leader_epoch", res.LeaderEpoch, "partition_epoch", res.PartitionEpoch)
			return
		}
		if ctx.Err() != nil {
			p.isrChanged(req, nil, 0)
			return
		}
		if permanentAlterError(err) {
			retry := m.now().Add(m.rcfg.Load().backoff).UnixMilli()
			if p.isrChanged(req, nil, retry) {
				p.changed()
			}
			m.log.Info("ISR change rejected", "topic", req.Topic, "partition", req.Partition, "isr", req.ISR,
				"leader_epoch", req.LeaderEpoch, "partition_epoch", req.PartitionEpoch, "err", err)
			return
		}
		m.log.Warn("ISR change failed; retrying", "topic", req.Topic, "partition", req.Partition, "isr", req.ISR, "err", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			p.isrChanged(req, nil, 0)
			return
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
		if !p.stillProposing(req) {
			return
		}
	}
}

// permanentAlterError reports whether an AlterPartition error ends the proposal.
func permanentAlterError(err error) bool {
	for _, e := range []*kerr.Error{kerr.InvalidUpdateVersion, kerr.FencedLeaderEpoch, kerr.NotLeaderForPartition,
		kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.InvalidRequest, kerr.IneligibleReplica,
		kerr.NewLeaderElected, kerr.OperationNotAttempted} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// isrLoop checks the led partitions for lagging ISR members every
// replica.lag.time.max.ms / 2 until ctx ends.
func (m *Module) isrLoop(ctx context.Context) {
	for {
		lag := m.rcfg.Load().lagMaxMs
		t := time.NewTimer(time.Duration(max(lag/2, 10)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		m.shrinkISRs(m.now().UnixMilli(), lag)
	}
}

// shrinkISRs proposes the ISR shrinks that are due.
func (m *Module) shrinkISRs(nowMs, lagMs int64) {
	m.mu.RLock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		if p.IsLeader() {
			parts = append(parts, p)
		}
	}
	m.mu.RUnlock()
	for _, p := range parts {
		if req := p.maybeShrink(nowMs, lagMs); req != nil {
			if req.Resign { // an offline leader's resignation, logged by itself
				m.proposeISR(p, req)
				continue
			}
			m.log.Info("shrinking ISR", "topic", req.Topic, "partition", req.Partition, "from", p.ISR(), "to", req.ISR,
				"replica_lag_time_max_ms", lagMs)
			m.proposeISR(p, req)
		}
	}
}
