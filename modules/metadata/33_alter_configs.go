// AlterConfigs: v0-v2. TOPIC, BROKER and GROUP resources (groupconfigs.go). Not implemented: BROKER_LOGGER and CLIENT_METRICS resources (INVALID_REQUEST).

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleAlterConfigs(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.AlterConfigsRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("alter configs: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.alterConfigsResp(ctx, req, r)), nil
}
