package groups

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/modules/groups/classic"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// Classic group metadata: written to __consumer_offsets when a classic group reaches
// a new Stable generation (by the leader's SyncGroup handler, before it answers, and
// by the sweeper as a fallback) or becomes Empty (by the sweeper); restored when a
// shard loads, as Kafka's GroupMetadataManager does.

// toGroupMetadata maps a classic snapshot to the group metadata record's fields.
func toGroupMetadata(s classic.Snapshot) offsets.GroupMetadata {
	md := offsets.GroupMetadata{
		ProtocolType:          s.ProtocolType,
		Generation:            s.Generation,
		Protocol:              s.Protocol,
		Leader:                s.Leader,
		CurrentStateTimestamp: offsets.NoTimestamp,
	}
	if !s.StateTimestamp.IsZero() {
		md.CurrentStateTimestamp = s.StateTimestamp.UnixMilli()
	}
	for _, m := range s.Members {
		om := offsets.Member{
			MemberID:           m.ID,
			ClientID:           m.ClientID,
			ClientHost:         m.Host,
			RebalanceTimeoutMs: durationMs(m.RebalanceTimeout),
			SessionTimeoutMs:   durationMs(m.SessionTimeout),
			Subscription:       m.Metadata,
			Assignment:         m.Assignment,
		}
		if m.InstanceID != nil {
			om.GroupInstanceID = *m.InstanceID
		}
		md.Members = append(md.Members, om)
	}
	return md
}

func durationMs(d time.Duration) int32 {
	return int32(min(d.Milliseconds(), math.MaxInt32))
}

// fromGroupMetadata maps a group metadata record back to a classic snapshot. Members
// without a session timeout (records Sluice wrote before it stored timeouts) are
// left out: they could only expire at once, so they rejoin instead.
func fromGroupMetadata(md offsets.GroupMetadata) classic.Snapshot {
	s := classic.Snapshot{
		State:        classic.Empty,
		ProtocolType: md.ProtocolType,
		Generation:   md.Generation,
		Protocol:     md.Protocol,
		Leader:       md.Leader,
	}
	if md.CurrentStateTimestamp > 0 {
		s.StateTimestamp = time.UnixMilli(md.CurrentStateTimestamp)
	}
	for _, m := range md.Members {
		if m.SessionTimeoutMs <= 0 {
			continue
		}
		ms := classic.MemberSnapshot{
			ID:               m.MemberID,
			ClientID:         m.ClientID,
			Host:             m.ClientHost,
			RebalanceTimeout: time.Duration(m.RebalanceTimeoutMs) * time.Millisecond,
			SessionTimeout:   time.Duration(m.SessionTimeoutMs) * time.Millisecond,
			Metadata:         m.Subscription,
			Assignment:       m.Assignment,
		}
		if m.GroupInstanceID != "" {
			inst := m.GroupInstanceID
			ms.InstanceID = &inst
		}
		s.Members = append(s.Members, ms)
	}
	if len(s.Members) > 0 {
		s.State = classic.Stable
	}
	return s
}

// restoreGroups brings back, as classic groups, every group of this shard's
// partition that has group metadata in the store: Stable with its members when the
// record has members (their sessions start now), else Empty at its generation. It
// runs at the end of load, before the shard serves requests. It returns how many
// groups it restored.
func (s *shard) restoreGroups() int {
	n := s.m.offsetsPartitions()
	if n <= 0 {
		return 0
	}
	ids, err := s.m.store.Groups()
	if err != nil {
		s.m.log.Warn("listing stored groups failed; groups not restored", "partition", s.tp.Partition, "err", err)
		return 0
	}
	cfg := s.m.settings.Load().classic
	cfg.Server = classicAssigner{s}
	now := s.m.now()
	ccfg := s.consumerConfig()
	restored := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if offsets.PartitionFor(id, n) != s.tp.Partition || s.groups[id] != nil {
			continue
		}
		if g := s.restoreConsumer(id, ccfg, now); g != nil {
			s.groups[id] = g
			restored++
			continue
		}
		if g := s.restoreShare(id, s.shareConfig(), now); g != nil {
			s.groups[id] = g
			restored++
			continue
		}
		md, ok, err := s.m.store.GroupMetadata(id)
		if err != nil {
			s.m.log.Warn("reading group metadata failed; group not restored", "partition", s.tp.Partition, "group", id, "err", err)
			continue
		}
		if !ok {
			continue // offsets only (simple commits)
		}
		g := &group{id: id, classic: classic.Restore(id, cfg, fromGroupMetadata(md), now)}
		g.persistedRev = g.classic.Revision() // the record just read is current
		if g.classic.IsEmpty() && md.CurrentStateTimestamp > 0 {
			g.emptySince = time.UnixMilli(md.CurrentStateTimestamp)
		}
		s.groups[id] = g
		restored++
	}
	return restored
}

