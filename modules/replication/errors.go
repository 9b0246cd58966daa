package replication

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// notHostedCode answers a partition this broker does not host: NOT_LEADER_OR_FOLLOWER
// when im has it (it lives on other brokers), else UNKNOWN_TOPIC_OR_PARTITION.
func notHostedCode(im *kernel.Image, tp kernel.TopicPartition) int16 {
	if im.Partition(tp.Topic, tp.Partition) != nil {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

// ledPartition returns tp's partition when this broker leads it, or the code to
// answer: notHostedCode's, or NOT_LEADER_OR_FOLLOWER on a follower.
func (m *Module) ledPartition(im *kernel.Image, tp kernel.TopicPartition) (*Partition, int16) {
	p := m.partition(tp)
	switch {
	case p == nil:
		return nil, m.absentCode(im, tp)
	case !p.IsLeader():
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p, 0
}

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
	case errors.Is(err, kernel.ErrLogOffline):
		return kerr.KafkaStorageError.Code // stored bytes are damaged, not the request's
	case errors.Is(err, kernel.ErrCorrupt):
		return kerr.CorruptMessage.Code
	default:
		return kerr.KafkaStorageError.Code
	}
}
