// Heartbeat: v0-v4 (classic protocol; classic members of a consumer group: migration.go).
// Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/classic"
)

// heartbeatClaim claims the versions this file's header lists.
func heartbeatClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.Heartbeat, Min: 0, Max: 4, Handler: kernel.Typed(m.handleHeartbeat)}
}

func (m *Module) handleHeartbeat(ctx context.Context, req *kernel.Request, r *kmsg.HeartbeatRequest) (kernel.Response, error) {
	s, e := m.groupShard(ctx, req, kernel.OpRead, r.Group)
	var g *classic.Group
	if e == nil {
		if cg := s.consumerFor(r.Group); cg != nil {
			resp := cg.consumer.HeartbeatClassic(ctx, r, m.topicView(), m.now())
			s.afterConsumerChange(ctx, cg)
			return kernel.Reply(resp), nil
		}
		g, e = s.classicGroup(r.Group, false)
	}
	if e != nil {
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	return kernel.Reply(g.Heartbeat(r, m.now())), nil
}
