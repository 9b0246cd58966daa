// JoinGroup: v0-v9 (classic protocol; the state machine is modules/groups/classic). A
// JoinGroup for a consumer (KIP-848) group with members joins it as a classic member
// (migration.go), as far as group.consumer.migration.policy lets new ones in. Not
// implemented: nothing known.

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
	s, e := m.groupShard(ctx, req, kernel.OpRead, r.Group)
	var g *classic.Group
	if e == nil {
		if cg := s.consumerWithMembers(r.Group); cg != nil {
			return kernel.Reply(m.joinConsumerAsClassic(ctx, req, s, cg, r)), nil
		}
		g, e = s.classicGroup(r.Group, true)
	}
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
