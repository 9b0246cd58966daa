// DescribeConfigs: v0-4. TOPIC, BROKER and GROUP resources (groupconfigs.go). Not implemented: BROKER_LOGGER levels (an empty list is returned), CLIENT_METRICS resources.

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDescribeConfigs is DescribeConfigs's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimDescribeConfigs(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeConfigs, Min: 0, Max: 4, Handler: kernel.Replying(m.describeConfigsResp)}
}
