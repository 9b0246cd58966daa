// ShareGroupDescribe: v0-v1 (KIP-932). Describe on the group; a group naming a topic
// the principal may not describe answers TOPIC_AUTHORIZATION_FAILED, as
// ConsumerGroupDescribe does. Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// shareGroupDescribeClaim claims the versions this file's header lists.
func shareGroupDescribeClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ShareGroupDescribe, Min: 0, Max: 1, Handler: kernel.Typed(m.handleShareGroupDescribe)}
}

func (m *Module) handleShareGroupDescribe(ctx context.Context, req *kernel.Request, r *kmsg.ShareGroupDescribeRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	topics := m.topicView()
	for _, id := range r.GroupIDs {
		d := kmsg.NewShareGroupDescribeResponseGroup()
		d.GroupID = id
		d.AuthorizedOperations = -2147483648
		notFound := func(why string) {
			d.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "group " + id + " " + why
			d.ErrorMessage = &msg
		}
		switch s, e := m.groupShard(ctx, req, kernel.OpDescribe, id); {
		case e != nil:
			d.ErrorCode = e.Code
		default:
			g := s.lookup(id)
			switch {
			case g == nil:
				notFound("not found")
			case g.share == nil:
				notFound("is not a share group")
			default:
				d = g.share.Describe(topics, m.now())
				d.AuthorizedOperations = -2147483648
				if !describesShareTopics(ctx, req, &d) {
					d = kmsg.NewShareGroupDescribeResponseGroup()
					d.GroupID, d.AuthorizedOperations = id, -2147483648
					d.ErrorCode = kerr.TopicAuthorizationFailed.Code
					msg := "the group names topics this principal may not describe"
					d.ErrorMessage = &msg
				}
			}
		}
		if r.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = groupAuthorizedOps(ctx, req, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return kernel.Reply(resp), nil
}

// describesShareTopics reports whether the principal may describe every topic the
// described share group names.
func describesShareTopics(ctx context.Context, req *kernel.Request, d *kmsg.ShareGroupDescribeResponseGroup) bool {
	for _, mb := range d.Members {
		for _, t := range mb.SubscribedTopicNames {
			if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, t) {
				return false
			}
		}
		for _, tp := range mb.Assignment.TopicPartitions {
			if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, tp.Topic) {
				return false
			}
		}
	}
	return true
}
