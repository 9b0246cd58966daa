// UpdateRaftVoter: v0. KIP-853: a voter's new raft address (its first listener):
// CLUSTER_ACTION on CLUSTER (voters send it); INCONSISTENT_CLUSTER_ID for another
// cluster's id; any broker answers, forwarding to the controller. Not a voter:
// VOTER_NOT_FOUND. A Sluice voter sends it itself at start when its address moved
// (announceAddress, voters.go). CurrentLeaderEpoch and the kraft.version range are not checked:
// the controller's raft term is not a Kafka leader epoch, and Sluice has one version
// of its voter records. See voters.go.

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// claimUpdateRaftVoter is UpdateRaftVoter's claim: the versions above and the thin
// handler.
func claimUpdateRaftVoter(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.UpdateRaftVoter, Min: 0, Max: 0, Handler: kernel.Replying(m.ctl.updateRaftVoter)}
}

func (c *controller) updateRaftVoter(ctx context.Context, req *kernel.Request, r *kmsg.UpdateRaftVoterRequest) *kmsg.UpdateRaftVoterResponse {
	fwd := *r
	return voterRequest(ctx, c, req, kernel.OpClusterAction, r.ClusterID, &fwd, rpc.VerUpdateRaftVoter,
		func(ctx context.Context) *kmsg.UpdateRaftVoterResponse { return c.updateRaftVoterLocal(ctx, r) },
		func(resp *kmsg.UpdateRaftVoterResponse) int16 { return resp.ErrorCode },
		func(code int16, _ *string) *kmsg.UpdateRaftVoterResponse {
			resp := r.ResponseKind().(*kmsg.UpdateRaftVoterResponse)
			resp.ErrorCode = code // the response has no message
			return resp
		})
}
