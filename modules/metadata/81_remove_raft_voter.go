// RemoveRaftVoter: v0. KIP-853: takes a voter out of the controller quorum: ALTER on
// CLUSTER; INCONSISTENT_CLUSTER_ID for another cluster's id; any broker answers,
// forwarding to the controller. A live voter stays an observer (it keeps following the
// log); a dead one is forgotten. Not a voter: VOTER_NOT_FOUND; the last voter:
// INVALID_REQUEST. The controller removing itself hands leadership over first. See
// voters.go.

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
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
	resp := r.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	switch {
	case !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	case r.ClusterID != nil && *r.ClusterID != c.hub.image().ClusterID:
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	fwd := *r
	out, err := c.onControllerKmsg(ctx, &fwd, rpc.VerRemoveRaftVoter,
		func(ctx context.Context) kmsg.Response { return c.removeRaftVoterLocal(ctx, r) },
		func(r kmsg.Response) int16 { return r.(*kmsg.RemoveRaftVoterResponse).ErrorCode })
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err)
		return resp
	}
	resp = out.(*kmsg.RemoveRaftVoterResponse)
	resp.Version = r.Version
	return resp
}
