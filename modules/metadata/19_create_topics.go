// CreateTopics: v0-7. Not implemented: create.topic.policy.class.name (POLICY_VIOLATION).

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimCreateTopics is CreateTopics's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimCreateTopics(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.CreateTopics, Min: 0, Max: 7, Handler: kernel.Replying(m.createTopicsResp)}
}
