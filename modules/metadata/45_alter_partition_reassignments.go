// AlterPartitionReassignments: v0. Not implemented: v1 (AllowReplicationFactorChange,
// KIP-860).

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleAlterPartitionReassignments(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("alter partition reassignments: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.alterReassignmentsResp(ctx, req, r)), nil
}
