// Persistence of share group membership: Kafka's share group records in
// __consumer_offsets (key versions 10-14), written after each
// ShareGroupHeartbeat that changes them (before it is answered) and after session
// expiry, and replayed when a partition loads, so members keep their epochs and
// assignments across a restart or coordinator move.
//
//	11 group epoch       12 target assignment epoch
//	10 member metadata   13 a member's target partitions
//	14 a member's current assignment (epoch, partitions)
//
// Invariants (as consumer_persist.go): group.writeMu is held from the snapshot to the
// end of the write; a record is written only when its bytes differ from the last ones
// written for its key (group.written); a member's records are tombstoned when it
// leaves; a restore fills group.written from the records it read.

package groups

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/modules/groups/offsets"
	"github.com/sluicehq/sluice/modules/groups/share"
)

// persistShare writes g's share group records that changed and waits for them.
func (s *shard) persistShare(ctx context.Context, g *group) {
	if g.share == nil {
		return
	}
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	g.sharePersistedEpoch.Store(g.share.GroupEpoch())
	s.persistLocked(ctx, g)
}

// shareRecords returns the records of g's state whose bytes differ from what was
// written, tombstones for members gone, and the hashes to remember once written.
// Called with the shard's metaMu and g.writeMu held.
func (s *shard) shareRecords(g *group) ([]kv, map[string]uint64) {
	p := g.share.Snapshot()
	if g.full {
		g.written, g.full = nil, false
	}
	if g.written == nil {
		g.written = map[string]uint64{}
	}
	want := map[string][]byte{}
	put := func(key, value []byte) { want[string(key)] = value }
	if !g.kindChecked {
		g.kindChecked = true
		if _, ok, _ := s.m.store.GroupMetadata(g.id); ok {
			want[string(offsets.EncodeGroupKey(g.id))] = nil // a classic group's record
		}
	}
	put(offsets.EncodeShareGroupKey(offsets.ShareGroupMetadataKeyV11, g.id, ""),
		offsets.EncodeShareGroupMetadata(offsets.ShareGroupMetadata{Epoch: p.GroupEpoch}))
	put(offsets.EncodeShareGroupKey(offsets.ShareGroupTargetMetadataKeyV12, g.id, ""),
		offsets.EncodeShareTargetMetadata(offsets.ShareTargetMetadata{AssignmentEpoch: p.TargetEpoch}))
	for _, m := range p.Members {
		put(offsets.EncodeShareGroupKey(offsets.ShareGroupMemberMetadataKeyV10, g.id, m.ID),
			offsets.EncodeShareMemberMetadata(offsets.ShareMemberMetadata{RackID: m.Rack, ClientID: m.ClientID,
				ClientHost: m.ClientHost, SubscribedTopicNames: m.SubscribedTopicNames}))
		put(offsets.EncodeShareGroupKey(offsets.ShareGroupCurrentAssignmentKeyV14, g.id, m.ID),
			offsets.EncodeShareCurrentAssignment(offsets.ShareCurrentAssignment{MemberEpoch: m.Epoch, PreviousMemberEpoch: m.Epoch,
				Assigned: toTopicPartitions(m.Assigned)}))
	}
	for _, id := range slices.Sorted(maps.Keys(p.Targets)) {
		put(offsets.EncodeShareGroupKey(offsets.ShareGroupTargetMemberKeyV13, g.id, id),
			offsets.EncodeShareTargetMember(offsets.ShareTargetMember{TopicPartitions: toTopicPartitions(p.Targets[id])}))
	}
	next := map[string]uint64{}
	var out []kv
	for _, k := range slices.Sorted(maps.Keys(want)) {
		v := want[k]
		if v == nil {
			out = append(out, kv{key: []byte(k)})
			continue
		}
		h := valueHash(v)
		if old, ok := g.written[k]; ok && old == h {
			continue
		}
		out = append(out, kv{key: []byte(k), value: v})
		next[k] = h
	}
	for _, k := range slices.Sorted(maps.Keys(g.written)) {
		if _, ok := want[k]; !ok {
			out = append(out, kv{key: []byte(k)})
			next[k] = 0
		}
	}
	return out, next
}

// restoreShare rebuilds a share group from its records in the store, or returns nil
// when it has none.
func (s *shard) restoreShare(id string, cfg share.Config, now time.Time) *group {
	recs, err := s.m.store.GroupRecords(id)
	if err != nil {
		s.m.log.Warn("reading share group records failed; group not restored", "partition", s.tp.Partition, "group", id, "err", err)
		return nil
	}
	p := share.Persisted{Targets: map[string]map[assignor.TopicID][]int32{}}
	members := map[string]*share.MemberRecord{}
	member := func(id string) *share.MemberRecord {
		if members[id] == nil {
			members[id] = &share.MemberRecord{ID: id}
		}
		return members[id]
	}
	g := &group{id: id, written: map[string]uint64{}, kindChecked: true}
	found := false
	for _, r := range recs {
		k, err := offsets.DecodeKey(r.Key)
		if err != nil || !k.IsShareGroup() {
			continue
		}
		found = true
		if err := applyShareRecord(k, r.Value, &p, member); err != nil {
			s.m.log.Warn("skipping unreadable share group record", "partition", s.tp.Partition, "group", id, "err", err)
			continue
		}
		g.written[string(r.Key)] = valueHash(r.Value)
	}
	if !found {
		return nil
	}
	for _, mid := range slices.Sorted(maps.Keys(members)) {
		p.Members = append(p.Members, *members[mid])
	}
	g.share = share.Restore(id, cfg, p, s.m.topicView(), now)
	g.sharePersistedEpoch.Store(g.share.GroupEpoch())
	return g
}

// applyShareRecord folds one decoded share group record into p.
func applyShareRecord(k offsets.Key, value []byte, p *share.Persisted, member func(string) *share.MemberRecord) error {
	switch k.Version {
	case offsets.ShareGroupMetadataKeyV11:
		v, err := offsets.DecodeShareGroupMetadata(value)
		if err != nil {
			return err
		}
		p.GroupEpoch = v.Epoch
	case offsets.ShareGroupTargetMetadataKeyV12:
		v, err := offsets.DecodeShareTargetMetadata(value)
		if err != nil {
			return err
		}
		p.TargetEpoch = v.AssignmentEpoch
	case offsets.ShareGroupTargetMemberKeyV13:
		v, err := offsets.DecodeShareTargetMember(value)
		if err != nil {
			return err
		}
		p.Targets[k.Member] = fromTopicPartitions(v.TopicPartitions)
	case offsets.ShareGroupMemberMetadataKeyV10:
		v, err := offsets.DecodeShareMemberMetadata(value)
		if err != nil {
			return err
		}
		m := member(k.Member)
		m.Rack, m.ClientID, m.ClientHost = v.RackID, v.ClientID, v.ClientHost
		m.SubscribedTopicNames = v.SubscribedTopicNames
		if m.SubscribedTopicNames == nil {
			m.SubscribedTopicNames = []string{}
		}
	case offsets.ShareGroupCurrentAssignmentKeyV14:
		v, err := offsets.DecodeShareCurrentAssignment(value)
		if err != nil {
			return err
		}
		m := member(k.Member)
		m.Epoch, m.Assigned = v.MemberEpoch, fromTopicPartitions(v.Assigned)
	}
	return nil
}
