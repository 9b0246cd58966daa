// AlterPartitionReassignments: v0-1. v1's AllowReplicationFactorChange false (KIP-860)
// refuses a target of another size than the partition's replication factor (its
// original replicas' while a reassignment is in progress) with
// INVALID_REPLICATION_FACTOR; cancelling is always allowed. Not implemented: nothing
// known.

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimAlterPartitionReassignments is AlterPartitionReassignments's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimAlterPartitionReassignments(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterPartitionAssignments, Min: 0, Max: 1, Handler: kernel.Replying(m.ctl.alterReassignmentsResp)}
}
