package image

import (
	"errors"
	"fmt"
	"math"
)

// MaxProducerIDBlock bounds the count of one ProducerIDs entry. Frozen: Apply checks
// it, so changing it needs a record version bump (see metadata's doc.go). Kafka's brokers ask for
// blocks of 1000.
const MaxProducerIDBlock = 1_000_000

// ErrInvalidProducerIDCount: AllocateProducerIDs was asked for fewer than 1 or more
// than maxProducerIDBlock ids.
var ErrInvalidProducerIDCount = errors.New("metadata: invalid producer id block size")

// ErrProducerIDsExhausted: the block would run past the largest int64. Unreachable in
// practice (2^63 ids), but Apply must still refuse rather than wrap to negative ids.
var ErrProducerIDsExhausted = errors.New("producer ids exhausted")

// ProducerIDsRecord reserves the next Count producer ids for broker BrokerID. The entry
// carries no ids: Apply hands out [next, next+Count) from the state's counter, so two
// proposals racing each other (or proposed by successive controllers) still get
// disjoint blocks, in log order. BrokerID is informational (logs, debugging).
type ProducerIDsRecord struct {
	BrokerID int32 `json:"broker_id"`
	Count    int32 `json:"count"`
}

func (*ProducerIDsRecord) recordType() recordType { return recProducerIDs }

// ValidProducerIDCount checks a block size; both the proposer and Apply use it.
func ValidProducerIDCount(count int32) error {
	if count < 1 || count > MaxProducerIDBlock {
		return fmt.Errorf("%d producer ids, want 1 to %d: %w", count, MaxProducerIDBlock, ErrInvalidProducerIDCount)
	}
	return nil
}

// AllocateProducerIDs reserves count consecutive producer ids for this broker through

// allocateProducerIDs applies r: it advances the counter by r.Count. The block that r
// received starts at the counter's value before this call (see State.ApplyEntry).
//
// Invariant: nextProducerID only grows, so blocks never overlap or repeat; it is part
// of every snapshot (format 3), so this holds across restarts, snapshots and leader
// changes too.
func (s *State) allocateProducerIDs(r *ProducerIDsRecord) error {
	if err := ValidProducerIDCount(r.Count); err != nil {
		return fmt.Errorf("%v: %w", err, ErrInvalidEntry)
	}
	if r.BrokerID < 0 {
		return fmt.Errorf("producer ids for broker %d: %w", r.BrokerID, ErrInvalidEntry)
	}
	if s.NextProducerID > math.MaxInt64-int64(r.Count) {
		return fmt.Errorf("next %d + %d: %w", s.NextProducerID, r.Count, ErrProducerIDsExhausted)
	}
	s.NextProducerID += int64(r.Count)
	return nil
}
