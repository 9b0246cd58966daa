// OffsetFetch: v0-v10 (v7+ require_stable, v8+ several groups in one request, v10
// topic ids). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// offsetFetchClaim claims the versions this file's header lists.
func offsetFetchClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.OffsetFetch, Min: 0, Max: 10, Handler: kernel.Typed(m.handleOffsetFetch)}
}

func (m *Module) handleOffsetFetch(ctx context.Context, req *kernel.Request, r *kmsg.OffsetFetchRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for i := range r.Groups {
			resp.Groups = append(resp.Groups, m.fetchOffsets(ctx, req, &r.Groups[i], r.RequireStable))
		}
		return kernel.Reply(resp), nil
	}
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = r.Group
	if r.Topics != nil {
		fg.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(r.Topics))
		for _, t := range r.Topics {
			fg.Topics = append(fg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	g := m.fetchOffsets(ctx, req, &fg, r.Version >= 7 && r.RequireStable)
	if r.Version >= 2 {
		resp.ErrorCode = g.ErrorCode
	}
	for _, t := range g.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			if r.Version < 2 && g.ErrorCode != 0 {
				rp.ErrorCode = g.ErrorCode // v0-v1 have no group-level error
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}
