// Committed offsets: OffsetCommit v0-v10, OffsetFetch v0-v10 (v7+ require_stable,
// v8+ several groups in one request, v10 topic ids), OffsetDelete v0. Not
// implemented: the v1 per-partition commit timestamp is ignored (the broker's time is
// used, as Kafka 2.1+ does).

package groups

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

func (m *Module) handleOffsetCommit(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.OffsetCommitRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	im := m.meta.Image()
	// codes[i][j] is the answer for r.Topics[i].Partitions[j]; 0 means "commit it".
	codes := make([][]int16, len(r.Topics))
	names := make([]string, len(r.Topics))
	all := func(e *kerr.Error) {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = e.Code
				}
			}
		}
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		codes[i] = make([]int16, len(t.Partitions))
		name := t.Topic
		if r.Version >= 10 {
			if ti := im.TopicsByID[t.TopicID]; ti != nil {
				name = ti.Name
			} else {
				name = ""
			}
		}
		names[i] = name
	}
	groupAllowed := req.Allowed(ctx, kernel.OpRead, kernel.ResGroup, r.Group)
	set := m.settings.Load()
	var s *shard
	var e *kerr.Error
	switch {
	case !groupAllowed:
		e = kerr.GroupAuthorizationFailed
	case r.Group == "":
		e = kerr.InvalidGroupID
	default:
		s, e = m.coordinatorFor(ctx, r.Group)
	}
	if e == nil {
		e = m.validateCommit(s, r)
	}
	if e != nil {
		all(e)
	}
	now := m.now()
	var recs []kv
	for i := range r.Topics {
		t := &r.Topics[i]
		topicCode := int16(0)
		ti := im.Topic(names[i])
		switch {
		case names[i] == "" && r.Version >= 10:
			topicCode = kerr.UnknownTopicID.Code
		case !req.Allowed(ctx, kernel.OpRead, kernel.ResTopic, names[i]):
			topicCode = kerr.TopicAuthorizationFailed.Code
		case ti == nil:
			topicCode = kerr.UnknownTopicOrPartition.Code
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if codes[i][j] != 0 {
				continue
			}
			switch {
			case topicCode != 0:
				codes[i][j] = topicCode
			case p.Partition < 0 || int(p.Partition) >= len(ti.Partitions):
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			case p.Metadata != nil && len(*p.Metadata) > set.metadataMax:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			default:
				c := offsets.Committed{Offset: p.Offset, LeaderEpoch: offsets.NoLeaderEpoch, CommitTimestamp: now.UnixMilli()}
				if r.Version >= 6 {
					c.LeaderEpoch = p.LeaderEpoch
				}
				if p.Metadata != nil {
					c.Metadata = *p.Metadata
				}
				if r.Version >= 2 && r.Version <= 4 && r.RetentionTimeMillis > 0 {
					c.ExpireTimestamp = c.CommitTimestamp + r.RetentionTimeMillis
				}
				recs = append(recs, kv{key: offsets.EncodeOffsetKey(r.Group, names[i], p.Partition), value: offsets.EncodeOffsetValue(c)})
			}
		}
	}
	if len(recs) > 0 {
		if e := s.writeChunked(ctx, recs); e != nil {
			all(e)
		} else {
			m.commits.Add(int64(len(recs)))
		}
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for j := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = t.Partitions[j].Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}

// validateCommit checks the committer against the group: a member of the current
// generation, or a simple (non-member) commit to a group without members. Unknown
// groups accept only simple commits (generation < 0, whatever the member id, as Kafka).
func (m *Module) validateCommit(s *shard, r *kmsg.OffsetCommitRequest) *kerr.Error {
	g := s.lookup(r.Group)
	if g == nil {
		if r.Generation >= 0 {
			// As Kafka: v9+ says GROUP_ID_NOT_FOUND (clear for both protocols),
			// older versions ILLEGAL_GENERATION (what old clients expect).
			if r.Version >= 9 {
				return kerr.GroupIDNotFound
			}
			return kerr.IllegalGeneration
		}
		return nil
	}
	if g.consumer != nil {
		if e := g.consumer.ValidateCommit(r.MemberID, r.Generation); e != nil {
			return e
		}
		if r.Generation >= 0 && r.Version < 9 {
			// Members of KIP-848 groups commit with v9+ (member epochs).
			return kerr.UnsupportedVersion
		}
		return nil
	}
	return g.classic.ValidateCommit(r.MemberID, r.InstanceID, r.Generation, m.now())
}

// fetchGroup is one group of an OffsetFetch, in the v8+ shape.
type fetchGroup = kmsg.OffsetFetchRequestGroup

func (m *Module) handleOffsetFetch(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.OffsetFetchRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for i := range r.Groups {
			resp.Groups = append(resp.Groups, m.fetchOffsets(ctx, req, &r.Groups[i], r.RequireStable))
		}
		return kernel.Reply(resp), nil
	}
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = r.Group
	if r.Topics != nil {
		fg.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(r.Topics))
		for _, t := range r.Topics {
			fg.Topics = append(fg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	g := m.fetchOffsets(ctx, req, &fg, r.Version >= 7 && r.RequireStable)
	if r.Version >= 2 {
		resp.ErrorCode = g.ErrorCode
	}
	for _, t := range g.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			if r.Version < 2 && g.ErrorCode != 0 {
				rp.ErrorCode = g.ErrorCode // v0-v1 have no group-level error
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}

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
				if ti := im.TopicsByID[t.TopicID]; ti != nil {
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

func (m *Module) handleOffsetDelete(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.OffsetDeleteRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var s *shard
	var e *kerr.Error
	switch {
	case !req.Allowed(ctx, kernel.OpDelete, kernel.ResGroup, r.Group):
		e = kerr.GroupAuthorizationFailed
	case r.Group == "":
		e = kerr.InvalidGroupID
	default:
		s, e = m.coordinatorFor(ctx, r.Group)
	}
	if e == nil {
		if s.lookup(r.Group) == nil {
			if _, has, _ := m.store.GroupMetadata(r.Group); !has {
				if offs, err := m.store.FetchGroup(r.Group); err == nil && len(offs) == 0 {
					e = kerr.GroupIDNotFound
				}
			}
		}
	}
	if e != nil {
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	// A partition a live member is subscribed to cannot lose its offset
	// (GROUP_SUBSCRIBED_TO_TOPIC): classic groups carry subscriptions in opaque
	// protocol metadata, so any topic of a non-empty consumer group counts.
	g := s.lookup(r.Group)
	busy := g != nil && !g.isEmpty()
	var recs []kv
	codes := make([][]int16, len(r.Topics))
	for i, t := range r.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		tcode := int16(0)
		switch {
		case !req.Allowed(ctx, kernel.OpRead, kernel.ResTopic, t.Topic):
			tcode = kerr.TopicAuthorizationFailed.Code
		case busy && g.subscribedTo(t.Topic):
			tcode = kerr.GroupSubscribedToTopic.Code
		}
		for j, p := range t.Partitions {
			if tcode != 0 {
				codes[i][j] = tcode
				continue
			}
			// A pending transactional offset is deleted too (the tombstone
			// supersedes it), as Kafka.
			if _, has, _ := m.store.Fetch(r.Group, t.Topic, p.Partition); has || s.hasPending(r.Group, t.Topic, p.Partition) {
				recs = append(recs, kv{key: offsets.EncodeOffsetKey(r.Group, t.Topic, p.Partition)})
			}
		}
	}
	if e := s.writeChunked(ctx, recs); e != nil {
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	for i, t := range r.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}
