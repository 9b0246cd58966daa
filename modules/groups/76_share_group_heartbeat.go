// ShareGroupHeartbeat: v0-v1 (KIP-932; the state machine is modules/groups/share).
// Served when group.share.enable is true. Read on the group, then Describe on each
// subscribed topic, as Kafka checks. Membership is written to __consumer_offsets
// before the answer (share_persist.go). UNSUPPORTED_VERSION while the cluster's
// share.version is 0 (features.go). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/share"
)

// shareGroupHeartbeatClaim claims the versions this file's header lists.
func shareGroupHeartbeatClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ShareGroupHeartbeat, Min: 0, Max: 1, Handler: kernel.Typed(m.handleShareGroupHeartbeat)}
}

func (m *Module) handleShareGroupHeartbeat(ctx context.Context, req *kernel.Request, r *kmsg.ShareGroupHeartbeatRequest) (kernel.Response, error) {
	fail := func(e *kerr.Error, msg string) (kernel.Response, error) {
		resp := r.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return kernel.Reply(resp), nil
	}
	if e, why := m.featureOff(shareVersionFeature); e != nil {
		return fail(e, why)
	}
	if !req.Allowed(ctx, kernel.OpRead, kernel.ResGroup, r.GroupID) {
		return fail(kerr.GroupAuthorizationFailed, "")
	}
	if r.GroupID == "" {
		return fail(kerr.InvalidGroupID, "")
	}
	for _, t := range r.SubscribedTopicNames {
		if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, t) {
			return fail(kerr.TopicAuthorizationFailed, "not authorized to describe topic "+t)
		}
	}
	s, e := m.coordinatorFor(ctx, r.GroupID)
	if e != nil {
		return fail(e, "")
	}
	g, e := s.shareGroup(r.GroupID, r.MemberEpoch == 0)
	if e != nil {
		msg := ""
		if e == kerr.GroupIDNotFound {
			msg = "group " + r.GroupID + " is not a share group"
			if r.MemberEpoch != 0 {
				e = kerr.UnknownMemberID
			}
		}
		return fail(e, msg)
	}
	client := share.Client{ID: req.ClientID, Host: clientHost(req.Conn)}
	resp := g.Heartbeat(r, r.Version, client, m.topicView(), m.now())
	// What the heartbeat changed is in the log before the answer (share_persist.go).
	if sg := s.lookup(r.GroupID); sg != nil && sg.share == g {
		s.persistShare(ctx, sg)
	}
	return kernel.Reply(resp), nil
}
