// ConsumerGroupDescribe: v0-v1 (KIP-848). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// consumerGroupDescribeClaim claims the versions this file's header lists.
func consumerGroupDescribeClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ConsumerGroupDescribe, Min: 0, Max: 1, Handler: kernel.Typed(m.handleConsumerGroupDescribe)}
}

func (m *Module) handleConsumerGroupDescribe(ctx context.Context, req *kernel.Request, r *kmsg.ConsumerGroupDescribeRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	topics := m.topicView()
	for _, id := range r.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = id
		d.AuthorizedOperations = -2147483648
		switch s, e := m.groupShard(ctx, req, kernel.OpDescribe, id); {
		case e != nil:
			d.ErrorCode = e.Code
		default:
			g := s.lookup(id)
			switch {
			case g == nil:
				d.ErrorCode = kerr.GroupIDNotFound.Code
				msg := "group " + id + " not found"
				d.ErrorMessage = &msg
			case g.consumer == nil:
				d.ErrorCode = kerr.GroupIDNotFound.Code
				msg := "group " + id + " is not a consumer (KIP-848) group"
				d.ErrorMessage = &msg
			default:
				d = g.consumer.Describe(topics, m.now())
				d.AuthorizedOperations = -2147483648
				if !describesTopics(ctx, req, &d) {
					// As Kafka (KAFKA-18813): a group naming a topic the principal
					// may not describe is not described at all.
					d = kmsg.NewConsumerGroupDescribeResponseGroup()
					d.Group, d.AuthorizedOperations = id, -2147483648
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

// describesTopics reports whether the principal may describe every topic the described
// group names: its members' subscriptions, assignments and target assignments.
func describesTopics(ctx context.Context, req *kernel.Request, d *kmsg.ConsumerGroupDescribeResponseGroup) bool {
	seen := map[string]bool{}
	ok := func(topic string) bool {
		allowed, asked := seen[topic]
		if !asked {
			allowed = req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, topic)
			seen[topic] = allowed
		}
		return allowed
	}
	for i := range d.Members {
		mb := &d.Members[i]
		for _, t := range mb.SubscribedTopics {
			if !ok(t) {
				return false
			}
		}
		for _, a := range [2]*kmsg.Assignment{&mb.Assignment, &mb.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				if !ok(tp.Topic) {
					return false
				}
			}
		}
	}
	return true
}
