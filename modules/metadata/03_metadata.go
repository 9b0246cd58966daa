// Metadata: v0-v12. Not implemented: v13 (top-level error code, KIP-1102).

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleMetadata(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.MetadataRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("metadata: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.metadata(ctx, req, r)), nil
}
