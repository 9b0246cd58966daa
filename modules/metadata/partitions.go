package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// Partition changes that come from outside the controller: a leader's ISR change
// (AlterPartition, kernel.PartitionChanger). Each is a PartitionChange entry with
// version 2 checks, planned on this broker and proposed through the controller; Apply
// decides (state.partitionChange), so a change planned on a stale image is refused
// everywhere alike.

// AlterPartition implements kernel.PartitionChanger: it proposes req.ISR as the
// partition's ISR in a PartitionChange entry that Apply accepts only while req.Leader
// leads the partition at req.LeaderEpoch and its partition epoch is req.PartitionEpoch,
// and only for a valid ISR (non-empty, distinct replicas holding the leader, every
// member it adds a live broker). The entry goes through the controller from any broker.
//
// It returns the partition as this broker's image has it once the entry is applied:
// the change's result, or a later state when the controller changed the partition
// again in the meantime (its PartitionEpoch is then higher still). An ISR equal to the
// current one (as a set) is accepted without a new partition epoch. Errors wrap a
// *kerr.Error: UnknownTopicOrPartition / UnknownTopicID, NotLeaderForPartition
// (Kafka's NOT_LEADER_OR_FOLLOWER, code 6), FencedLeaderEpoch, InvalidUpdateVersion (a
// stale partition epoch: read the image and retry), InvalidRequest, IneligibleReplica,
// NotController (no controller reachable within ctx), RequestTimedOut (the controller
// did not answer: the change may be applied); or they wrap ctx.Err().
func (m *Module) AlterPartition(ctx context.Context, req kernel.AlterPartitionRequest) (kernel.PartitionImage, error) {
	what := fmt.Sprintf("alter partition %s-%d", req.Topic, req.Partition)
	im := m.node.hub.image()
	var t *kernel.TopicImage
	if req.TopicID != ([16]byte{}) {
		what = fmt.Sprintf("alter partition %s (%s)-%d", req.Topic, image.UUID(req.TopicID), req.Partition)
		t = im.TopicByID(req.TopicID)
		if t == nil || (req.Topic != "" && t.Name != req.Topic) {
			return kernel.PartitionImage{}, fmt.Errorf("%s: %w", what, kerr.UnknownTopicID)
		}
	} else if t = im.Topic(req.Topic); t == nil {
		return kernel.PartitionImage{}, fmt.Errorf("%s: %w", what, kerr.UnknownTopicOrPartition)
	}
	switch {
	case req.Partition < 0 || int(req.Partition) >= len(t.Partitions):
		return kernel.PartitionImage{}, fmt.Errorf("%s: %w", what, kerr.UnknownTopicOrPartition)
	case req.Leader < 0 || req.LeaderEpoch < 0 || req.PartitionEpoch < 0:
		// A negative partition epoch would mean "don't check" in the entry.
		return kernel.PartitionImage{}, fmt.Errorf("%s: leader %d, leader epoch %d, partition epoch %d: %w",
			what, req.Leader, req.LeaderEpoch, req.PartitionEpoch, kerr.InvalidRequest)
	case len(req.ISR) == 0:
		// An empty ISR would mean "keep the ISR" in the entry.
		return kernel.PartitionImage{}, fmt.Errorf("%s: empty ISR: %w", what, kerr.InvalidRequest)
	}
	leader, leaderEpoch := req.Leader, req.LeaderEpoch
	rec := &image.PartitionChangeRecord{
		Topic: t.Name, ID: t.ID, Partition: req.Partition, PartitionEpoch: req.PartitionEpoch,
		ISR:               slices.Clone(req.ISR),
		PartitionChangeV2: image.PartitionChangeV2{ExpectLeader: &leader, ExpectLeaderEpoch: &leaderEpoch, Validate: true},
	}
	if req.Resign {
		// The leader's log is offline: no leader (the controller elects a live ISR member).
		none := int32(-1)
		rec.Leader = &none
	}
	im, perr := m.node.changes.propose(ctx, &m.node, rec)
	if perr != nil {
		err := partitionChangeError(ctx, perr)
		m.node.log.Debug("ISR change refused", "topic", t.Name, "partition", req.Partition, "isr", req.ISR, "leader", req.Leader, "err", perr)
		return kernel.PartitionImage{}, fmt.Errorf("%s: %w", what, err)
	}
	nt := im.Topic(t.Name)
	if nt == nil || nt.ID != t.ID {
		return kernel.PartitionImage{}, fmt.Errorf("%s: topic deleted after the change: %w", what, kerr.UnknownTopicOrPartition)
	}
	m.node.log.Info("ISR changed", "topic", t.Name, "partition", req.Partition, "isr", req.ISR, "leader", req.Leader)
	return clonePartition(nt.Partitions[req.Partition]), nil
}

// partitionChangeError maps the outcome of a PartitionChange entry to the Kafka error
// AlterPartition reports, keeping the reason in the message. A ctx error of the
// caller's own ctx is returned as such.
func partitionChangeError(ctx context.Context, err error) error {
	var code *kerr.Error
	switch {
	case errors.Is(err, image.ErrUnknownTopic):
		code = kerr.UnknownTopicOrPartition
	case errors.Is(err, image.ErrNotLeader):
		code = kerr.NotLeaderForPartition
	case errors.Is(err, image.ErrFencedLeaderEpoch):
		code = kerr.FencedLeaderEpoch
	case errors.Is(err, image.ErrStale):
		code = kerr.InvalidUpdateVersion
	case errors.Is(err, image.ErrIneligibleReplica):
		code = kerr.IneligibleReplica
	case errors.Is(err, image.ErrInvalidEntry), errors.Is(err, image.ErrUnknownBroker):
		code = kerr.InvalidRequest
	case ctx.Err() != nil:
		// Not a verdict: the caller gave up (the change may still be applied).
		return fmt.Errorf("%w: %v", ctx.Err(), err)
	case errors.Is(err, ErrNotController), errors.Is(err, ErrNotRunning):
		code = kerr.NotController
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = kerr.RequestTimedOut
	default:
		code = kerr.UnknownServerError
	}
	return fmt.Errorf("%w: %v", code, err)
}

// clonePartition returns a copy of p that shares no slice with the image.
func clonePartition(p kernel.PartitionImage) kernel.PartitionImage {
	p.Replicas, p.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
	p.AddingReplicas, p.RemovingReplicas = slices.Clone(p.AddingReplicas), slices.Clone(p.RemovingReplicas)
	return p
}

var _ kernel.PartitionChanger = (*Module)(nil)
