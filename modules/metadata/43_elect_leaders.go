// ElectLeaders: v0-v2. Not implemented: nothing known.

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleElectLeaders(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.ElectLeadersRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("elect leaders: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.electLeadersResp(ctx, req, r)), nil
}
