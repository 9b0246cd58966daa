// AlterShareGroupOffsets: v0 (KIP-932). Read on the group and on each topic, as
// Kafka checks; the group must have no members (NON_EMPTY_GROUP). Each partition's
// share state is replaced by one starting at the given offset with a new state
// epoch, so a leader holding the old state is fenced at its next write and this
// broker's share-partitions of the group are reloaded. Not implemented: nothing
// known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// alterShareGroupOffsetsClaim claims the versions this file's header lists.
func alterShareGroupOffsetsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterShareGroupOffsets, Min: 0, Max: 0, Handler: kernel.Typed(m.handleAlterShareGroupOffsets)}
}

func (m *Module) handleAlterShareGroupOffsets(ctx context.Context, req *kernel.Request, r *kmsg.AlterShareGroupOffsetsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if _, e := m.shareAdminGroup(ctx, req, kernel.OpRead, r.GroupID, true); e != nil {
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	im := m.meta.Image()
	for _, t := range r.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		ti := im.Topic(t.Topic)
		allowed := req.Allowed(ctx, kernel.OpRead, kernel.ResTopic, t.Topic)
		if ti != nil {
			rt.TopicID = ti.ID
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			var e *kerr.Error
			switch {
			case !allowed:
				e = kerr.TopicAuthorizationFailed
			case ti == nil || p.Partition < 0 || int(p.Partition) >= len(ti.Partitions):
				e = kerr.UnknownTopicOrPartition
			case p.StartOffset < 0:
				e = kerr.InvalidRequest
			default:
				k := shareStateKey{r.GroupID, ti.ID, p.Partition}
				cur, _, le := m.loadShareState(k)
				if e = le; e == nil {
					e = m.writeShareState(ctx, k, offsets.ShareState{StateEpoch: cur.StateEpoch + 1, LeaderEpoch: cur.LeaderEpoch, StartOffset: p.StartOffset})
				}
			}
			if e != nil {
				rp.ErrorCode = e.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if m.shares != nil {
		m.shares.dropShareGroup(r.GroupID)
	}
	return kernel.Reply(resp), nil
}
