// ShareFetch: v0-v2 (KIP-932; share_leader.go, share_fetch.go, share_sessions.go).
// Read on the group (else GROUP_AUTHORIZATION_FAILED for the whole request) and Read
// on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions). The share session
// rules are share_sessions.go's; piggybacked acknowledgements are applied (and
// durable) before new records are acquired; with nothing to acquire the request waits
// up to MaxWaitMillis for new data. v2's ShareAcquireMode 1 (record limit) and renew
// acknowledgements (IsRenewAck: no new records are acquired) are served. Not
// implemented: NodeEndpoints (a client that gets NOT_LEADER_OR_FOLLOWER refreshes its
// metadata), BatchSize (acquisitions follow the log's batches).

package groups

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// shareFetchClaim claims the versions this file's header lists.
func shareFetchClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ShareFetch, Min: 0, Max: 2, Handler: kernel.Typed(m.handleShareFetch)}
}

// sharePartResult collects one partition's answer while a share request runs.
type sharePartResult struct {
	tp       kernel.TopicPartition
	topicID  [16]byte
	err      *kerr.Error
	ackErr   *kerr.Error
	acked    bool // the request acknowledged records of this partition
	fetched  shareFetched
	inResult bool // named by the request (answered even when empty)
}

func (m *Module) handleShareFetch(ctx context.Context, req *kernel.Request, r *kmsg.ShareFetchRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
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
	cfg := m.shareConfig(group)
	resp.AcquisitionLockTimeoutMillis = int32(cfg.part.LockDuration / time.Millisecond)
	key := shareSessionKey{group, member}
	old, closing, e := l.sessions.use(key, r.ShareSessionEpoch, m.now())
	if e != nil {
		return fail(e)
	}
	if r.ShareSessionEpoch == 0 && old != nil {
		l.release(ctx, group, member, keysOf(old))
	}
	im := m.meta.Image()
	var (
		results = map[kernel.TopicPartition]*sharePartResult{}
		order   []kernel.TopicPartition
		add     []kernel.TopicPartition
		forget  []kernel.TopicPartition
	)
	result := func(tp kernel.TopicPartition, id [16]byte) *sharePartResult {
		if res := results[tp]; res != nil {
			return res
		}
		res := &sharePartResult{tp: tp, topicID: id}
		results[tp] = res
		order = append(order, tp)
		return res
	}
	readable := map[string]bool{}
	for _, t := range r.Topics {
		ti := im.TopicByID(t.TopicID)
		for _, p := range t.Partitions {
			if ti == nil {
				res := result(kernel.TopicPartition{Topic: "\x00" + string(t.TopicID[:]), Partition: p.Partition}, t.TopicID)
				res.err, res.inResult = kerr.UnknownTopicID, true
				continue
			}
			tp := kernel.TopicPartition{Topic: ti.Name, Partition: p.Partition}
			res := result(tp, t.TopicID)
			res.inResult = true
			allowed, asked := readable[ti.Name]
			if !asked {
				allowed = req.Allowed(ctx, kernel.OpRead, kernel.ResTopic, ti.Name)
				readable[ti.Name] = allowed
			}
			if !allowed {
				res.err = kerr.TopicAuthorizationFailed
				continue
			}
			add = append(add, tp)
			if r.ShareSessionEpoch == 0 {
				l.refreshIfIdle(ctx, group, tp)
			}
			if len(p.AcknowledgementBatches) > 0 {
				batches := make([]ackBatch, 0, len(p.AcknowledgementBatches))
				for _, b := range p.AcknowledgementBatches {
					batches = append(batches, ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
				}
				res.acked = true
				res.ackErr = l.ack(ctx, group, member, tp, batches)
			}
		}
	}
	for _, t := range r.ForgottenTopicsData {
		if ti := im.TopicByID(t.TopicID); ti != nil {
			for _, p := range t.Partitions {
				forget = append(forget, kernel.TopicPartition{Topic: ti.Name, Partition: p})
			}
		}
	}
	if len(forget) > 0 {
		l.release(ctx, group, member, forget)
	}
	if closing {
		// The final request of a session: its acknowledgements are applied, nothing
		// more is acquired, and what the member still holds is released.
		l.release(ctx, group, member, keysOf(old))
		return kernel.Reply(m.shareFetchResponse(resp, im, results, order)), nil
	}
	parts := l.sessions.update(key, add, forget)
	slices.SortFunc(parts, func(a, b kernel.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	if r.IsRenewAck {
		return kernel.Reply(m.shareFetchResponse(resp, im, results, order)), nil
	}
	budget := shareBudget{records: int(r.MaxRecords), bytes: int(r.MaxBytes), aligned: r.ShareAcquireMode == 0}
	if r.Version == 0 || budget.records <= 0 {
		budget.records = shareDefaultMaxRecords
	}
	// The records are copied out of the log into the response: bound what one
	// request may make the broker hold, whatever MaxBytes the client asks for.
	budget.bytes = min(max(budget.bytes, 1), shareMaxResponseBytes)
	var led []kernel.TopicPartition
	attempt := func() bool {
		got := false
		led = led[:0]
		for _, tp := range parts {
			ti := im.Topic(tp.Topic)
			if ti == nil {
				continue // deleted since it joined the session
			}
			res := result(tp, ti.ID)
			if res.err != nil && res.err != kerr.NotLeaderForPartition {
				continue
			}
			f, e := l.fetch(ctx, group, member, tp, &budget)
			res.err = e
			if e == nil {
				led = append(led, tp)
			}
			if len(f.acquired) > 0 {
				res.fetched.acquired = append(res.fetched.acquired, f.acquired...)
				res.fetched.records = append(res.fetched.records, f.records...)
				got = true
			}
		}
		return got
	}
	if !attempt() && r.MaxWaitMillis > 0 && m.waiter != nil && len(led) > 0 {
		m.waiter.WaitPartitions(ctx, slices.Clone(led), time.Duration(r.MaxWaitMillis)*time.Millisecond, attempt)
	}
	return kernel.Reply(m.shareFetchResponse(resp, im, results, order)), nil
}

// shareFetchResponse fills resp's topics from results: every partition the request
// named, and every other session partition that acquired records or failed.
func (m *Module) shareFetchResponse(resp *kmsg.ShareFetchResponse, im *kernel.Image, results map[kernel.TopicPartition]*sharePartResult, order []kernel.TopicPartition) *kmsg.ShareFetchResponse {
	byTopic := map[[16]byte]int{}
	for _, tp := range order {
		res := results[tp]
		if !res.inResult && len(res.fetched.acquired) == 0 && res.err == nil {
			continue
		}
		ti, ok := byTopic[res.topicID]
		if !ok {
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = res.topicID
			resp.Topics = append(resp.Topics, t)
			ti = len(resp.Topics) - 1
			byTopic[res.topicID] = ti
		}
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = tp.Partition
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		if res.err != nil {
			p.ErrorCode = res.err.Code
			if res.err == kerr.NotLeaderForPartition {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaderOf(im, tp)
			}
		}
		if res.ackErr != nil {
			p.AcknowledgeErrorCode = res.ackErr.Code
		}
		p.Records = res.fetched.records
		for _, a := range res.fetched.acquired {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
			p.AcquiredRecords = append(p.AcquiredRecords, ar)
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
	return resp
}

// leaderOf returns tp's leader and leader epoch in im, or -1, -1.
func leaderOf(im *kernel.Image, tp kernel.TopicPartition) (int32, int32) {
	t := im.Topic(tp.Topic)
	if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return -1, -1
	}
	p := t.Partitions[tp.Partition]
	return p.Leader, p.LeaderEpoch
}

func keysOf(set map[kernel.TopicPartition]struct{}) []kernel.TopicPartition {
	out := make([]kernel.TopicPartition, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
