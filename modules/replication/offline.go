package replication

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// Offline partition logs. A Log that finds a corrupt batch among the bytes it stored
// (storage verifies each batch's CRC once before serving it) refuses reads and appends
// with kernel.ErrLogOffline until truncated below the damage: produce and fetch answer
// KAFKA_STORAGE_ERROR (errorCode), Kafka's log-dir failure narrowed to one partition.
// Storage logs the damage once; the request paths do not log it again (storageCode).
//
//   - As leader, the broker resigns: it proposes the ISR without itself with leader -1
//     (AlterPartitionRequest.Resign; the partition's one change in flight), and the
//     controller's next tick elects the first live ISR member in replica order. The
//     proposal is made again (after replica.fetch.backoff.ms when rejected) by every
//     later failed Log call and by the periodic ISR check (maybeShrink) while the
//     partition is led here and offline, so a rejected or dropped one is retried.
//     A leader alone in its ISR cannot resign cleanly: with
//     unclean.leader.election.enable it hands the partition to its first other
//     replica (ISR {it}: an unclean election, records only this log holds may be
//     lost); otherwise the partition stays offline (Kafka's behaviour) until an
//     operator removes the damage (DeleteRecords past the damaged segment).
//   - As follower (leadership moved away, or a follower read found the damage), the
//     next fetch answer first cuts the log at the damage (Log.Truncate at the log
//     end: storage cuts at the bad batch and drops every later segment; the leader's
//     copy is authoritative, so nothing below the damage goes), then the fetcher asks
//     again from the new log end and the replica catches up as any follower.
//   - The leader treats an ISR follower whose fetch offset is below the HW as out of
//     sync at once (maybeShrinkBehindLocked): it lost committed records (a cut at the
//     damage, an unclean restart) and must not be elected before it has them again.
//
// Partition.offline is set by any Log call that answered ErrLogOffline and cleared by
// every truncation or reset (each repairs the log first); it is atomic (set on the
// read path, which takes no partition lock). Partition.offlineNoted makes the
// resignation's log lines once per offline episode.

// storageCode is errorCode(err) for a failed Log call of a request on tp (p: its
// partition, nil when the caller has none at hand), with the call's side effects: an
// offline log (storage logged the damage once) starts a leader's resignation; any
// other storage error is logged here, at most openLogBurst lines per openLogEvery,
// so a failing disk does not log once per request.
func (m *Module) storageCode(p *Partition, tp kernel.TopicPartition, what string, err error) int16 {
	code := errorCode(err)
	if m.storageFailed(p, err) || code != kerr.KafkaStorageError.Code {
		return code
	}
	if ok, dropped := m.storageLog.Allow(m.now()); ok {
		m.log.Error(what, "topic", tp.Topic, "partition", tp.Partition, "err", err, "suppressed", dropped)
	}
	return code
}

// storageFailed handles the error of a Log call on p (nil: unknown): it reports
// whether err is the log being offline (storage logged it: the caller need not) and,
// on a leader, starts its resignation.
func (m *Module) storageFailed(p *Partition, err error) bool {
	if !errors.Is(err, kernel.ErrLogOffline) {
		return false
	}
	if p == nil {
		return true
	}
	p.offline.Store(true)
	if req := p.resign(m.now().UnixMilli()); req != nil {
		m.proposeISR(p, req)
	}
	return true
}

// resign returns the resignation to propose, or nil: not the leader, no
// PartitionChanger, a change already in flight (the next failed call or ISR check
// tries again), a rejected one too recent, or no replica to hand the partition to.
func (p *Partition) resign(nowMs int64) *kernel.AlterPartitionRequest {
	if !p.env.alter {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resignLocked(p.place.Load(), nowMs)
}

// resignLocked is resign with mu held.
func (p *Partition) resignLocked(pl *placement, nowMs int64) *kernel.AlterPartitionRequest {
	if p.closed || pl.leader != p.self || p.pending != nil || nowMs < p.isrRetryMs || !p.offline.Load() {
		return nil
	}
	isr := slices.DeleteFunc(slices.Clone(pl.isr), func(id int32) bool { return id == p.self })
	unclean := false
	if len(isr) == 0 {
		i := slices.IndexFunc(pl.replicas, func(id int32) bool { return id != p.self })
		if i < 0 || !pl.cfg.UncleanLeaderElectionEnable {
			if i >= 0 && !p.offlineNoted {
				p.offlineNoted = true
				p.env.log.Error("partition log offline and no other replica in sync: the partition stays offline (unclean.leader.election.enable is false)",
					"topic", p.tp.Topic, "partition", p.tp.Partition, "replicas", pl.replicas)
			}
			return nil
		}
		isr, unclean = []int32{pl.replicas[i]}, true
	}
	if !p.offlineNoted {
		p.offlineNoted = true
		p.env.log.Warn("partition log offline; resigning leadership", "topic", p.tp.Topic, "partition", p.tp.Partition,
			"isr", isr, "leader_epoch", pl.epoch, "unclean", unclean)
	}
	req := p.proposeLocked(pl, isr)
	req.Resign = true
	// The resigning leader's HW counts only what it has: the maximal ISR of a
	// resignation is the committed ISR (no member joins).
	np := *p.place.Load()
	np.maximal = pl.isr
	p.place.Store(&np)
	return req
}

// cutDamageLocked cuts an offline follower log at its damage (mu held) and reports
// whether the log end moved (the caller then fetches again from the new log end).
func (p *Partition) cutDamageLocked() (bool, error) {
	if !p.offline.Load() {
		return false, nil
	}
	leo := p.log.LogEndOffset()
	if err := p.truncateLocked(leo); err != nil {
		return false, err
	}
	p.env.log.Warn("offline follower log cut at its damage; fetching the rest from the leader",
		"topic", p.tp.Topic, "partition", p.tp.Partition, "old_log_end", leo, "log_end", p.log.LogEndOffset(), "high_watermark", p.hw.Load())
	return p.log.LogEndOffset() != leo, nil
}

// repairedLocked records that a truncation or reset repaired the log (mu held).
func (p *Partition) repairedLocked() {
	p.offline.Store(false)
	p.offlineNoted = false
}
