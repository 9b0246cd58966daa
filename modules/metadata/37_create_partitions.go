// CreatePartitions: v0-3. Not implemented: nothing known.

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimCreatePartitions is CreatePartitions's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimCreatePartitions(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.CreatePartitions, Min: 0, Max: 3, Handler: kernel.Replying(m.createPartitionsResp)}
}
