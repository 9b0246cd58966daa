// DescribeCluster: v0-2. Not implemented: endpoint type 2 (controllers; UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers).

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDescribeCluster is DescribeCluster's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimDescribeCluster(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeCluster, Min: 0, Max: 2, Handler: kernel.Typed(
		func(ctx context.Context, req *kernel.Request, r *kmsg.DescribeClusterRequest) (kernel.Response, error) {
			return kernel.Reply(m.describeClusterResp(ctx, req, r)), nil
		})}
}
