// AddOffsetsToTxn: v0-v4. Adds the group's __consumer_offsets partition to the
// transaction, so its TxnOffsetCommits get the transaction's marker. v2+ answers
// PRODUCER_FENCED where older versions get INVALID_PRODUCER_EPOCH. v4 only adds
// TRANSACTION_ABORTABLE, which Sluice never answers.

package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// addOffsetsToTxnClaim claims the versions this file's header lists.
func addOffsetsToTxnClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AddOffsetsToTxn, Min: 0, Max: 4, Handler: kernel.Typed(m.handleAddOffsetsToTxn)}
}

func (m *Module) handleAddOffsetsToTxn(ctx context.Context, req *kernel.Request, r *kmsg.AddOffsetsToTxnRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = fencedCode(m.addOffsets(ctx, req, r), r.Version, 2)
	return kernel.Reply(resp), nil
}

func (m *Module) addOffsets(ctx context.Context, req *kernel.Request, r *kmsg.AddOffsetsToTxnRequest) *kerr.Error {
	if !req.Allowed(ctx, kernel.OpWrite, kernel.ResTransactionalID, r.TransactionalID) {
		return kerr.TransactionalIDAuthorizationFailed
	}
	if !req.Allowed(ctx, kernel.OpRead, kernel.ResGroup, r.Group) {
		return kerr.GroupAuthorizationFailed
	}
	if r.TransactionalID == "" {
		return kerr.InvalidRequest
	}
	return m.onCoordinator(ctx, m.coordinatorFor, r.TransactionalID, func(s *shard) *kerr.Error {
		tp := m.offsetsPartition(r.Group)
		return s.addPartitions(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, []kernel.TopicPartition{tp}, 0)
	})
}

// offsetsPartition is the group's __consumer_offsets partition, hashed as the group
// coordinator does: over the topic's partition count, or offsets.topic.num.partitions
// while the topic does not exist yet.
func (m *Module) offsetsPartition(group string) kernel.TopicPartition {
	n := m.settings.Load().offsetsPartitions
	if t := m.meta.Image().Topic(offsetsTopic); t != nil && len(t.Partitions) > 0 {
		n = int32(len(t.Partitions))
	}
	return kernel.TopicPartition{Topic: offsetsTopic, Partition: partitionFor(group, max(n, 1))}
}
