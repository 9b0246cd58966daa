// DescribeShareGroupOffsets: v0-v1 (KIP-932). Describe on the group, Describe on each
// topic (its partitions answer TOPIC_AUTHORIZATION_FAILED); a group of another type
// with members answers GROUP_ID_NOT_FOUND. Per partition: the share-partition start
// offset from the durable state (-1 when the group has none there), the leader epoch
// of its last writer, and (v1) the lag: records from the start offset to the high
// watermark not yet acknowledged or archived (-1 when no leader answers). Topics null:
// every topic the group has state for. Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// describeShareGroupOffsetsClaim claims the versions this file's header lists.
func describeShareGroupOffsetsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeShareGroupOffsets, Min: 0, Max: 1, Handler: kernel.Typed(m.handleDescribeShareGroupOffsets)}
}

func (m *Module) handleDescribeShareGroupOffsets(ctx context.Context, req *kernel.Request, r *kmsg.DescribeShareGroupOffsetsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	im := m.meta.Image()
	for _, rg := range r.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		if _, e := m.shareAdminGroup(ctx, req, kernel.OpDescribe, rg.GroupID, false); e != nil {
			g.ErrorCode = e.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		states, err := m.shareStates(rg.GroupID)
		if err != nil {
			g.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		topics := rg.Topics
		if topics == nil {
			for id, ps := range states {
				ti := im.TopicByID(id)
				if ti == nil {
					continue
				}
				t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
				t.Topic = ti.Name
				for p := range ps {
					t.Partitions = append(t.Partitions, p)
				}
				topics = append(topics, t)
			}
		}
		var tps []kernel.TopicPartition
		for _, t := range topics {
			for _, p := range t.Partitions {
				tps = append(tps, kernel.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		hws := m.highWatermarks(ctx, tps)
		for _, t := range topics {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = t.Topic
			ti := im.Topic(t.Topic)
			allowed := req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, t.Topic)
			if ti != nil {
				rt.TopicID = ti.ID
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
				switch {
				case !allowed:
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				case ti == nil || p < 0 || int(p) >= len(ti.Partitions):
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					if st, ok := states[ti.ID][p]; ok {
						rp.StartOffset, rp.LeaderEpoch = st.StartOffset, st.LeaderEpoch
						hw, known := hws[kernel.TopicPartition{Topic: t.Topic, Partition: p}]
						if !known {
							hw = -1
						}
						rp.Lag = shareLag(st, hw)
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			g.Topics = append(g.Topics, rt)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return kernel.Reply(resp), nil
}
