// CreatePartitions: v0-v3. Not implemented: nothing known.

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleCreatePartitions(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.CreatePartitionsRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("create partitions: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.createPartitionsResp(ctx, req, r)), nil
}
