// Group administration (15_describe_groups.go, 16_list_groups.go,
// 42_delete_groups.go): describing and deleting one group.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// groupOps are the operations DescribeGroups and ConsumerGroupDescribe report in
// their authorized-operations bit field (KIP-430): Kafka's supported operations of a
// group resource.
func groupOps() []kernel.Operation {
	return []kernel.Operation{kernel.OpRead, kernel.OpDescribe, kernel.OpDelete, kernel.OpDescribeConfigs, kernel.OpAlterConfigs}
}

// groupAuthorizedOps is the bit field (bit n = operation n) of groupOps the request's
// principal may perform on group id.
func groupAuthorizedOps(ctx context.Context, req *kernel.Request, id string) int32 {
	var bits int32
	for _, op := range groupOps() {
		if req.Allowed(ctx, op, kernel.ResGroup, id) {
			bits |= 1 << op
		}
	}
	return bits
}

func (m *Module) describeGroup(ctx context.Context, req *kernel.Request, r *kmsg.DescribeGroupsRequest, id string) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = id
	d.AuthorizedOperations = -2147483648 // not requested
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResGroup, id) {
		d.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return d
	}
	s, e := m.coordinatorFor(ctx, id)
	if e != nil {
		d.ErrorCode = e.Code
		return d
	}
	if g := s.lookup(id); g != nil && g.consumer != nil {
		d = m.describeConsumerAsClassic(g, d)
	} else if g != nil && g.share != nil {
		// As Kafka: a share group is described by ShareGroupDescribe.
		d.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "group " + id + " is a share group"
		d.ErrorMessage = &msg
	} else if g != nil {
		d = g.classic.Describe(m.now())
	} else if m.storedGroup(id) {
		d.State = "Empty"
		if md, ok, _ := m.store.GroupMetadata(id); ok {
			d.ProtocolType = md.ProtocolType
		}
	} else {
		d.State = "Dead"
		if r.Version >= 6 {
			d.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "group " + id + " not found"
			d.ErrorMessage = &msg
		}
	}
	d.AuthorizedOperations = -2147483648
	if r.IncludeAuthorizedOperations && d.ErrorCode == 0 { // as Kafka: not for a failed group
		d.AuthorizedOperations = groupAuthorizedOps(ctx, req, id)
	}
	return d
}

// storedGroup reports whether the store has offsets or metadata of the group.
func (m *Module) storedGroup(id string) bool {
	if _, ok, _ := m.store.GroupMetadata(id); ok {
		return true
	}
	offs, err := m.store.FetchGroup(id)
	return err == nil && len(offs) > 0
}

// deleteGroup deletes an empty group: it is forgotten, then a tombstone for each
// committed or pending transactional offset, for the group metadata and for each
// KIP-848 group record goes through the log.
func (m *Module) deleteGroup(ctx context.Context, req *kernel.Request, id string) *kerr.Error {
	s, e := m.groupShard(ctx, req, kernel.OpDelete, id)
	if e != nil {
		return e
	}
	// metaMu: a group metadata record snapshotted before the group is forgotten
	// is queued before the tombstones, not after them.
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	s.mu.Lock()
	g := s.groups[id]
	if g != nil && !g.isEmpty() {
		s.mu.Unlock()
		return kerr.NonEmptyGroup
	}
	delete(s.groups, id)
	s.mu.Unlock()
	if g != nil {
		g.markDead(kerr.CoordinatorNotAvailable)
	}
	offs, err := m.store.FetchGroup(id)
	if err != nil {
		return kerr.CoordinatorNotAvailable
	}
	_, hasMeta, _ := m.store.GroupMetadata(id)
	crecs, err := m.store.GroupRecords(id)
	if err != nil {
		return kerr.CoordinatorNotAvailable
	}
	// Pending transactional offsets are deleted with the group, as Kafka does: a
	// tombstone of their key supersedes them, so their COMMIT applies nothing.
	pending := s.pendingPartitions(id)
	if g == nil && len(offs) == 0 && !hasMeta && len(pending) == 0 && len(crecs) == 0 {
		return kerr.GroupIDNotFound
	}
	recs := make([]kv, 0, len(offs)+len(pending)+len(crecs)+1)
	for _, c := range crecs {
		recs = append(recs, kv{key: c.Key})
	}
	for tp := range offs {
		recs = append(recs, kv{key: offsets.EncodeOffsetKey(id, tp.Topic, tp.Partition)})
	}
	for _, tp := range pending {
		if _, ok := offs[tp]; !ok {
			recs = append(recs, kv{key: offsets.EncodeOffsetKey(id, tp.Topic, tp.Partition)})
		}
	}
	recs = append(recs, kv{key: offsets.EncodeGroupKey(id)})
	return s.writeChunked(ctx, recs)
}
