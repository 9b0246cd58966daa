// IncrementalAlterConfigs: v0-1. TOPIC, BROKER and GROUP resources (groupconfigs.go). Not implemented: BROKER_LOGGER and CLIENT_METRICS resources (INVALID_REQUEST).

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimIncrementalAlterConfigs is IncrementalAlterConfigs's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimIncrementalAlterConfigs(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.IncrementalAlterConfigs, Min: 0, Max: 1, Handler: kernel.Replying(m.incrementalAlterConfigsResp)}
}
