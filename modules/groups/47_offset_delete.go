// OffsetDelete: v0. Pending transactional offsets of a partition are deleted too.
// Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// offsetDeleteClaim claims the versions this file's header lists.
func offsetDeleteClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.OffsetDelete, Min: 0, Max: 0, Handler: kernel.Typed(m.handleOffsetDelete)}
}

func (m *Module) handleOffsetDelete(ctx context.Context, req *kernel.Request, r *kmsg.OffsetDeleteRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	s, e := m.groupShard(ctx, req, kernel.OpDelete, r.Group)
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
