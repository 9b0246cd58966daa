package metadata

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// the metadata log and returns the first (kernel.ProducerIDAllocator). It returns once
// the entry is applied to this broker's image. A broker that is not the controller
// forwards the entry to it; ErrNotController only when no controller answered before
// ctx ended. A count outside 1 to 1,000,000 returns an error wrapping
// ErrInvalidProducerIDCount.
//
// Invariant: the first id comes from this entry's own apply result (the raft future's
// response), never from reading the state afterwards: another allocation may have been
// applied in between.
func (m *Module) AllocateProducerIDs(ctx context.Context, count int32) (int64, error) {
	if err := image.ValidProducerIDCount(count); err != nil {
		m.node.log.Warn("refused producer id allocation", "count", count, "err", err)
		return -1, err
	}
	rec := &image.ProducerIDsRecord{BrokerID: m.node.nodeID, Count: count}
	_, res, errs := m.node.proposeAllResults(ctx, []image.Record{rec})
	// A controller change mid-proposal (NOT_CONTROLLER after the entry may have been
	// appended) is retried while ctx allows: a block allocated but never reported is
	// just lost, never handed out twice.
	for errors.Is(errs[0], ErrNotController) && ctx.Err() == nil && !m.node.isStopped() {
		m.node.log.Info("retrying producer id allocation after a controller change", "err", errs[0])
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
		_, res, errs = m.node.proposeAllResults(ctx, []image.Record{rec})
	}
	if errs[0] != nil {
		return -1, fmt.Errorf("allocate %d producer ids: %w", count, errs[0])
	}
	m.node.log.Info("allocated producer ids", "first", res[0].FirstProducerID, "count", count, "index", res[0].Index)
	return res[0].FirstProducerID, nil
}

var _ kernel.ProducerIDAllocator = (*Module)(nil)
