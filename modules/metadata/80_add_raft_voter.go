// AddRaftVoter: v0-1. KIP-853: makes a broker that follows the metadata log as an
// observer a voter of the controller quorum: ALTER on CLUSTER; a ClusterID that is
// not this cluster's answers INCONSISTENT_CLUSTER_ID; any broker answers, forwarding to
// the controller. The voter must be a live, registered broker already following the
// log (INVALID_REQUEST otherwise, with the reason); a voter already in the set answers
// DUPLICATE_VOTER. The answer comes once the change is committed, whatever v1's
// AckWhenCommitted says. VoterDirectoryID is not checked: Sluice has no directory ids
// (a replaced disk is a new node id; docs/quorum.md). See voters.go.

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// claimAddRaftVoter is AddRaftVoter's claim: the versions above and the thin handler.
func claimAddRaftVoter(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AddRaftVoter, Min: 0, Max: 1, Handler: kernel.Replying(m.ctl.addRaftVoter)}
}

func (c *controller) addRaftVoter(ctx context.Context, req *kernel.Request, r *kmsg.AddRaftVoterRequest) *kmsg.AddRaftVoterResponse {
	fwd := *r
	return voterRequest(ctx, c, req, kernel.OpAlter, r.ClusterID, &fwd, rpc.VerAddRaftVoter,
		func(ctx context.Context) *kmsg.AddRaftVoterResponse { return c.addRaftVoterLocal(ctx, r) },
		func(resp *kmsg.AddRaftVoterResponse) int16 { return resp.ErrorCode },
		func(code int16, msg *string) *kmsg.AddRaftVoterResponse {
			resp := r.ResponseKind().(*kmsg.AddRaftVoterResponse)
			resp.ErrorCode, resp.ErrorMessage = code, msg
			return resp
		})
}
