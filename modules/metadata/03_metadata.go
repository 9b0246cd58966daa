// Metadata: v0-12. Not implemented: v13 (top-level error code, KIP-1102). Advertising
// it made franz-go's admin client see UNKNOWN_TOPIC_OR_PARTITION now and then for a
// topic every broker had, on a 3-broker cluster (cmd/sluice TestKafkaCommandsCluster,
// 2 runs in 10; none in 8 at v12); it stays off until that is understood.

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimMetadata is Metadata's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimMetadata(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.Metadata, Min: 0, Max: 12, Handler: kernel.Replying(m.metadata)}
}
