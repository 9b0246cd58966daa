// ElectLeaders: v0-2. Not implemented: nothing known.

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimElectLeaders is ElectLeaders's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimElectLeaders(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ElectLeaders, Min: 0, Max: 2, Handler: kernel.Replying(m.ctl.electLeadersResp)}
}
