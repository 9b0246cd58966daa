// Metadata: v0-13. v13's top-level error code (KIP-1102, REBOOTSTRAP_REQUIRED) is
// always 0: a Sluice broker never asks a client to rebootstrap. Not implemented:
// nothing known.

package metadata

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimMetadata is Metadata's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimMetadata(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.Metadata, Min: 0, Max: 13, Handler: kernel.Replying(m.metadata)}
}
