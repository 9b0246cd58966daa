// Reading a group's committed offsets, for OffsetFetch (09_offset_fetch.go).

package groups

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// fetchGroup is one group of an OffsetFetch, in the v8+ shape.
type fetchGroup = kmsg.OffsetFetchRequestGroup

// fetchOffsets answers one group of an OffsetFetch. Topics nil means every committed
// offset of the group (of topics the principal may describe). With requireStable
// (v7+), a partition with a pending transactional offset of the group answers
// UNSTABLE_OFFSET_COMMIT and no offset, as Kafka: the client retries until the
// transaction ends.
func (m *Module) fetchOffsets(ctx context.Context, req *kernel.Request, fg *fetchGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = fg.Group
	im := m.meta.Image()
	byID := req.Version >= 10
	// Every requested partition is answered, even when the group fails (v0-v1 carry the
	// error only there).
	var s *shard // set once the group's shard is found
	answer := func(code int16, committed map[offsets.TopicPartition]offsets.Committed) {
		for _, t := range fg.Topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			name := t.Topic
			if byID {
				name = ""
				if ti := im.TopicByID(t.TopicID); ti != nil {
					name = ti.Name
				}
			}
			tcode := code
			if tcode == 0 {
				switch {
				case byID && name == "":
					tcode = kerr.UnknownTopicID.Code
				case !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, name):
					tcode = kerr.TopicAuthorizationFailed.Code
				}
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, tcode
				empty := ""
				rp.Metadata = &empty
				if tcode == 0 && requireStable && s != nil && s.hasPending(fg.Group, name, p) {
					rp.ErrorCode = kerr.UnstableOffsetCommit.Code
					rt.Partitions = append(rt.Partitions, rp)
					continue
				}
				if c, ok := committed[offsets.TopicPartition{Topic: name, Partition: p}]; ok && tcode == 0 {
					rp.Offset, rp.LeaderEpoch = c.Offset, c.LeaderEpoch
					md := c.Metadata
					rp.Metadata = &md
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	}
	fail := func(e *kerr.Error) kmsg.OffsetFetchResponseGroup {
		out.ErrorCode = e.Code
		answer(e.Code, nil)
		return out
	}
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResGroup, fg.Group) {
		return fail(kerr.GroupAuthorizationFailed)
	}
	if fg.Group == "" && req.Version >= 8 {
		return fail(kerr.InvalidGroupID)
	}
	s, e := m.coordinatorFor(ctx, fg.Group)
	if e != nil {
		return fail(e)
	}
	if req.Version >= 9 && (fg.MemberID != nil || fg.MemberEpoch >= 0) {
		if g := s.lookup(fg.Group); g != nil && g.consumer != nil {
			id := ""
			if fg.MemberID != nil {
				id = *fg.MemberID
			}
			if e := g.consumer.ValidateFetch(id, fg.MemberEpoch); e != nil {
				return fail(e)
			}
		}
	}
	committed, err := m.store.FetchGroup(fg.Group)
	if err != nil {
		m.log.Warn("reading committed offsets failed", "group", fg.Group, "err", err)
		return fail(kerr.CoordinatorNotAvailable)
	}
	if fg.Topics != nil {
		answer(0, committed)
		return out
	}
	// All topics: group the committed offsets by topic, skipping topics the principal
	// may not describe (and, with topic ids, topics that no longer exist).
	byTopic := map[string][]int32{}
	var order []string
	for tp := range committed {
		if _, seen := byTopic[tp.Topic]; !seen {
			order = append(order, tp.Topic)
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	slices.Sort(order)
	for _, name := range order {
		if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, name) {
			continue
		}
		t := kmsg.OffsetFetchRequestGroupTopic{Topic: name, Partitions: byTopic[name]}
		slices.Sort(t.Partitions)
		if byID {
			ti := im.Topic(name)
			if ti == nil {
				continue
			}
			t.TopicID = ti.ID
		}
		fg.Topics = append(fg.Topics, t)
	}
	if fg.Topics == nil {
		fg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
	}
	answer(0, committed)
	return out
}
