// DescribeGroups: v0-v6. A consumer (KIP-848) group is described as Kafka 4 does
// (protocol type "consumer"). Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// describeGroupsClaim claims the versions this file's header lists.
func describeGroupsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeGroups, Min: 0, Max: 6, Handler: kernel.Typed(m.handleDescribeGroups)}
}

func (m *Module) handleDescribeGroups(ctx context.Context, req *kernel.Request, r *kmsg.DescribeGroupsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range r.Groups {
		resp.Groups = append(resp.Groups, m.describeGroup(ctx, req, r, id))
	}
	return kernel.Reply(resp), nil
}
