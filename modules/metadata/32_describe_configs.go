// DescribeConfigs: v0-v4. TOPIC, BROKER and GROUP resources (groupconfigs.go). Not implemented: BROKER_LOGGER levels (an empty list is returned), CLIENT_METRICS resources.

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleDescribeConfigs(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.DescribeConfigsRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("describe configs: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.describeConfigsResp(ctx, req, r)), nil
}