// persist writes the records of gs that changed since the last ones written (classic
// group metadata: group.metadataRecord; KIP-848 groups: consumer_persist.go) and waits
// for them. Records are snapshotted and queued under s.metaMu, so one group's records
// reach the log in snapshot order. A KIP-848 group's writeMu is held from its snapshot
// to the end of the write. A group whose records were not written (queue or append
// failure) is marked to be written again in full.
func (s *shard) persist(ctx context.Context, gs ...*group) {
	for _, g := range gs {
		if g.consumer != nil && g.consumer.HasChanges() || g.share != nil && g.share.GroupEpoch() != g.sharePersistedEpoch.Load() {
			g.writeMu.Lock()
			defer g.writeMu.Unlock()
			if g.share != nil {
				g.sharePersistedEpoch.Store(g.share.GroupEpoch())
			}
			s.persistLocked(ctx, g)
		}
	}
	s.persistLocked(ctx, slices.DeleteFunc(slices.Clone(gs), func(g *group) bool { return g.consumer != nil || g.share != nil })...)
}

// persistLocked is persist for classic groups and KIP-848 groups whose writeMu the
// caller holds.
func (s *shard) persistLocked(ctx context.Context, gs ...*group) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s.metaMu.Lock()
	var (
		recs    []kv
		written []*group
		hashes  []map[string]uint64
	)
	for _, g := range gs {
		if g.consumer != nil || g.share != nil {
			var rs []kv
			var next map[string]uint64
			if g.share != nil {
				rs, next = s.shareRecords(g)
			} else {
				rs, next = s.consumerRecords(g)
			}
			if len(rs) > 0 {
				recs = append(recs, rs...)
				written = append(written, g)
				hashes = append(hashes, next)
			}
			continue
		}
		if r := s.metadataRecordOf(g); len(r) > 0 {
			recs = append(recs, r...)
			written = append(written, g)
			hashes = append(hashes, nil)
		}
	}
	if len(recs) == 0 {
		s.metaMu.Unlock()
		return
	}
	var (
		ws []*coordinator.Pending
		e  *kerr.Error
	)
	for rest := recs; len(rest) > 0; {
		k := min(len(rest), maxFlushRecords)
		w, err := s.Enqueue(ctx, toKV(rest[:k]))
		if err != nil {
			e = err
			break
		}
		ws = append(ws, w)
		rest = rest[k:]
	}
	s.metaMu.Unlock()
	for _, w := range ws {
		if err := w.Wait(ctx); err != nil && e == nil {
			e = err
		}
	}
	if e == nil {
		for i, g := range written {
			if hashes[i] != nil {
				g.remember(hashes[i])
			}
		}
		return
	}
	s.metaMu.Lock()
	for _, g := range written {
		if g.consumer != nil || g.share != nil {
			g.full = true // what was written is unknown: write everything next time
		} else {
			g.persistedRev = math.MaxUint64 // never a revision: write again next time
		}
	}
	s.metaMu.Unlock()
	if s.Context().Err() != nil {
		return // unloaded: the next load restores from the last record written
	}
	s.m.log.Warn("writing group records failed", "partition", s.tp.Partition, "groups", len(written), "err", e)
}

// metadataRecordOf is g's classic group metadata record to write, if any, preceded by
// tombstones of the KIP-848 records its id held before (one protocol's records per
// group id). Called with s.metaMu held.
func (s *shard) metadataRecordOf(g *group) []kv {
	r := g.metadataRecord()
	if r == nil {
		return nil
	}
	var out []kv
	if !g.kindChecked {
		g.kindChecked = true
		if recs, err := s.m.store.GroupRecords(g.id); err == nil {
			for _, c := range recs {
				if k, err := offsets.DecodeKey(c.Key); err == nil && (k.IsConsumerGroup() || k.IsShareGroup()) {
					out = append(out, kv{key: c.Key})
				}
			}
		}
	}
	return append(out, *r)
}
