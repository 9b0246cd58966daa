package metadata

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// Partition reassignment, as Kafka's KRaft controller does it (see doc.go,
// "Reassignment"): AlterPartitionReassignments starts (or cancels) one, the partition's
// leader grows the ISR as the new replicas catch up, and the controller completes it.

// reassigning reports whether a reassignment of p is in progress.
func reassigning(p *kernel.PartitionImage) bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// without returns the ids of a that are not in b, in a's order.
func without(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// validTarget checks a requested replica list: non-empty, distinct, registered brokers.
func validTarget(im *kernel.Image, target []int32) error {
	if len(target) == 0 {
		return opErr(kerr.InvalidReplicaAssignment, "the replica list is empty")
	}
	if image.HasDuplicates(target) {
		return opErr(kerr.InvalidReplicaAssignment, "the replica list %v has duplicates", target)
	}
	for _, b := range target {
		if im.Brokers[b] == nil {
			return opErr(kerr.InvalidReplicaAssignment, "broker %d is not registered", b)
		}
	}
	return nil
}

// planReassignment returns the entry that moves partition p of t towards target (nil
// target: cancel the reassignment in progress), or nil when nothing is to change.
//
// Start (from the current replicas, the union when a reassignment is in progress, as
// Kafka): the replicas become target followed by the current replicas it leaves out,
// adding = target minus current, removing = current minus target; the leader and ISR
// stay. A target that only reorders the replicas changes them at once. The controller
// completes it (completeReassignments).
//
// Cancel: the replicas and the ISR lose the adding replicas. When that empties the ISR,
// the first remaining replica is the ISR (an unclean revert, refused with
// INVALID_REPLICA_ASSIGNMENT unless unclean(t)). A leader that was being added gives
// way to the first live ISR member in replica order (-1 without one).
func planReassignment(im *kernel.Image, t *kernel.TopicImage, p *kernel.PartitionImage, target []int32, unclean func(*kernel.TopicImage) bool) (*image.PartitionChangeRecord, error) {
	rec := &image.PartitionChangeRecord{Topic: t.Name, ID: t.ID, Partition: p.Partition, PartitionEpoch: p.PartitionEpoch,
		PartitionChangeV2: image.PartitionChangeV2{Validate: true, Reassignment: &image.ReassignmentRecord{}}}
	if target == nil {
		if !reassigning(p) {
			return nil, opErr(kerr.NoReassignmentInProgress, "")
		}
		replicas := without(p.Replicas, p.AddingReplicas)
		isr := without(p.ISR, p.AddingReplicas)
		if len(isr) == 0 {
			if !unclean(t) {
				return nil, opErr(kerr.InvalidReplicaAssignment, "cancelling would need an unclean leader election: every ISR member is a replica being added")
			}
			isr = replicas[:1]
		}
		rec.Replicas, rec.ISR = replicas, slices.Clone(isr)
		if !slices.Contains(isr, p.Leader) {
			leader := firstLive(im, replicas, isr)
			rec.Leader = &leader
		}
		return rec, nil
	}
	if err := validTarget(im, target); err != nil {
		return nil, err
	}
	adding := without(target, p.Replicas)
	removing := without(p.Replicas, target)
	merged := append(slices.Clone(target), removing...)
	if len(adding) == 0 && len(removing) == 0 {
		if slices.Equal(merged, p.Replicas) && !reassigning(p) {
			return nil, nil // already so
		}
		rec.Replicas = merged // a reorder: nothing to wait for
		return rec, nil
	}
	rec.Replicas = merged
	rec.Reassignment = &image.ReassignmentRecord{Adding: adding, Removing: removing}
	return rec, nil
}

// firstLive returns the first of replicas that is a live broker in isr, or -1.
func firstLive(im *kernel.Image, replicas, isr []int32) int32 {
	for _, r := range replicas {
		if b := im.Brokers[r]; b != nil && !b.Fenced && slices.Contains(isr, r) {
			return r
		}
	}
	return -1
}

// completeReassignments returns the entries that complete the reassignments that can
// complete, as Kafka does: once the ISR without the removing replicas is non-empty and
// holds every target replica (so every adding replica has caught up), the replicas
// become the target, the ISR loses the removing replicas, and a leader being removed
// (or not live) gives way to the first live ISR member in target order (-1 without
// one). The entries are version 2 (they clear the reassignment state), validated, and
// checked against the partition epoch.
func completeReassignments(im *kernel.Image) []image.Record {
	var out []image.Record
	for _, name := range slices.Sorted(im.TopicNames()) {
		t := im.Topic(name)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if !reassigning(p) {
				continue
			}
			target := without(p.Replicas, p.RemovingReplicas)
			isr := without(p.ISR, p.RemovingReplicas)
			if len(target) == 0 || len(isr) == 0 || !image.Subset(target, isr) {
				continue
			}
			rec := &image.PartitionChangeRecord{Topic: t.Name, ID: t.ID, Partition: p.Partition, PartitionEpoch: p.PartitionEpoch,
				Replicas: target, PartitionChangeV2: image.PartitionChangeV2{Validate: true, Reassignment: &image.ReassignmentRecord{}}}
			if !slices.Equal(isr, p.ISR) {
				rec.ISR = isr
			}
			if b := im.Brokers[p.Leader]; b == nil || b.Fenced || !slices.Contains(isr, p.Leader) {
				leader := firstLive(im, target, isr)
				rec.Leader = &leader
			}
			out = append(out, rec)
		}
	}
	return out
}

