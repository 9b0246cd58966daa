// AlterPartitionReassignments: v0. Not implemented: v1 (AllowReplicationFactorChange,
// KIP-860).

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimAlterPartitionReassignments is AlterPartitionReassignments's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimAlterPartitionReassignments(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterPartitionAssignments, Min: 0, Max: 0, Handler: kernel.Typed(
		func(ctx context.Context, req *kernel.Request, r *kmsg.AlterPartitionAssignmentsRequest) (kernel.Response, error) {
			return kernel.Reply(m.ctl.alterReassignmentsResp(ctx, req, r)), nil
		})}
}
