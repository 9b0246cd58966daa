// WriteShareGroupState: v0-v1 (KIP-932, inter-broker). A data partition's leader
// writes a share-partition's durable state (start offset, in-flight record states and
// delivery counts) to the share group's coordinator, which stores it in the group's
// __consumer_offsets partition (share_state.go) fenced by state and leader epochs.
// Needs ClusterAction. Not implemented: DeliveryCompleteCount (v1) is accepted and
// not kept.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// writeShareGroupStateClaim claims the versions this file's header lists.
func writeShareGroupStateClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.WriteShareGroupState, Min: 0, Max: 1, Handler: kernel.Typed(m.handleWriteShareGroupState)}
}

func (m *Module) handleWriteShareGroupState(ctx context.Context, req *kernel.Request, r *kmsg.WriteShareGroupStateRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	allowed := req.Allowed(ctx, kernel.OpClusterAction, kernel.ResCluster, kernel.ClusterResourceName)
	for _, t := range r.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			var e *kerr.Error
			if !allowed {
				e = kerr.ClusterAuthorizationFailed
			} else {
				st := offsets.ShareState{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset}
				for _, b := range p.StateBatches {
					st.Batches = append(st.Batches, offsets.ShareStateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
						DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
				}
				e = m.writeShareState(ctx, shareStateKey{r.GroupID, t.TopicID, p.Partition}, st)
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
