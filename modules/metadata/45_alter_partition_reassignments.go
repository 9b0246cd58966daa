// AlterPartitionReassignments: v0. Not implemented: v1 (AllowReplicationFactorChange,
// KIP-860).

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimAlterPartitionReassignments is AlterPartitionReassignments's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimAlterPartitionReassignments(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterPartitionAssignments, Min: 0, Max: 0, Handler: kernel.Replying(m.ctl.alterReassignmentsResp)}
}
