// DescribeConfigs: v0-4. TOPIC, BROKER and GROUP resources (groupconfigs.go). Not implemented: BROKER_LOGGER levels (an empty list is returned), CLIENT_METRICS resources.

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDescribeConfigs is DescribeConfigs's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimDescribeConfigs(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeConfigs, Min: 0, Max: 4, Handler: kernel.Typed(
		func(ctx context.Context, req *kernel.Request, r *kmsg.DescribeConfigsRequest) (kernel.Response, error) {
			return kernel.Reply(m.describeConfigsResp(ctx, req, r)), nil
		})}
}
