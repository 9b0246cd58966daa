// Metadata: v0-12. Not implemented: v13 (top-level error code, KIP-1102).

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimMetadata is Metadata's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimMetadata(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.Metadata, Min: 0, Max: 12, Handler: kernel.Typed(
		func(ctx context.Context, req *kernel.Request, r *kmsg.MetadataRequest) (kernel.Response, error) {
			return kernel.Reply(m.metadata(ctx, req, r)), nil
		})}
}
