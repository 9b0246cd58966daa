// RemoveRaftVoter: v0. KIP-853: takes a voter out of the controller quorum: ALTER on
// CLUSTER; INCONSISTENT_CLUSTER_ID for another cluster's id; any broker answers,
// forwarding to the controller. A live voter stays an observer (it keeps following the
// log); a dead one is forgotten. Not a voter: VOTER_NOT_FOUND; the last voter:
// INVALID_REQUEST. The controller removing itself hands leadership over first. See
// voters.go.

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// claimRemoveRaftVoter is RemoveRaftVoter's claim: the versions above and the thin
// handler.
func claimRemoveRaftVoter(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.RemoveRaftVoter, Min: 0, Max: 0, Handler: kernel.Replying(m.ctl.removeRaftVoter)}
}

func (c *controller) removeRaftVoter(ctx context.Context, req *kernel.Request, r *kmsg.RemoveRaftVoterRequest) *kmsg.RemoveRaftVoterResponse {
	fwd := *r
	return voterRequest(ctx, c, req, kernel.OpAlter, r.ClusterID, &fwd, rpc.VerRemoveRaftVoter,
		func(ctx context.Context) *kmsg.RemoveRaftVoterResponse { return c.removeRaftVoterLocal(ctx, r) },
		func(resp *kmsg.RemoveRaftVoterResponse) int16 { return resp.ErrorCode },
		func(code int16, msg *string) *kmsg.RemoveRaftVoterResponse {
			resp := r.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
			resp.ErrorCode, resp.ErrorMessage = code, msg
			return resp
		})
}
