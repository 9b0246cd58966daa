package share

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// Member epochs with a meaning of their own in a heartbeat.
const (
	joinEpoch  = 0
	leaveEpoch = -1
)

// hbError is a heartbeat refused before the group changed.
type hbError struct {
	err *kerr.Error
	msg string
}

// request is a validated heartbeat.
type request struct {
	memberID string
	epoch    int32
	rack     *string  // nil: unchanged
	names    []string // nil: unchanged; else sorted and unique
}

// parse validates req; it looks at nothing of the group but its bounds.
func (g *Group) parse(req *kmsg.ShareGroupHeartbeatRequest) (*request, *hbError) {
	invalid := func(msg string) *hbError { return &hbError{kerr.InvalidRequest, msg} }
	r := &request{memberID: req.MemberID, epoch: req.MemberEpoch, rack: req.RackID}
	if strings.TrimSpace(r.memberID) == "" {
		return nil, invalid("MemberId can't be empty.")
	}
	if r.rack != nil && strings.TrimSpace(*r.rack) == "" {
		return nil, invalid("RackId can't be empty.")
	}
	switch {
	case r.epoch == joinEpoch && req.SubscribedTopicNames == nil:
		return nil, invalid("SubscribedTopicNames must be set in first request.")
	case r.epoch < leaveEpoch:
		return nil, invalid("MemberEpoch is invalid.")
	}
	if len(req.SubscribedTopicNames) > g.cfg.MaxTopics {
		return nil, invalid("SubscribedTopicNames has too many topics.")
	}
	if req.SubscribedTopicNames != nil {
		r.names = slices.Clone(req.SubscribedTopicNames)
		slices.Sort(r.names)
		r.names = slices.Compact(r.names)
	}
	return r, nil
}

// Heartbeat handles a ShareGroupHeartbeat request (v0 or v1: they are the
// same) from client c at now, resolving subscriptions against topics. It
// recomputes the target assignment when the group epoch moved past it, and
// moves the member to the target at once.
func (g *Group) Heartbeat(req *kmsg.ShareGroupHeartbeatRequest, version int16, c Client, topics TopicView, now time.Time) *kmsg.ShareGroupHeartbeatResponse {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.Version = version
	fail := func(e *hbError) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = e.err.Code
		if e.msg != "" {
			msg := e.msg
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if req == nil {
		return fail(&hbError{kerr.InvalidRequest, "no request"})
	}
	if topics == nil {
		topics = noTopics{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	now = g.now
	if g.dead {
		return fail(&hbError{g.deadErr, ""})
	}
	r, e := g.parse(req)
	if e != nil {
		return fail(e)
	}
	m := g.members[r.memberID]
	switch {
	case r.epoch == leaveEpoch:
		if m == nil {
			return fail(&hbError{kerr.UnknownMemberID, "Member " + r.memberID + " is not in the group."})
		}
		g.removeMember(m)
		id := m.id
		resp.MemberID = &id
		resp.MemberEpoch = leaveEpoch
		return resp
	case r.epoch == joinEpoch && m == nil && len(g.members) >= g.cfg.MaxSize:
		return fail(&hbError{kerr.GroupMaxSizeReached, "The share group has reached its maximum size."})
	case r.epoch != joinEpoch && m == nil:
		return fail(&hbError{kerr.UnknownMemberID, "Member " + r.memberID + " is not in the group."})
	case r.epoch != joinEpoch && r.epoch != m.epoch:
		return fail(&hbError{kerr.FencedMemberEpoch, "The member epoch is not the coordinator's; the member must rejoin."})
	}

	bump := false
	if m == nil {
		m = &member{id: r.memberID, assigned: tps{}}
		g.members[m.id] = m
		bump = true
	}
	m.clientID, m.host = c.ID, c.Host
	if r.rack != nil && *r.rack != m.rack {
		m.rack, bump = *r.rack, true
	}
	if r.names != nil && !slices.Equal(r.names, m.names) {
		g.setNames(m, r.names)
		bump = true
	}
	cur := g.currentMeta(topics)
	if g.metaChanged(cur) {
		bump = true
	}
	if bump {
		g.groupEpoch++
	}
	if g.groupEpoch > g.targetEpoch {
		g.computeTarget(cur)
	}

	changed := !equalTPs(m.assigned, g.target[m.id])
	if changed {
		g.setAssigned(m, g.target[m.id])
	}
	m.epoch = g.targetEpoch
	m.sessionDeadline = now.Add(g.cfg.SessionTimeout)

	id := m.id
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(min(g.cfg.HeartbeatInterval.Milliseconds(), 1<<31-1))
	if changed || r.epoch == joinEpoch {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, t := range sortedTopics(m.assigned) {
			at := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			at.TopicID = t
			at.Partitions = slices.Clone(m.assigned[t])
			a.TopicPartitions = append(a.TopicPartitions, at)
		}
		resp.Assignment = &a
	}
	return resp
}

// currentMeta looks up every topic the group subscribes to; topics that do
// not exist are absent.
func (g *Group) currentMeta(topics TopicView) map[string]topicMeta {
	cur := make(map[string]topicMeta, len(g.nameRefs))
	for n := range g.nameRefs {
		if id, parts, ok := topics.TopicByName(n); ok && parts >= 0 {
			cur[n] = topicMeta{id, parts}
		}
	}
	return cur
}

// metaChanged reports whether a subscribed topic appeared, disappeared or
// changed (id or partition count) since the target was computed. Topics no
// longer subscribed do not count: their removal came with a membership or
// subscription change that bumped the epoch already.
func (g *Group) metaChanged(cur map[string]topicMeta) bool {
	for n, m := range cur {
		if old, ok := g.meta[n]; !ok || old != m {
			return true
		}
	}
	for n := range g.nameRefs {
		if _, now := cur[n]; !now {
			if _, before := g.meta[n]; before {
				return true
			}
		}
	}
	return false
}

// computeTarget runs the share assignor for the current group epoch, over
// the subscribed topics cur, each member's previous target as its previous
// assignment.
func (g *Group) computeTarget(cur map[string]topicMeta) {
	topics := make(map[assignor.TopicID]Topic, len(cur))
	for n, t := range cur {
		topics[t.id] = Topic{ID: t.id, Name: n, Partitions: t.partitions}
	}
	ms := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, Member{ID: m.id, Topics: m.names})
	}
	out := Assign(ms, topics, g.target)
	target := make(map[string]tps, len(out))
	for id, a := range out {
		target[id] = a
	}
	g.target, g.targetEpoch, g.meta = target, g.groupEpoch, cur
}
