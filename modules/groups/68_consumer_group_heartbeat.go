// ConsumerGroupHeartbeat: v0-v1 (KIP-848; the state machine is
// modules/groups/consumer, the assignors the module's `assignors`). A join to a classic
// group with members upgrades it when group.consumer.migration.policy allows
// (migration.go). Every change is written to __consumer_offsets before the answer
// (consumer_persist.go). UNSUPPORTED_VERSION while the cluster's group.version is 0
// (features.go). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/consumer"
)

// consumerGroupHeartbeatClaim claims the versions this file's header lists.
func consumerGroupHeartbeatClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ConsumerGroupHeartbeat, Min: 0, Max: 1, Handler: kernel.Typed(m.handleConsumerGroupHeartbeat)}
}

func (m *Module) handleConsumerGroupHeartbeat(ctx context.Context, req *kernel.Request, r *kmsg.ConsumerGroupHeartbeatRequest) (kernel.Response, error) {
	fail := func(e *kerr.Error, msg string) (kernel.Response, error) {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return kernel.Reply(resp), nil
	}
	if e, why := m.featureOff(groupVersionFeature); e != nil {
		return fail(e, why)
	}
	if !req.Allowed(ctx, kernel.OpRead, kernel.ResGroup, r.Group) {
		return fail(kerr.GroupAuthorizationFailed, "")
	}
	if r.Group == "" {
		return fail(kerr.InvalidGroupID, "")
	}
	for _, t := range r.SubscribedTopicNames {
		if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, t) {
			return fail(kerr.TopicAuthorizationFailed, "not authorized to describe topic "+t)
		}
	}
	s, e := m.coordinatorFor(ctx, r.Group)
	if e != nil {
		return fail(e, "")
	}
	g, e := s.consumerGroup(r.Group, r.MemberEpoch == 0)
	if e == kerr.GroupIDNotFound && r.MemberEpoch == 0 {
		// A classic group with members: upgrade it if the policy allows
		// (migration.go).
		cg, ue, msg := s.upgrade(r.Group)
		switch {
		case ue != nil:
			return fail(ue, msg)
		case cg != nil:
			g, e = cg, nil
		default:
			g, e = s.consumerGroup(r.Group, true)
		}
	}
	if e != nil {
		msg := ""
		if e == kerr.GroupIDNotFound {
			msg = "group " + r.Group + " is not a consumer (KIP-848) group"
			if r.MemberEpoch == 0 {
				msg = "group " + r.Group + " has classic-protocol members; mixing classic and consumer (KIP-848) members in one group is not supported"
			}
		}
		if e == kerr.GroupIDNotFound && r.MemberEpoch != 0 {
			e = kerr.UnknownMemberID
		}
		return fail(e, msg)
	}
	client := consumer.Client{ID: req.ClientID, Host: clientHost(req.Conn)}
	view := describableTopics{imageTopics: m.topicView(), ctx: ctx, req: req}
	resp := g.Heartbeat(ctx, r, r.Version, client, view, m.now())
	// The change the heartbeat made is in the log before it is answered, so a
	// restarted or moved coordinator restores what the member was told
	// (consumer_persist.go).
	if sg := s.lookup(r.Group); sg != nil && sg.consumer == g {
		s.afterConsumerChange(ctx, sg)
	}
	return kernel.Reply(resp), nil
}

// describableTopics is the topic view of one heartbeat: regex subscriptions that the
// heartbeat resolves (again) match only topics its principal may describe, as Kafka
// 4.0 resolves them with the ACLs of the member whose heartbeat refreshes them
// (KAFKA-18813). Every other lookup, and the optional views, are imageTopics'.
type describableTopics struct {
	imageTopics
	ctx context.Context
	req *kernel.Request
}

// TopicNames lists the topics the principal may describe.
func (v describableTopics) TopicNames() []string {
	names := v.imageTopics.TopicNames()
	out := names[:0]
	for _, n := range names {
		if v.req.Allowed(v.ctx, kernel.OpDescribe, kernel.ResTopic, n) {
			out = append(out, n)
		}
	}
	return out
}
