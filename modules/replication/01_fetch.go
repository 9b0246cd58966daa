// Fetch: v4-v18. read_committed (isolation level 1) reads stop at the last stable
// offset and list the aborted transactions of the range read; every answer carries the
// LSO. Not implemented: replica (follower) fetches, refused with NOT_LEADER_OR_FOLLOWER
// until the ISR issue; preferred read replica (KIP-392, always -1); diverging epoch
// detection.

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
