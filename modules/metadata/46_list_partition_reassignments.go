// ListPartitionReassignments: v0. Not implemented: nothing known.

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimListPartitionReassignments is ListPartitionReassignments's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimListPartitionReassignments(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ListPartitionReassignments, Min: 0, Max: 0, Handler: kernel.Replying(m.ctl.listReassignmentsResp)}
}
