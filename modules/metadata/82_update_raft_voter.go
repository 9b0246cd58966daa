// UpdateRaftVoter: v0. KIP-853: a voter's new raft address (its first listener):
// CLUSTER_ACTION on CLUSTER (voters send it); INCONSISTENT_CLUSTER_ID for another
// cluster's id; any broker answers, forwarding to the controller. Not a voter:
// VOTER_NOT_FOUND. CurrentLeaderEpoch and the kraft.version range are not checked:
// the controller's raft term is not a Kafka leader epoch, and Sluice has one version
// of its voter records. See voters.go.

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
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
	resp := r.ResponseKind().(*kmsg.UpdateRaftVoterResponse)
	switch {
	case !req.Allowed(ctx, kernel.OpClusterAction, kernel.ResCluster, kernel.ClusterResourceName):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	case r.ClusterID != nil && *r.ClusterID != c.hub.image().ClusterID:
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	fwd := *r
	out, err := c.onControllerKmsg(ctx, &fwd, rpc.VerUpdateRaftVoter,
		func(ctx context.Context) kmsg.Response { return c.updateRaftVoterLocal(ctx, r) },
		func(r kmsg.Response) int16 { return r.(*kmsg.UpdateRaftVoterResponse).ErrorCode })
	if err != nil {
		resp.ErrorCode, _ = errCode(err)
		return resp
	}
	resp = out.(*kmsg.UpdateRaftVoterResponse)
	resp.Version = r.Version
	return resp
}
