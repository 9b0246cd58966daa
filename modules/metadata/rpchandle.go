package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// handleRPC runs one decoded request and returns the response body.
func (c *controller) handleRPC(ctx context.Context, msg any) []byte {
	switch req := msg.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return c.ctlRegister(ctx, req).AppendTo(nil)
	case *kmsg.BrokerHeartbeatRequest:
		return c.ctlHeartbeat(req).AppendTo(nil)
	case *kmsg.DescribeQuorumRequest:
		return c.describeQuorumLocal(req).AppendTo(nil)
	case *kmsg.AddRaftVoterRequest:
		return c.addRaftVoterLocal(ctx, req).AppendTo(nil)
	case *kmsg.RemoveRaftVoterRequest:
		return c.removeRaftVoterLocal(ctx, req).AppendTo(nil)
	case *kmsg.UpdateRaftVoterRequest:
		return c.updateRaftVoterLocal(ctx, req).AppendTo(nil)
	case *kmsg.UpdateFeaturesRequest:
		return c.updateFeaturesLocal(ctx, req).AppendTo(nil)
	case *rpc.ForwardRequest:
		return c.serveForward(ctx, req).AppendTo(nil)
	case *rpc.AddObserverRequest:
		return c.ctlAddObserver(ctx, req).AppendTo(nil)
	}
	c.log.Error("controller rpc: no handler for message", "type", fmt.Sprintf("%T", msg))
	return nil
}
