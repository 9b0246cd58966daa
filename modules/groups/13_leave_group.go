// LeaveGroup: v0-v5 (classic protocol). For a consumer group it removes the members it
// names, of either protocol (migration.go). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/classic"
)

// leaveGroupClaim claims the versions this file's header lists.
func leaveGroupClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.LeaveGroup, Min: 0, Max: 5, Handler: kernel.Typed(m.handleLeaveGroup)}
}

func (m *Module) handleLeaveGroup(ctx context.Context, req *kernel.Request, r *kmsg.LeaveGroupRequest) (kernel.Response, error) {
	s, e := m.groupShard(ctx, req, kernel.OpRead, r.Group)
	var g *classic.Group
	if e == nil {
		if cg := s.consumerFor(r.Group); cg != nil {
			resp := cg.consumer.LeaveClassic(r, m.now())
			s.afterConsumerChange(ctx, cg)
			return kernel.Reply(resp), nil
		}
		g, e = s.classicGroup(r.Group, false)
	}
	if e != nil {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	return kernel.Reply(g.Leave(r, m.now())), nil
}
