// DescribeUserScramCredentials: v0 (its only version). Bootstrap users are listed with
// the stored ones.

package auth

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDescribeUserSCRAMCredentials is DescribeUserScramCredentials's claim: the
// versions above and the thin handler; the work is in describeUserSCRAMs.
func claimDescribeUserSCRAMCredentials(c *credState) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeUserSCRAMCredentials, Min: 0, Max: 0, Handler: kernel.Replying(c.describeUserSCRAMs)}
}
