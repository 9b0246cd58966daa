package txn

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// Transactions driven from inside the broker (kernel.InternalTxns): the coordinator
// paths of InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn without the
// wire and without authorization (the caller is the broker itself). Each call runs the
// same shard code as its handler, so it has the same checks, the same
// CONCURRENT_TRANSACTIONS wait (ConcurrentWaitMs) and the same durability: it returns
// once the __transaction_state record is committed.

// internalErr turns a coordinator answer into the error InternalTxns documents: nil,
// kernel.ErrNotCoordinator (wrapping kerr.NotCoordinator too), or the *kerr.Error.
func internalErr(op, id string, e *kerr.Error) error {
	switch {
	case e == nil:
		return nil
	case e == kerr.NotCoordinator:
		return fmt.Errorf("txn: %s %q: %w (%w)", op, id, kernel.ErrNotCoordinator, e)
	default:
		return fmt.Errorf("txn: %s %q: %w", op, id, e)
	}
}

// internalCoordinator returns the loaded shard of id, creating __transaction_state on
// first use as FindCoordinator does for a client.
func (m *Module) internalCoordinator(ctx context.Context, id string) (*shard, *kerr.Error) {
	if id == "" {
		return nil, kerr.InvalidRequest
	}
	if _, err := m.TxnStatePartition(ctx, id); err != nil {
		m.log.Warn("internal transaction: no transaction state topic", "transactional_id", id, "err", err)
		return nil, kerr.CoordinatorNotAvailable
	}
	return m.coordinatorFor(ctx, id)
}

// InitProducerID is InitProducerId for transactionalID with no expected producer
// (kernel.InternalTxns): it fences the id's previous producer, aborting its ongoing
// transaction (answered CONCURRENT_TRANSACTIONS until the abort completes; the caller
// retries).
func (m *Module) InitProducerID(ctx context.Context, transactionalID string, timeoutMs int32) (kernel.ProducerIDEpoch, error) {
	none := kernel.ProducerIDEpoch{ID: -1, Epoch: -1}
	set := m.settings.Load()
	if set == nil { // not started yet
		return none, internalErr("init producer id", transactionalID, kerr.CoordinatorNotAvailable)
	}
	if timeoutMs <= 0 || int64(timeoutMs) > set.maxTimeoutMs {
		return none, internalErr("init producer id", transactionalID, kerr.InvalidTransactionTimeout)
	}
	var pid int64
	var epoch int16
	e := m.onCoordinator(ctx, m.internalCoordinator, transactionalID, func(s *shard) *kerr.Error {
		var e *kerr.Error
		pid, epoch, e = s.initProducerID(ctx, transactionalID, timeoutMs, nil)
		return e
	})
	if e != nil {
		return none, internalErr("init producer id", transactionalID, e)
	}
	return kernel.ProducerIDEpoch{ID: pid, Epoch: epoch}, nil
}

// AddPartitionsToTxn adds tps (which must exist: UNKNOWN_TOPIC_OR_PARTITION) to
// transactionalID's transaction (kernel.InternalTxns).
func (m *Module) AddPartitionsToTxn(ctx context.Context, transactionalID string, pe kernel.ProducerIDEpoch, tps []kernel.TopicPartition) error {
	if len(tps) == 0 {
		return nil
	}
	im := m.meta.Image()
	for _, tp := range tps {
		if im.Partition(tp.Topic, tp.Partition) == nil {
			return internalErr("add partitions", transactionalID, kerr.UnknownTopicOrPartition)
		}
	}
	e := m.onCoordinator(ctx, m.internalCoordinator, transactionalID, func(s *shard) *kerr.Error {
		return s.addPartitions(ctx, transactionalID, pe.ID, pe.Epoch, tps, 0)
	})
	return internalErr("add partitions", transactionalID, e)
}

// AddOffsetsToTxn adds group's __consumer_offsets partition to transactionalID's
// transaction (kernel.InternalTxns).
func (m *Module) AddOffsetsToTxn(ctx context.Context, transactionalID string, pe kernel.ProducerIDEpoch, group string) error {
	if group == "" {
		return internalErr("add offsets", transactionalID, kerr.InvalidRequest)
	}
	e := m.onCoordinator(ctx, m.internalCoordinator, transactionalID, func(s *shard) *kerr.Error {
		tp := m.offsetsPartition(group)
		return s.addPartitions(ctx, transactionalID, pe.ID, pe.Epoch, []kernel.TopicPartition{tp}, 0)
	})
	return internalErr("add offsets", transactionalID, e)
}

// EndTxn commits or aborts transactionalID's transaction (kernel.InternalTxns). It
// returns once PrepareCommit/PrepareAbort is durable; the markers follow, and the
// id's next AddPartitionsToTxn waits for them (CONCURRENT_TRANSACTIONS meanwhile).
func (m *Module) EndTxn(ctx context.Context, transactionalID string, pe kernel.ProducerIDEpoch, commit bool) error {
	e := m.onCoordinator(ctx, m.internalCoordinator, transactionalID, func(s *shard) *kerr.Error {
		_, e := s.endTxn(ctx, transactionalID, pe.ID, pe.Epoch, commit, 0)
		return e
	})
	return internalErr("end transaction", transactionalID, e)
}

var _ kernel.InternalTxns = (*Module)(nil)
