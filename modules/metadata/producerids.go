package metadata

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// maxProducerIDBlock bounds the count of one ProducerIDs entry. Frozen: Apply checks
// it, so changing it needs a record version bump (see doc.go). Kafka's brokers ask for
// blocks of 1000.
const maxProducerIDBlock = 1_000_000

// ErrInvalidProducerIDCount: AllocateProducerIDs was asked for fewer than 1 or more
// than maxProducerIDBlock ids.
var ErrInvalidProducerIDCount = errors.New("metadata: invalid producer id block size")

// errProducerIDsExhausted: the block would run past the largest int64. Unreachable in
// practice (2^63 ids), but Apply must still refuse rather than wrap to negative ids.
var errProducerIDsExhausted = errors.New("producer ids exhausted")

// producerIDsRecord reserves the next Count producer ids for broker BrokerID. The entry
// carries no ids: Apply hands out [next, next+Count) from the state's counter, so two
// proposals racing each other (or proposed by successive controllers) still get
// disjoint blocks, in log order. BrokerID is informational (logs, debugging).
type producerIDsRecord struct {
	BrokerID int32 `json:"broker_id"`
	Count    int32 `json:"count"`
}

func (*producerIDsRecord) recordType() recordType { return recProducerIDs }

// validProducerIDCount checks a block size; both the proposer and Apply use it.
func validProducerIDCount(count int32) error {
	if count < 1 || count > maxProducerIDBlock {
		return fmt.Errorf("%d producer ids, want 1 to %d: %w", count, maxProducerIDBlock, ErrInvalidProducerIDCount)
	}
	return nil
}

// AllocateProducerIDs reserves count consecutive producer ids for this broker through
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
	if err := validProducerIDCount(count); err != nil {
		m.log.Warn("refused producer id allocation", "count", count, "err", err)
		return -1, err
	}
	rec := &producerIDsRecord{BrokerID: m.nodeID, Count: count}
	_, res, errs := m.proposeAllResults(ctx, []record{rec})
	// A controller change mid-proposal (NOT_CONTROLLER after the entry may have been
	// appended) is retried while ctx allows: a block allocated but never reported is
	// just lost, never handed out twice.
	for errors.Is(errs[0], ErrNotController) && ctx.Err() == nil && !m.isStopped() {
		m.log.Info("retrying producer id allocation after a controller change", "err", errs[0])
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
		_, res, errs = m.proposeAllResults(ctx, []record{rec})
	}
	if errs[0] != nil {
		return -1, fmt.Errorf("allocate %d producer ids: %w", count, errs[0])
	}
	m.log.Info("allocated producer ids", "first", res[0].FirstProducerID, "count", count, "index", res[0].Index)
	return res[0].FirstProducerID, nil
}

// allocateProducerIDs applies r: it advances the counter by r.Count. The block that r
// received starts at the counter's value before this call (see fsm.Apply).
//
// Invariant: nextProducerID only grows, so blocks never overlap or repeat; it is part
// of every snapshot (format 3), so this holds across restarts, snapshots and leader
// changes too.
func (s *state) allocateProducerIDs(r *producerIDsRecord) error {
	if err := validProducerIDCount(r.Count); err != nil {
		return fmt.Errorf("%v: %w", err, errInvalidEntry)
	}
	if r.BrokerID < 0 {
		return fmt.Errorf("producer ids for broker %d: %w", r.BrokerID, errInvalidEntry)
	}
	if s.nextProducerID > math.MaxInt64-int64(r.Count) {
		return fmt.Errorf("next %d + %d: %w", s.nextProducerID, r.Count, errProducerIDsExhausted)
	}
	s.nextProducerID += int64(r.Count)
	return nil
}

var _ kernel.ProducerIDAllocator = (*Module)(nil)
