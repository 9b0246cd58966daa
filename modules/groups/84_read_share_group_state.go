// ReadShareGroupState: v0 (KIP-932, inter-broker). A data partition's leader reads a
// share-partition's durable state from the share group's coordinator when it loads
// the share-partition. Sluice's share state lives with the group (share_state.go), so
// this goes to the group's coordinator, not to a separate share coordinator; reading
// with a newer leader epoch fences the previous leader. Needs ClusterAction.
// Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// readShareGroupStateClaim claims the versions this file's header lists.
func readShareGroupStateClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ReadShareGroupState, Min: 0, Max: 0, Handler: kernel.Typed(m.handleReadShareGroupState)}
}

func (m *Module) handleReadShareGroupState(ctx context.Context, req *kernel.Request, r *kmsg.ReadShareGroupStateRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	allowed := req.Allowed(ctx, kernel.OpClusterAction, kernel.ResCluster, kernel.ClusterResourceName)
	for _, t := range r.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			rp.StartOffset = -1
			var e *kerr.Error
			if !allowed {
				e = kerr.ClusterAuthorizationFailed
			} else {
				st, found, err := m.readShareState(ctx, shareStateKey{r.GroupID, t.TopicID, p.Partition}, p.LeaderEpoch)
				e = err
				if e == nil && found {
					rp.StateEpoch, rp.StartOffset = st.StateEpoch, st.StartOffset
					for _, b := range st.Batches {
						sb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
						sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
						rp.StateBatches = append(rp.StateBatches, sb)
					}
				}
			}
			if e != nil {
				rp.ErrorCode = e.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}
