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
			}
		}
		if r.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = 0
			for _, op := range groupOps {
				if req.Allowed(ctx, op, kernel.ResGroup, id) {
					d.AuthorizedOperations |= 1 << op
				}
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return kernel.Reply(resp), nil
}
