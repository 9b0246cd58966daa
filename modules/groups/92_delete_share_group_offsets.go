// DeleteShareGroupOffsets: v0 (KIP-932). Delete on the group and Read on each topic,
// as Kafka checks; the group must have no members (NON_EMPTY_GROUP). Every
// partition's share state of each topic is deleted (tombstoned); the next member
// starts per share.auto.offset.reset. Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// deleteShareGroupOffsetsClaim claims the versions this file's header lists.
func deleteShareGroupOffsetsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DeleteShareGroupOffsets, Min: 0, Max: 0, Handler: kernel.Typed(m.handleDeleteShareGroupOffsets)}
}

func (m *Module) handleDeleteShareGroupOffsets(ctx context.Context, req *kernel.Request, r *kmsg.DeleteShareGroupOffsetsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if _, e := m.shareAdminGroup(ctx, req, kernel.OpDelete, r.GroupID, true); e != nil {
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	states, err := m.shareStates(r.GroupID)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return kernel.Reply(resp), nil
	}
	im := m.meta.Image()
	for _, t := range r.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		ti := im.Topic(t.Topic)
		var e *kerr.Error
		switch {
		case !req.Allowed(ctx, kernel.OpRead, kernel.ResTopic, t.Topic):
			e = kerr.TopicAuthorizationFailed
		case ti == nil:
			e = kerr.UnknownTopicOrPartition
		default:
			rt.TopicID = ti.ID
			for p := range states[ti.ID] {
				if e = m.deleteShareState(ctx, shareStateKey{r.GroupID, ti.ID, p}); e != nil {
					break
				}
			}
		}
		if e != nil {
			rt.ErrorCode = e.Code
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if m.shares != nil {
		m.shares.dropShareGroup(r.GroupID)
	}
	return kernel.Reply(resp), nil
}
