// DescribeAcls: v0-3. Not implemented: nothing (v0 filters are LITERAL, as Kafka's).

package auth

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDescribeAcls is DescribeAcls' claim: auth.acl answers from its bindings
// (aclState.describeAcls), auth.none with SECURITY_DISABLED.
func claimDescribeAcls(h kernel.Handler) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeACLs, Min: 0, Max: 3, Handler: h}
}
