// AlterConfigs: v0-2. TOPIC, BROKER and GROUP resources (groupconfigs.go). Not implemented: BROKER_LOGGER and CLIENT_METRICS resources (INVALID_REQUEST).

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimAlterConfigs is AlterConfigs's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimAlterConfigs(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterConfigs, Min: 0, Max: 2, Handler: kernel.Replying(m.alterConfigsResp)}
}
