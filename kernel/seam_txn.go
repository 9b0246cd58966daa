package kernel

import (
	"context"
	"errors"
)

// Seams of idempotent producers and transactions (modules/txn). The partition side
// (sequence checks, open transactions, aborted transactions) is the storage Log's (see
// Log.AppendProducer); the coordinator side (producer ids, transactional ids, the
// two-phase commit) is the txn module's; the replication module writes markers and
// serves the read_committed path; the group coordinator keeps transactional offset
// commits pending until their marker.

// ProducerIDAllocator is an optional interface of the metadata module (found with
// LookupAs on "metadata"): producer-id blocks allocated through the metadata log, so
// ids stay unique across restarts and brokers.
type ProducerIDAllocator interface {
	// AllocateProducerIDs reserves count (> 0) consecutive producer ids for this broker
	// and returns the first. Blocks never overlap and never repeat, across restarts.
	AllocateProducerIDs(ctx context.Context, count int32) (first int64, err error)
}

// TxnCoordinatorLocator is implemented by the txn module (role "txn"). The group
// coordinator answers FindCoordinator (one handler per API key) and asks it for key
// type 1 (TRANSACTION).
type TxnCoordinatorLocator interface {
	// TxnStatePartition returns the __transaction_state partition that owns
	// transactionalID, creating the topic on first use. The coordinator is that
	// partition's leader.
	TxnStatePartition(ctx context.Context, transactionalID string) (TopicPartition, error)
}

// TxnVerifier is an optional interface of the txn module (KIP-890): before the first
// transactional batch of a producer's transaction in a partition is appended, the
// replication module asks whether the partition was added to that transaction, so a
// client bug or a zombie cannot leave a transaction open that no coordinator will ever
// end (a "hanging transaction" that pins the last stable offset). With transaction
// version 2 (Produce v12+, TxnOffsetCommit v5+: part 2) it asks the coordinator to add
// the partition instead, as the client no longer sends AddPartitionsToTxn.
type TxnVerifier interface {
	// VerifyTxnPartition returns nil when transactionalID's ongoing transaction, of
	// producerID and epoch, includes tp; with add, it first adds tp (starting the
	// transaction if none is ongoing). The coordinator may be another broker.
	// Otherwise an error wrapping a *kerr.Error (INVALID_TXN_STATE,
	// INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS, ...), ErrNotCoordinator when
	// no broker coordinates transactionalID (no transaction state topic, or a
	// coordinator that cannot verify; a caller that only verifies then skips the
	// check), or another error when the coordinator could not be asked.
	VerifyTxnPartition(ctx context.Context, transactionalID string, producerID int64, epoch int16, tp TopicPartition, add bool) error
}

// TxnVerifierHook is implemented by the replication module: the txn module finds it with
// LookupAs on "replication" at Provision and registers itself, as the transforms module
// registers its transformer (TransformHook). Replication never looks the txn module
// up: txn depends on replication (markers, its state partitions), so that lookup would
// be a cycle.
type TxnVerifierHook interface {
	// SetTxnVerifier registers v (nil unsets it); it applies from the next Produce.
	SetTxnVerifier(v TxnVerifier)
}

// TxnMarker is a COMMIT or ABORT marker for one producer's transaction.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	// TransactionVersion is the transaction's version (KIP-890 part 2). At 2 the
	// coordinator bumped the epoch for the marker, so the partition refuses it
	// (ErrInvalidProducerEpoch) unless its epoch is above the producer's data in an
	// open transaction: a marker at the epoch of the producer's next transaction must
	// not end that one. A retried marker (same epoch, no open transaction) is
	// accepted. Below 2 the epoch may equal the data's.
	TransactionVersion int16
}

// TxnMarkerWriter is an optional interface of the replication module: the transaction
// coordinator writes markers to partitions this broker leads with it (and sends
// WriteTxnMarkers to other brokers once there are several).
type TxnMarkerWriter interface {
	// WriteTxnMarker appends m as a control batch to tp as its leader and returns once
	// it is committed (past the high watermark). ErrNotLeader when this broker does not
	// lead tp; the Log's producer-state errors (ErrInvalidProducerEpoch,
	// ErrTxnCoordinatorFenced) as they are.
	WriteTxnMarker(ctx context.Context, tp TopicPartition, m TxnMarker) error
}

// TxnMarkerHook is implemented by the replication module. The group coordinator
// registers a listener at Provision: transactional offset commits in
// __consumer_offsets become visible (or are dropped) when their marker is written.
type TxnMarkerHook interface {
	// AddTxnMarkerListener registers fn. After a marker is appended to a partition of
	// an internal topic (and committed), fn is called with the partition, the marker
	// and its offset; calls for one partition come in log order, one at a time, on a
	// marker writer's goroutine (not necessarily the one that wrote that marker: a
	// later writer of the same partition may deliver it). A writer returns only after
	// its own marker was delivered, so fn must not write markers to that partition.
	AddTxnMarkerListener(fn func(tp TopicPartition, m TxnMarker, offset int64))
}

// ErrNotCoordinator: this broker does not coordinate the key (NOT_COORDINATOR).
var ErrNotCoordinator = errors.New("not the coordinator")

// ProducerIDEpoch is a producer id and epoch pair.
type ProducerIDEpoch struct {
	ID    int64
	Epoch int16
}

// InternalTxns is an optional interface of the txn module: transactions driven from
// inside the broker (a derived transform's exactly-once mode), the coordinator
// requests without the wire. Each call behaves as its request (same checks, same
// durability before it returns); errors wrap the *kerr.Error the request would have
// answered (CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, ...), or ErrNotCoordinator when
// this broker does not coordinate transactionalID.
type InternalTxns interface {
	InitProducerID(ctx context.Context, transactionalID string, timeoutMs int32) (ProducerIDEpoch, error)
	AddPartitionsToTxn(ctx context.Context, transactionalID string, pe ProducerIDEpoch, tps []TopicPartition) error
	AddOffsetsToTxn(ctx context.Context, transactionalID string, pe ProducerIDEpoch, group string) error
	EndTxn(ctx context.Context, transactionalID string, pe ProducerIDEpoch, commit bool) error
}

// InternalOffsets is an optional interface of the groups module: consumer offsets for
// modules that consume inside the broker (a derived transform keeps its input
// position as the offsets of an internal group, so it is committed atomically with
// its outputs and visible to kadm as lag).
type InternalOffsets interface {
	// TxnCommitOffsets is TxnOffsetCommit for group (no member, generation -1): the
	// offsets become visible when pe's transaction commits.
	TxnCommitOffsets(ctx context.Context, transactionalID, group string, pe ProducerIDEpoch, offsets map[TopicPartition]int64) error
	// StableOffsets returns group's committed offsets of tps (absent: none). It fails
	// with an error wrapping kerr.UnstableOffsetCommit while a transaction holds
	// pending offsets for one of them (the caller retries).
	StableOffsets(ctx context.Context, group string, tps []TopicPartition) (map[TopicPartition]int64, error)
}
