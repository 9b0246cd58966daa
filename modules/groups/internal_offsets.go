package groups

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// Consumer offsets for modules that consume inside the broker (kernel.InternalOffsets):
// TxnOffsetCommit and a require_stable OffsetFetch without the wire and without
// authorization (the caller is the broker itself), on the same shard code as the
// handlers: the same group checks, the same pending-until-marker transactional
// offsets, the same durability.

// internalOffsetsErr turns a coordinator answer into the error InternalOffsets
// documents: nil, kernel.ErrNotCoordinator (wrapping kerr.NotCoordinator too), or the
// *kerr.Error.
func internalOffsetsErr(op, group string, e *kerr.Error) error {
	switch {
	case e == nil:
		return nil
	case e == kerr.NotCoordinator:
		return fmt.Errorf("groups: %s %q: %w (%w)", op, group, kernel.ErrNotCoordinator, e)
	default:
		return fmt.Errorf("groups: %s %q: %w", op, group, e)
	}
}

// internalCoordinator returns group's loaded shard, creating __consumer_offsets on
// first use as FindCoordinator does for a client.
func (m *Module) internalCoordinator(ctx context.Context, group string) (*shard, *kerr.Error) {
	if group == "" {
		return nil, kerr.InvalidGroupID
	}
	if _, err := m.ensureOffsetsTopic(ctx); err != nil {
		m.log.Warn("internal offsets: no offsets topic", "group", group, "err", err)
		return nil, kerr.CoordinatorNotAvailable
	}
	return m.coordinatorFor(ctx, group)
}

// TxnCommitOffsets is TxnOffsetCommit for group with no member and generation -1
// (kernel.InternalOffsets): one transactional batch holding every offset, pending
// until pe's transaction's marker. The transaction must include the group's offsets
// partition (AddOffsetsToTxn first): the coordinator verifies it (KIP-890 part 1).
func (m *Module) TxnCommitOffsets(ctx context.Context, transactionalID, group string, pe kernel.ProducerIDEpoch, offs map[kernel.TopicPartition]int64) error {
	const op = "transactional offset commit"
	if pe.ID < 0 || pe.Epoch < 0 {
		return internalOffsetsErr(op, group, kerr.InvalidProducerIDMapping)
	}
	if len(offs) == 0 {
		return nil
	}
	s, e := m.internalCoordinator(ctx, group)
	if e != nil {
		return internalOffsetsErr(op, group, e)
	}
	// A group that exists (someone joined it with a consumer) validates the commit
	// as the handler would for a request with no member and generation -1.
	if g := s.lookup(group); g != nil {
		switch {
		case g.share != nil:
			e = kerr.GroupIDNotFound
		case g.consumer != nil:
			e = g.consumer.ValidateCommit("", -1)
		default:
			e = g.classic.ValidateTxnCommit("", nil, -1, m.now())
		}
		if e != nil {
			return internalOffsetsErr(op, group, e)
		}
	}
	im := m.meta.Image()
	now := m.now().UnixMilli()
	recs := make([]kv, 0, len(offs))
	for tp, off := range offs {
		if im.Partition(tp.Topic, tp.Partition) == nil {
			return internalOffsetsErr(op, group, kerr.UnknownTopicOrPartition)
		}
		c := offsets.Committed{Offset: off, LeaderEpoch: offsets.NoLeaderEpoch, CommitTimestamp: now}
		recs = append(recs, kv{key: offsets.EncodeOffsetKey(group, tp.Topic, tp.Partition), value: offsets.EncodeOffsetValue(c)})
	}
	r := txnCommitRequest(transactionalID, group, pe)
	e = m.verifyTxn(ctx, s, r)
	if e == nil {
		e = s.writeTxn(ctx, pe.ID, pe.Epoch, recs)
	}
	return internalOffsetsErr(op, group, e)
}

// StableOffsets returns group's committed offsets of tps (kernel.InternalOffsets),
// failing with UNSTABLE_OFFSET_COMMIT while a transaction holds a pending offset for
// one of them (OffsetFetch with require_stable).
func (m *Module) StableOffsets(ctx context.Context, group string, tps []kernel.TopicPartition) (map[kernel.TopicPartition]int64, error) {
	const op = "fetch offsets"
	s, e := m.internalCoordinator(ctx, group)
	if e != nil {
		return nil, internalOffsetsErr(op, group, e)
	}
	for _, tp := range tps {
		if s.hasPending(group, tp.Topic, tp.Partition) {
			return nil, internalOffsetsErr(op, group, kerr.UnstableOffsetCommit)
		}
	}
	committed, err := m.store.FetchGroup(group)
	if err != nil {
		m.log.Warn("reading committed offsets failed", "group", group, "err", err)
		return nil, internalOffsetsErr(op, group, kerr.CoordinatorNotAvailable)
	}
	out := make(map[kernel.TopicPartition]int64, len(tps))
	for _, tp := range tps {
		if c, ok := committed[offsets.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}]; ok {
			out[tp] = c.Offset
		}
	}
	return out, nil
}

var _ kernel.InternalOffsets = (*Module)(nil)

// txnCommitRequest is the TxnOffsetCommit request TxnCommitOffsets stands for, as
// verifyTxn reads it (ids and producer only).
func txnCommitRequest(transactionalID, group string, pe kernel.ProducerIDEpoch) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = transactionalID, group, pe.ID, pe.Epoch, -1
	return r
}
