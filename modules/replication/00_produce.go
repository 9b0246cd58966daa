// Produce: v3-v13. Not implemented: idempotent de-duplication and sequence checks, and
// transaction state (idempotent and transactional batches are stored as they come; the
// transactions issue adds both); recompression to a topic's compression.type;
// compacted-topic key checks; per-record indices for errors of compressed batches.

package replication

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleProduce(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.ProduceRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	return m.produce(ctx, req, r)
}
