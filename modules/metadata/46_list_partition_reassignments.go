// ListPartitionReassignments: v0. Not implemented: nothing known.

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimListPartitionReassignments is ListPartitionReassignments's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimListPartitionReassignments(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ListPartitionReassignments, Min: 0, Max: 0, Handler: kernel.Typed(
		func(ctx context.Context, req *kernel.Request, r *kmsg.ListPartitionReassignmentsRequest) (kernel.Response, error) {
			return kernel.Reply(m.ctl.listReassignmentsResp(ctx, req, r)), nil
		})}
}
