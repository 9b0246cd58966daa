package replication

import (
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// strayPoll is how often removeStrays checks whether the broker registered.
const strayPoll = 100 * time.Millisecond

// removeStrays waits until the metadata module is ready (this broker registered, so
// the image holds every change committed before the process started: see
// kernel.StrayRemover) and then has the storage remove, once, the partition
// directories no image will open here: topics deleted and replicas moved away while
// the broker was down. Kafka does the same at a broker's first metadata publication.
func (m *Module) removeStrays(ctx context.Context, sr kernel.StrayRemover) {
	t := time.NewTicker(strayPoll)
	defer t.Stop()
	wait := func(cond func() bool) bool {
		for !cond() {
			select {
			case <-ctx.Done():
				return false
			case <-t.C:
			}
		}
		return true
	}
	if !wait(func() bool { return m.meta.Ready() && m.meta.Image().ClusterID != "" }) {
		return
	}
	// Then until the image of that moment is applied: its partitions are open by
	// then, and an open partition costs the check a map lookup, not a directory read.
	v := m.meta.Image().Version
	if !wait(func() bool { return m.appliedDone.Load() >= v }) {
		return
	}
	node := m.broker.NodeID
	res, err := sr.RemoveStrays(m.meta.Image().ClusterID, node, func(tp kernel.TopicPartition, id [16]byte) bool {
		return placedHere(m.meta.Image(), node, tp, id)
	})
	if err != nil {
		m.log.Error("removing stray partition directories", "err", err)
		return
	}
	m.log.Debug("stray partition directories checked", "kept", res.Kept, "removed", res.Removed, "moved_aside", res.MovedAside)
}

// placedHere reports whether im places a replica of tp on node, of the topic with id
// (any id when zero: a directory that records none).
func placedHere(im *kernel.Image, node int32, tp kernel.TopicPartition, id [16]byte) bool {
	t := im.Topic(tp.Topic)
	if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return false
	}
	if id != ([16]byte{}) && id != t.ID {
		return false // an older incarnation of the name
	}
	return slices.Contains(t.Partitions[tp.Partition].Replicas, node)
}
