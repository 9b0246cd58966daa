// JoinGroup: v0-v9 (classic protocol; the state machine is modules/groups/classic). A
// JoinGroup for a consumer (KIP-848) group with members answers
// INCONSISTENT_GROUP_PROTOCOL. Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/classic"
)

// joinGroupClaim claims the versions this file's header lists.
func joinGroupClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.JoinGroup, Min: 0, Max: 9, Handler: kernel.Typed(m.handleJoinGroup)}
}

func (m *Module) handleJoinGroup(ctx context.Context, req *kernel.Request, r *kmsg.JoinGroupRequest) (kernel.Response, error) {
	g, e := m.classicFor(ctx, req, r.Group, true)
	if e != nil {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = e.Code, -1, r.MemberID
		return kernel.Reply(resp), nil
	}
	ch := g.Join(r, classic.Client{ID: req.ClientID, Host: clientHost(req.Conn)}, m.now())
	select {
	case resp := <-ch:
		return kernel.Reply(resp), nil
	case <-ctx.Done():
		return kernel.Response{}, ctx.Err()
	}
}
