// DescribeCluster: v0-2. Not implemented: endpoint type 2 (controllers; UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers).

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDescribeCluster is DescribeCluster's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimDescribeCluster(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeCluster, Min: 0, Max: 2, Handler: kernel.Replying(m.describeClusterResp)}
}
