// OffsetCommit: v0-v10. Not implemented: the v1 per-partition commit timestamp is
// ignored (the broker's time is used, as Kafka 2.1+ does).

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// offsetCommitClaim claims the versions this file's header lists.
func offsetCommitClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.OffsetCommit, Min: 0, Max: 10, Handler: kernel.Typed(m.handleOffsetCommit)}
}

func (m *Module) handleOffsetCommit(ctx context.Context, req *kernel.Request, r *kmsg.OffsetCommitRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	im := m.meta.Image()
	// codes[i][j] is the answer for r.Topics[i].Partitions[j]; 0 means "commit it".
	codes := make(commitCodes, len(r.Topics))
	names := make([]string, len(r.Topics))
	for i := range r.Topics {
		t := &r.Topics[i]
		codes[i] = make([]int16, len(t.Partitions))
		name := t.Topic
		if r.Version >= 10 {
			if ti := im.TopicByID(t.TopicID); ti != nil {
				name = ti.Name
			} else {
				name = ""
			}
		}
		names[i] = name
	}
	set := m.settings.Load()
	s, e := m.groupShard(ctx, req, kernel.OpRead, r.Group)
	if e == nil {
		e = m.validateCommit(s, r)
	}
	if e == nil {
		e = m.commitSpace()
	}
	if e != nil {
		codes.failUnanswered(e)
	}
	now := m.now()
	var recs []kv
	for i := range r.Topics {
		t := &r.Topics[i]
		ti := im.Topic(names[i])
		topicCode := kerr.UnknownTopicID.Code
		if names[i] != "" || r.Version < 10 {
			topicCode = commitTopicCode(ctx, req, names[i], ti)
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if !codes.commits(i, j, topicCode, ti, p.Partition, p.Metadata, set.metadataMax) {
				continue
			}
			c := offsets.Committed{Offset: p.Offset, LeaderEpoch: offsets.NoLeaderEpoch, CommitTimestamp: now.UnixMilli()}
			if r.Version >= 6 {
				c.LeaderEpoch = p.LeaderEpoch
			}
			if r.Version >= 2 && r.Version <= 4 && r.RetentionTimeMillis > 0 {
				c.ExpireTimestamp = c.CommitTimestamp + r.RetentionTimeMillis
			}
			recs = append(recs, commitRecord(r.Group, names[i], p.Partition, c, p.Metadata))
		}
	}
	if len(recs) > 0 {
		if e := s.writeChunked(ctx, recs); e != nil {
			codes.failUnanswered(e)
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
	if g.share != nil {
		return kerr.GroupIDNotFound // a share group commits nothing: its position is its share state
	}
	if g.consumer != nil {
		if e := g.consumer.ValidateCommit(r.MemberID, r.Generation); e != nil {
			return e
		}
		if r.Generation >= 0 && r.Version < 9 && !g.consumer.IsClassicMember(r.MemberID) {
			// Members of KIP-848 groups commit with v9+ (member epochs); classic
			// members with their generation, at any version.
			return kerr.UnsupportedVersion
		}
		return nil
	}
	return g.classic.ValidateCommit(r.MemberID, r.InstanceID, r.Generation, m.now())
}
