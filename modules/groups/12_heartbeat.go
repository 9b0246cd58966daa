// Heartbeat: v0-v4 (classic protocol). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// heartbeatClaim claims the versions this file's header lists.
func heartbeatClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.Heartbeat, Min: 0, Max: 4, Handler: kernel.Typed(m.handleHeartbeat)}
}

func (m *Module) handleHeartbeat(ctx context.Context, req *kernel.Request, r *kmsg.HeartbeatRequest) (kernel.Response, error) {
	g, e := m.classicFor(ctx, req, r.Group, false)
	if e != nil {
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	return kernel.Reply(g.Heartbeat(r, m.now())), nil
}
