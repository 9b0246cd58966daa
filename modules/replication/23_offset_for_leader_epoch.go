// OffsetForLeaderEpoch: v0-v4. Answered from the log's leader-epoch cache
// (Log.EndOffsetForEpoch, checkpointed by storage) for consumers and followers alike
// (CLUSTER_ACTION on the cluster, or DESCRIBE on the topic, as Kafka since KIP-320);
// only the leader answers, except to the debugging replica id -2. Not implemented:
// nothing known.

package replication

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// offsetForLeaderEpochClaim claims the versions this file's header lists.
func offsetForLeaderEpochClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.OffsetForLeaderEpoch, Min: 0, Max: 4, Handler: kernel.Typed(m.handleOffsetForLeaderEpoch)}
}

func (m *Module) handleOffsetForLeaderEpoch(ctx context.Context, req *kernel.Request, r *kmsg.OffsetForLeaderEpochRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// As Kafka: brokers (CLUSTER_ACTION) may ask about any topic; consumers need
	// DESCRIBE on it. Asked once, without logging a denial (most callers are
	// consumers).
	cluster := req.Allowed(ctx, kernel.OpClusterAction, kernel.ResCluster, kernel.ClusterResourceName)
	// Only the leader answers, but for the debugging replica id (-2), as Kafka.
	fromAnyReplica := req.Version >= 3 && r.ReplicaID == -2
	for i := range r.Topics {
		t := &r.Topics[i]
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		allowed := cluster || req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, t.Topic)
		for j := range t.Partitions {
			in := &t.Partitions[j]
			out := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			out.Partition = in.Partition
			out.LeaderEpoch, out.EndOffset = -1, -1
			if !allowed {
				// Before any lookup: an unauthorized request opens nothing.
				out.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, out)
				continue
			}
			tp := kernel.TopicPartition{Topic: t.Topic, Partition: in.Partition}
			switch p := m.partition(tp); {
			case p == nil:
				out.ErrorCode = m.absentCode(m.meta.Image(), tp)
			default:
				if fromAnyReplica {
					if err := checkEpoch(p.place.Load(), in.CurrentLeaderEpoch); err != nil {
						out.ErrorCode = errorCode(err)
						break
					}
				} else if _, err := p.leaderFor(in.CurrentLeaderEpoch); err != nil {
					out.ErrorCode = errorCode(err)
					break
				}
				out.LeaderEpoch, out.EndOffset = p.endOffsetForEpoch(in.LeaderEpoch)
			}
			rt.Partitions = append(rt.Partitions, out)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}
