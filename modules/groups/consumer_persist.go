// Persistence of KIP-848 groups: Kafka's consumer group records in __consumer_offsets
// (key versions 3, 5, 6, 7, 8), written before a heartbeat is answered and replayed
// when a partition loads.
//
// What is written, per group (offsets.Encode*):
//
//	3 group epoch and metadata hash    6 target assignment epoch
//	5 member metadata (subscription)   7 a member's target partitions
//	8 a member's current assignment (epoch, previous epoch, state, partitions)
//
// Invariants:
//   - A heartbeat is answered only after every record its change produced is in the
//     log and the store: group.writeMu is held from consumer.TakeChanges until the
//     write is done, so a later heartbeat of the group (which may find nothing left to
//     take) is answered after it too.
//   - A record is written only when its bytes differ from the last ones written for
//     its key (group.written holds their hashes); a member's records are tombstoned
//     when it leaves. A restore fills group.written from the records it read.
//   - A group id holds one protocol's records: the first KIP-848 write of a group
//     with a classic group metadata record tombstones it, and the first classic
//     record of a group with KIP-848 records tombstones those.

package groups

import (
	"context"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/modules/groups/consumer"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// persistConsumer writes g's KIP-848 changes and waits for them (see the invariants).
func (s *shard) persistConsumer(ctx context.Context, g *group) {
	if g.consumer == nil {
		return
	}
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	s.persistLocked(ctx, g)
}

// consumerRecords returns the records of g's changes since the last call whose bytes
// differ from what was written, and the hashes to remember once they are written.
// Called with the shard's metaMu and g.writeMu held.
func (s *shard) consumerRecords(g *group) ([]kv, map[string]uint64) {
	p := g.consumer.TakeChanges()
	if g.full {
		// The last write failed: rewrite everything (members that left meanwhile
		// keep their records until a restore expires them).
		p, g.full = g.consumer.Snapshot(), false
		g.written = nil
	}
	if g.written == nil {
		g.written = map[string]uint64{}
	}
	next := map[string]uint64{}
	var out []kv
	put := func(key, value []byte) {
		k := string(key)
		if value == nil {
			if _, ok := g.written[k]; ok {
				out = append(out, kv{key: key})
				next[k] = 0
			}
			return
		}
		h := valueHash(value)
		if old, ok := g.written[k]; ok && old == h {
			return
		}
		out = append(out, kv{key: key, value: value})
		next[k] = h
	}
	if !g.kindChecked {
		g.kindChecked = true
		if _, ok, _ := s.m.store.GroupMetadata(g.id); ok {
			out = append(out, kv{key: offsets.EncodeGroupKey(g.id)})
		}
	}
	for _, m := range p.Members {
		put(offsets.EncodeConsumerGroupKey(offsets.ConsumerMemberMetadataKeyV5, g.id, m.ID), encodeMemberMetadata(m))
	}
	for _, id := range p.Removed {
		for _, v := range []int16{offsets.ConsumerMemberMetadataKeyV5, offsets.ConsumerTargetMemberKeyV7, offsets.ConsumerCurrentAssignmentKeyV8} {
			put(offsets.EncodeConsumerGroupKey(v, g.id, id), nil)
		}
	}
	put(offsets.EncodeConsumerGroupKey(offsets.ConsumerGroupMetadataKeyV3, g.id, ""),
		offsets.EncodeConsumerGroupMetadata(offsets.ConsumerGroupMetadata{Epoch: p.GroupEpoch, MetadataHash: p.MetadataHash}))
	if p.Target {
		for _, id := range slices.Sorted(maps.Keys(p.Targets)) {
			put(offsets.EncodeConsumerGroupKey(offsets.ConsumerTargetMemberKeyV7, g.id, id),
				offsets.EncodeConsumerTargetMember(offsets.ConsumerTargetMember{TopicPartitions: toTopicPartitions(p.Targets[id])}))
		}
	}
	put(offsets.EncodeConsumerGroupKey(offsets.ConsumerTargetMetadataKeyV6, g.id, ""),
		offsets.EncodeConsumerTargetMetadata(offsets.ConsumerTargetMetadata{AssignmentEpoch: p.TargetEpoch}))
	for _, m := range p.Members {
		put(offsets.EncodeConsumerGroupKey(offsets.ConsumerCurrentAssignmentKeyV8, g.id, m.ID), encodeCurrentAssignment(m))
	}
	return out, next
}

// remember records what a successful write wrote (hash 0: a tombstone).
func (g *group) remember(next map[string]uint64) {
	for k, h := range next {
		if h == 0 {
			delete(g.written, k)
		} else {
			g.written[k] = h
		}
	}
}

func valueHash(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1 // 0 means a tombstone in remember
}

func encodeMemberMetadata(m consumer.MemberRecord) []byte {
	v := offsets.ConsumerMemberMetadata{
		InstanceID: m.InstanceID, RackID: m.Rack, ClientID: m.ClientID, ClientHost: m.ClientHost,
		SubscribedTopicNames: m.SubscribedTopicNames, SubscribedTopicRegex: m.SubscribedTopicRegex,
		ServerAssignor: m.ServerAssignor, RebalanceTimeoutMs: int32(min(m.RebalanceTimeout.Milliseconds(), 1<<31-1)),
	}
	if len(m.ClassicProtocols) > 0 {
		v.Classic = &offsets.ClassicMemberMetadata{SessionTimeoutMs: int32(min(m.ClassicSessionTimeout.Milliseconds(), 1<<31-1))}
		for _, p := range m.ClassicProtocols {
			v.Classic.SupportedProtocols = append(v.Classic.SupportedProtocols, offsets.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
		}
	}
	return offsets.EncodeConsumerMemberMetadata(v)
}

func encodeCurrentAssignment(m consumer.MemberRecord) []byte {
	return offsets.EncodeConsumerCurrentAssignment(offsets.ConsumerCurrentAssignment{
		MemberEpoch: m.Epoch, PreviousMemberEpoch: m.PrevEpoch, State: int8(m.State),
		Assigned: toTopicPartitions(m.Assigned), PendingRevocation: toTopicPartitions(m.Pending),
	})
}

// toTopicPartitions lists a partition set by topic id, in id order.
func toTopicPartitions(set map[assignor.TopicID][]int32) []offsets.TopicPartitions {
	out := make([]offsets.TopicPartitions, 0, len(set))
	for _, id := range slices.SortedFunc(maps.Keys(set), assignor.TopicID.Compare) {
		out = append(out, offsets.TopicPartitions{TopicID: id, Partitions: slices.Clone(set[id])})
	}
	return out
}

func fromTopicPartitions(tps []offsets.TopicPartitions) map[assignor.TopicID][]int32 {
	out := make(map[assignor.TopicID][]int32, len(tps))
	for _, t := range tps {
		out[assignor.TopicID(t.TopicID)] = append(out[assignor.TopicID(t.TopicID)], t.Partitions...)
	}
	return out
}

// restoreConsumer rebuilds a KIP-848 group from its records in the store, or returns
// nil when it has none. Records that do not decode are skipped (logged).
func (s *shard) restoreConsumer(id string, cfg consumer.Config, now time.Time) *group {
	recs, err := s.m.store.GroupRecords(id)
	if err != nil {
		s.m.log.Warn("reading consumer group records failed; group not restored", "partition", s.tp.Partition, "group", id, "err", err)
		return nil
	}
	recs = slices.DeleteFunc(recs, func(r offsets.KV) bool {
		k, err := offsets.DecodeKey(r.Key)
		return err == nil && !k.IsConsumerGroup() // share state records belong to share groups
	})
	if len(recs) == 0 {
		return nil
	}
	p := consumer.Persisted{Target: true, Targets: map[string]map[assignor.TopicID][]int32{}}
	members := map[string]*consumer.MemberRecord{}
	member := func(id string) *consumer.MemberRecord {
		if members[id] == nil {
			members[id] = &consumer.MemberRecord{ID: id}
		}
		return members[id]
	}
	g := &group{id: id, written: map[string]uint64{}, kindChecked: true}
	for _, r := range recs {
		k, err := offsets.DecodeKey(r.Key)
		if err == nil {
			err = applyConsumerRecord(k, r.Value, &p, member)
		}
		if err != nil {
			s.m.log.Warn("skipping unreadable consumer group record", "partition", s.tp.Partition, "group", id, "err", err)
			continue
		}
		g.written[string(r.Key)] = valueHash(r.Value)
	}
	for _, mid := range slices.Sorted(maps.Keys(members)) {
		p.Members = append(p.Members, *members[mid])
	}
	g.consumer = consumer.Restore(id, cfg, p, s.m.topicView(), now)
	return g
}

// applyConsumerRecord folds one decoded record into p.
func applyConsumerRecord(k offsets.Key, value []byte, p *consumer.Persisted, member func(string) *consumer.MemberRecord) error {
	switch k.Version {
	case offsets.ConsumerGroupMetadataKeyV3:
		v, err := offsets.DecodeConsumerGroupMetadata(value)
		if err != nil {
			return err
		}
		p.GroupEpoch, p.MetadataHash = v.Epoch, v.MetadataHash
	case offsets.ConsumerTargetMetadataKeyV6:
		v, err := offsets.DecodeConsumerTargetMetadata(value)
		if err != nil {
			return err
		}
		p.TargetEpoch = v.AssignmentEpoch
	case offsets.ConsumerTargetMemberKeyV7:
		v, err := offsets.DecodeConsumerTargetMember(value)
		if err != nil {
			return err
		}
		p.Targets[k.Member] = fromTopicPartitions(v.TopicPartitions)
	case offsets.ConsumerMemberMetadataKeyV5:
		v, err := offsets.DecodeConsumerMemberMetadata(value)
		if err != nil {
			return err
		}
		m := member(k.Member)
		m.InstanceID, m.Rack, m.ClientID, m.ClientHost = v.InstanceID, v.RackID, v.ClientID, v.ClientHost
		m.SubscribedTopicNames = v.SubscribedTopicNames
		if m.SubscribedTopicNames == nil {
			m.SubscribedTopicNames = []string{}
		}
		m.SubscribedTopicRegex, m.ServerAssignor = v.SubscribedTopicRegex, v.ServerAssignor
		m.RebalanceTimeout = time.Duration(v.RebalanceTimeoutMs) * time.Millisecond
		m.ClassicProtocols, m.ClassicSessionTimeout = nil, 0
		if v.Classic != nil {
			m.ClassicSessionTimeout = time.Duration(v.Classic.SessionTimeoutMs) * time.Millisecond
			for _, p := range v.Classic.SupportedProtocols {
				m.ClassicProtocols = append(m.ClassicProtocols, consumer.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
			}
		}
	case offsets.ConsumerCurrentAssignmentKeyV8:
		v, err := offsets.DecodeConsumerCurrentAssignment(value)
		if err != nil {
			return err
		}
		m := member(k.Member)
		m.Epoch, m.PrevEpoch, m.State = v.MemberEpoch, v.PreviousMemberEpoch, consumer.MemberState(v.State)
		m.Assigned, m.Pending = fromTopicPartitions(v.Assigned), fromTopicPartitions(v.PendingRevocation)
	}
	return nil
}