// alterReassignmentsResp serves AlterPartitionReassignments.
func (c *controller) alterReassignmentsResp(ctx context.Context, req *kernel.Request, r *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	resp.Version = r.Version
	// v0 always allows a new replication factor; v1 asks (KIP-860) and the answer
	// says what was applied.
	allowRF := r.Version < 1 || r.AllowReplicationFactorChange
	resp.AllowReplicationFactorChange = allowRF
	type item struct {
		topic     string
		partition int32
		target    []int32
	}
	var items []item
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			items = append(items, item{t.Topic, p.Partition, p.Replicas})
		}
	}
	var denied error
	if !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName) {
		denied = opErr(kerr.ClusterAuthorizationFailed, "")
		resp.ErrorCode, _ = errCode(denied)
	}
	errs := c.planPartitions(ctx, r.TimeoutMillis, denied, len(items),
		func(i int) (string, int32) { return items[i].topic, items[i].partition },
		func(im *kernel.Image, t *kernel.TopicImage, p *kernel.PartitionImage, i int) (*image.PartitionChangeRecord, error) {
			if target := items[i].target; !allowRF && target != nil {
				// The replication factor is the original replicas' during a
				// reassignment: Replicas is then the old and the target together.
				if cur := len(p.Replicas) - len(p.AddingReplicas); len(target) != cur {
					return nil, opErr(kerr.InvalidReplicationFactor,
						"The replication factor is changed from %d to %d but allowReplicationFactorChange is false", cur, len(target))
				}
			}
			return planReassignment(im, t, p, items[i].target, c.uncleanElection(im))
		})
	topicAt := map[string]int{}
	for i, it := range items {
		err := reassignmentError(errs[i])
		if err == nil {
			if it.target == nil {
				c.log.Info("cancelled partition reassignment", "topic", it.topic, "partition", it.partition)
			} else {
				c.log.Info("started partition reassignment", "topic", it.topic, "partition", it.partition, "target", it.target)
			}
		}
		at := topicSlot(topicAt, it.topic, &resp.Topics, func() kmsg.AlterPartitionAssignmentsResponseTopic {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = it.topic
			return rt
		})
		rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
		rp.Partition = it.partition
		rp.ErrorCode, rp.ErrorMessage = errCode(err)
		resp.Topics[at].Partitions = append(resp.Topics[at].Partitions, rp)
	}
	return resp
}

// reassignmentError turns a planned reassignment's outcome into what the client gets.
func reassignmentError(err error) error { return plannedError(err, kerr.InvalidReplicaAssignment) }

// listReassignmentsResp serves ListPartitionReassignments from this broker's image:
// null topics list every reassignment in progress; unknown topics and partitions, and
// partitions without one, are left out (as Kafka).
func (c *controller) listReassignmentsResp(ctx context.Context, req *kernel.Request, r *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	resp.Version = r.Version
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResCluster, kernel.ClusterResourceName) {
		resp.ErrorCode, _ = errCode(opErr(kerr.ClusterAuthorizationFailed, ""))
		return resp
	}
	im := c.hub.image()
	add := func(t *kernel.TopicImage, parts []int32) {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t.Name
		for _, pi := range parts {
			if pi < 0 || int(pi) >= len(t.Partitions) || !reassigning(&t.Partitions[pi]) {
				continue
			}
			p := &t.Partitions[pi]
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = pi
			rp.Replicas = slices.Clone(p.Replicas)
			rp.AddingReplicas, rp.RemovingReplicas = slices.Clone(p.AddingReplicas), slices.Clone(p.RemovingReplicas)
			if rp.AddingReplicas == nil {
				rp.AddingReplicas = []int32{}
			}
			if rp.RemovingReplicas == nil {
				rp.RemovingReplicas = []int32{}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if r.Topics == nil {
		for _, name := range slices.Sorted(im.TopicNames()) {
			t := im.Topic(name)
			all := make([]int32, len(t.Partitions))
			for i := range all {
				all[i] = int32(i)
			}
			add(t, all)
		}
		return resp
	}
	for _, rt := range r.Topics {
		if t := im.Topic(rt.Topic); t != nil {
			add(t, rt.Partitions)
		}
	}
	return resp
}
