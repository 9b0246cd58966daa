// DeleteTopics: v0-6. Not implemented: deleting internal topics (refused with
// INVALID_REQUEST, unlike Kafka).

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDeleteTopics is DeleteTopics's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimDeleteTopics(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DeleteTopics, Min: 0, Max: 6, Handler: kernel.Replying(m.deleteTopicsResp)}
}
