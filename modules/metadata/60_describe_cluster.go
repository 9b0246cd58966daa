// DescribeCluster: v0-v2. Not implemented: endpoint type 2 (controllers; UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers).

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleDescribeCluster(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.DescribeClusterRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("describe cluster: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.describeClusterResp(ctx, req, r)), nil
}
