// Metadata: v0-12. Not implemented: v13 (top-level error code, KIP-1102).

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
