package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// handleRPC runs one decoded request and returns the response body.
func (m *Module) handleRPC(ctx context.Context, msg any) []byte {
	switch req := msg.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return m.ctlRegister(ctx, req).AppendTo(nil)
	case *kmsg.BrokerHeartbeatRequest:
		return m.ctlHeartbeat(req).AppendTo(nil)
	case *kmsg.DescribeQuorumRequest:
		return m.describeQuorumLocal(req).AppendTo(nil)
	case *rpc.ForwardRequest:
		return m.serveForward(ctx, req).AppendTo(nil)
	case *rpc.AddObserverRequest:
		return m.ctlAddObserver(ctx, req).AppendTo(nil)
	}
	m.log.Error("controller rpc: no handler for message", "type", fmt.Sprintf("%T", msg))
	return nil
}
