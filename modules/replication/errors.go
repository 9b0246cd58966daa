package replication

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// errorCode maps a partition-level Go error to its Kafka code. It is used only at the
// response edge.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotLeader), errors.Is(err, kernel.ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, ErrUnknownLeaderEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, ErrClosed), errors.Is(err, kernel.ErrLogClosed):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, kernel.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, kernel.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, kernel.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, kernel.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, kernel.ErrTxnCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, kernel.ErrCorrupt):
		return kerr.CorruptMessage.Code
	default:
		return kerr.KafkaStorageError.Code
	}
}
