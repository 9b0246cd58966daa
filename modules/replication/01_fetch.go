// Fetch: v4-v18. Not implemented: replica (follower) fetches, refused with
// NOT_LEADER_OR_FOLLOWER until the ISR issue; aborted transactions (always empty, LSO =
// HW); preferred read replica (KIP-392, always -1); diverging epoch detection.

package replication

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleFetch(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.FetchRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	body, err := m.fetch(ctx, req, r)
	if err != nil {
		return kernel.Response{}, err
	}
	return kernel.Response{Body: body}, nil
}
