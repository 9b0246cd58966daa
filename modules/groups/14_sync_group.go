// SyncGroup: v0-v5 (classic protocol). The leader's sync writes the group's metadata
// before it is answered. A classic member of a consumer group gets the assignment its
// join computed (migration.go). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/classic"
)

// syncGroupClaim claims the versions this file's header lists.
func syncGroupClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.SyncGroup, Min: 0, Max: 5, Handler: kernel.Typed(m.handleSyncGroup)}
}

func (m *Module) handleSyncGroup(ctx context.Context, req *kernel.Request, r *kmsg.SyncGroupRequest) (kernel.Response, error) {
	s, e := m.groupShard(ctx, req, kernel.OpRead, r.Group)
	var g *classic.Group
	if e == nil {
		if cg := s.consumerFor(r.Group); cg != nil {
			return kernel.Reply(cg.consumer.SyncClassic(r, m.topicView(), m.now())), nil
		}
		g, e = s.classicGroup(r.Group, false)
	}
	if e != nil {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	ch := g.Sync(r, m.now())
	select {
	case resp := <-ch:
		if resp.ErrorCode == 0 {
			// The leader's sync made the group Stable at a new generation: write
			// its metadata (members, assignments) before answering, as Kafka does,
			// so a coordinator restart from now on restores this generation.
			// Followers were answered by the leader's Sync; their call finds
			// nothing new to write.
			if sg := s.lookup(r.Group); sg != nil && sg.classic == g {
				s.persist(ctx, sg)
			}
		}
		return kernel.Reply(resp), nil
	case <-ctx.Done():
		return kernel.Response{}, ctx.Err()
	}
}
