// IncrementalAlterConfigs: v0-v1. TOPIC, BROKER and GROUP resources (groupconfigs.go). Not implemented: BROKER_LOGGER and CLIENT_METRICS resources (INVALID_REQUEST).

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleIncrementalAlterConfigs(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("incremental alter configs: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.incrementalAlterConfigsResp(ctx, req, r)), nil
}
