// AlterConfigs: v0-2. TOPIC, BROKER and GROUP resources (groupconfigs.go). Not implemented: BROKER_LOGGER and CLIENT_METRICS resources (INVALID_REQUEST).

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimAlterConfigs is AlterConfigs's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimAlterConfigs(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterConfigs, Min: 0, Max: 2, Handler: kernel.Typed(
		func(ctx context.Context, req *kernel.Request, r *kmsg.AlterConfigsRequest) (kernel.Response, error) {
			return kernel.Reply(m.alterConfigsResp(ctx, req, r)), nil
		})}
}
