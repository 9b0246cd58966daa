// LeaveGroup: v0-v5 (classic protocol). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// leaveGroupClaim claims the versions this file's header lists.
func leaveGroupClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.LeaveGroup, Min: 0, Max: 5, Handler: kernel.Typed(m.handleLeaveGroup)}
}

func (m *Module) handleLeaveGroup(ctx context.Context, req *kernel.Request, r *kmsg.LeaveGroupRequest) (kernel.Response, error) {
	g, e := m.classicFor(ctx, req, r.Group, false)
	if e != nil {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	return kernel.Reply(g.Leave(r, m.now())), nil
}
