// ListPartitionReassignments: v0. Not implemented: nothing known.

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleListPartitionReassignments(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.ListPartitionReassignmentsRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("list partition reassignments: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.listReassignmentsResp(ctx, req, r)), nil
}
