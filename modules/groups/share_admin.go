package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// shareAdminGroup checks a share-group admin request for group: op on the group, its
// coordinator here, and the group a share group or unknown (an empty group's state
// outlives it in memory). mustBeEmpty refuses a group with members (NON_EMPTY_GROUP).
func (m *Module) shareAdminGroup(ctx context.Context, req *kernel.Request, op kernel.Operation, group string, mustBeEmpty bool) (*shard, *kerr.Error) {
	s, e := m.groupShard(ctx, req, op, group)
	if e != nil {
		return nil, e
	}
	if g := s.lookup(group); g != nil {
		switch {
		case g.share == nil && !g.isEmpty():
			return nil, kerr.GroupIDNotFound
		case mustBeEmpty && !g.isEmpty():
			return nil, kerr.NonEmptyGroup
		}
	}
	return s, nil
}

// shareStates returns every share-partition state stored for group, by topic id.
func (m *Module) shareStates(group string) (map[[16]byte]map[int32]offsets.ShareState, error) {
	recs, err := m.store.GroupRecords(group)
	if err != nil {
		return nil, err
	}
	out := map[[16]byte]map[int32]offsets.ShareState{}
	for _, r := range recs {
		k, err := offsets.DecodeKey(r.Key)
		if err != nil || k.Version != offsets.ShareStateKeyV1001 {
			continue
		}
		st, err := offsets.DecodeShareState(r.Value)
		if err != nil {
			continue
		}
		if out[k.TopicID] == nil {
			out[k.TopicID] = map[int32]offsets.ShareState{}
		}
		out[k.TopicID][k.Partition] = st
	}
	return out, nil
}

// shareLag is what a share group has not finished on a partition: from its start
// offset to the high watermark, less the offsets in its window already acknowledged
// or archived; -1 when the high watermark is unknown.
func shareLag(st offsets.ShareState, hw int64) int64 {
	if hw < 0 {
		return -1
	}
	lag := hw - st.StartOffset
	for _, b := range st.Batches {
		if b.DeliveryState == 2 || b.DeliveryState == 4 {
			lag -= min(b.LastOffset, hw-1) - b.FirstOffset + 1
		}
	}
	return max(lag, 0)
}

// highWatermarks returns the high watermark of each of tps this broker or (through
// kernel.LeaderOffsets) its leader knows; missing ones are unknown.
func (m *Module) highWatermarks(ctx context.Context, tps []kernel.TopicPartition) map[kernel.TopicPartition]int64 {
	out := map[kernel.TopicPartition]int64{}
	var remote []kernel.TopicPartition
	for _, tp := range tps {
		if m.poffs != nil {
			if _, hw, ok := m.poffs.Offsets(tp); ok {
				out[tp] = hw
				continue
			}
		}
		remote = append(remote, tp)
	}
	if len(remote) > 0 && m.leaderOffs != nil {
		for tp, hw := range m.leaderOffs.LeaderHighWatermarks(ctx, remote) {
			out[tp] = hw
		}
	}
	return out
}

// dropShareGroup unloads this broker's share-partitions of group, so the next fetch
// reads the durable state again (after an offsets reset or delete).
func (l *shareLeader) dropShareGroup(group string) {
	l.mu.Lock()
	var gone []*sharePart
	for k, sp := range l.parts {
		if k.group == group {
			gone = append(gone, sp)
			delete(l.parts, k)
		}
	}
	l.mu.Unlock()
	for _, sp := range gone {
		sp.unload()
	}
}
