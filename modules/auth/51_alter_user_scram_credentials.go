// AlterUserScramCredentials: v0 (its only version). Not as Kafka: a request's changes
// are one metadata-log entry per user, not one atomic batch.

package auth

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimAlterUserSCRAMCredentials is AlterUserScramCredentials's claim: the versions
// above and the thin handler; the work is in alterUserSCRAMs.
func claimAlterUserSCRAMCredentials(c *credState) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterUserSCRAMCredentials, Min: 0, Max: 0, Handler: kernel.Replying(c.alterUserSCRAMs)}
}
