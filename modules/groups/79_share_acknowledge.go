// ShareAcknowledge: v0-v2 (KIP-932). Acknowledgements outside a ShareFetch: Read on the
// group and on each topic, the share session's epoch rules (0 is
// INVALID_SHARE_SESSION_EPOCH here: a session is opened by ShareFetch; -1 closes it
// after the acknowledgements, releasing what the member still holds), each
// partition's acknowledgements applied all or nothing and durable before the answer.
// v2's renew acknowledgements (type 4) extend the records' locks. Not implemented:
// NodeEndpoints.

package groups

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// shareAcknowledgeClaim claims the versions this file's header lists.
func shareAcknowledgeClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ShareAcknowledge, Min: 0, Max: 2, Handler: kernel.Typed(m.handleShareAcknowledge)}
}

func (m *Module) handleShareAcknowledge(ctx context.Context, req *kernel.Request, r *kmsg.ShareAcknowledgeRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(e *kerr.Error) (kernel.Response, error) {
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	l := m.shares
	group, member := deref(r.GroupID), deref(r.MemberID)
	if group == "" || member == "" {
		return fail(kerr.InvalidRequest)
	}
	if !req.Allowed(ctx, kernel.OpRead, kernel.ResGroup, group) {
		return fail(kerr.GroupAuthorizationFailed)
	}
	if r.ShareSessionEpoch == 0 {
		return fail(kerr.InvalidShareSessionEpoch)
	}
	resp.AcquisitionLockTimeoutMillis = int32(m.shareConfig(group).part.LockDuration / time.Millisecond)
	key := shareSessionKey{group, member}
	old, closing, e := l.sessions.use(key, r.ShareSessionEpoch, m.now())
	if e != nil {
		return fail(e)
	}
	im := m.meta.Image()
	readable := map[string]bool{}
	for _, t := range r.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		ti := im.TopicByID(t.TopicID)
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			var e *kerr.Error
			switch {
			case ti == nil:
				e = kerr.UnknownTopicID
			default:
				allowed, asked := readable[ti.Name]
				if !asked {
					allowed = req.Allowed(ctx, kernel.OpRead, kernel.ResTopic, ti.Name)
					readable[ti.Name] = allowed
				}
				if !allowed {
					e = kerr.TopicAuthorizationFailed
					break
				}
				tp := kernel.TopicPartition{Topic: ti.Name, Partition: p.Partition}
				batches := make([]ackBatch, 0, len(p.AcknowledgementBatches))
				for _, b := range p.AcknowledgementBatches {
					batches = append(batches, ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
				}
				if e = l.ack(ctx, group, member, tp, batches); e == kerr.NotLeaderForPartition {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leaderOf(im, tp)
				}
			}
			if e != nil {
				rp.ErrorCode = e.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if closing {
		l.release(ctx, group, member, keysOf(old))
	}
	return kernel.Reply(resp), nil
}
