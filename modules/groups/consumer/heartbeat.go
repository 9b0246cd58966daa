package consumer

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// Member epochs with a meaning of their own in a heartbeat.
const (
	joinEpoch        = 0
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

// hbError is a heartbeat refused before the group changed.
type hbError struct {
	err *kerr.Error
	msg string
}

// request is a validated heartbeat.
type request struct {
	version      int16
	memberID     string
	epoch        int32
	instanceID   *string
	rack         *string
	rebalance    int32
	names        []string // nil: unchanged
	regex        *string  // nil: unchanged (always nil before v1)
	re           *regexp.Regexp
	assignorName *string
	owned        tps // nil: not reported
	full         bool
}

func blank(s *string) bool { return s != nil && strings.TrimSpace(*s) == "" }

// parse validates req in Kafka's order (throwIfConsumerGroupHeartbeatRequestIsInvalid),
// then against the group's bounds.
func (g *Group) parse(req *kmsg.ConsumerGroupHeartbeatRequest, version int16) (*request, *hbError) {
	invalid := func(msg string) *hbError { return &hbError{kerr.InvalidRequest, msg} }
	r := &request{
		version:      version,
		memberID:     req.MemberID,
		epoch:        req.MemberEpoch,
		instanceID:   req.InstanceID,
		rack:         req.RackID,
		rebalance:    req.RebalanceTimeoutMillis,
		assignorName: req.ServerAssignor,
	}
	if version >= 1 || r.epoch > 0 || r.epoch == leaveEpoch {
		if strings.TrimSpace(r.memberID) == "" {
			return nil, invalid("MemberId can't be empty.")
		}
	}
	if blank(r.instanceID) {
		return nil, invalid("InstanceId can't be empty.")
	}
	if blank(r.rack) {
		return nil, invalid("RackId can't be empty.")
	}
	var regex *string
	if version >= 1 {
		regex = req.SubscribedTopicRegex
	}
	switch {
	case r.epoch == joinEpoch:
		if r.rebalance == -1 {
			return nil, invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if r.rebalance < 0 {
			return nil, invalid("RebalanceTimeoutMs is negative.")
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return nil, invalid("TopicPartitions must be empty when (re-)joining.")
		}
		if req.SubscribedTopicNames == nil && regex == nil {
			return nil, invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case r.epoch == staticLeaveEpoch:
		if r.instanceID == nil {
			return nil, invalid("InstanceId can't be null.")
		}
	case r.epoch < staticLeaveEpoch:
		return nil, invalid("MemberEpoch is invalid.")
	}
	if r.assignorName != nil && g.assignorNamed(*r.assignorName) == nil {
		names := make([]string, 0, len(g.cfg.Assignors))
		for _, a := range g.cfg.Assignors {
			names = append(names, a.Name())
		}
		return nil, &hbError{kerr.UnsupportedAssignor, "ServerAssignor " + *r.assignorName +
			" is not supported. Supported assignors: " + strings.Join(names, ", ") + "."}
	}
	if len(req.SubscribedTopicNames) > g.cfg.MaxTopics {
		return nil, invalid("SubscribedTopicNames has too many topics.")
	}
	if len(req.Topics) > g.cfg.MaxTopics {
		return nil, invalid("TopicPartitions has too many topics.")
	}
	if req.SubscribedTopicNames != nil {
		r.names = slices.Clone(req.SubscribedTopicNames)
		slices.Sort(r.names)
		r.names = slices.Compact(r.names)
	}
	if regex != nil {
		if len(*regex) > g.cfg.MaxRegexBytes {
			return nil, &hbError{kerr.InvalidRegularExpression, "SubscribedTopicRegex is too long."}
		}
		if *regex != "" {
			re, err := g.compileRegex(*regex)
			if err != nil {
				return nil, &hbError{kerr.InvalidRegularExpression, "SubscribedTopicRegex is not a valid regular expression: " + err.Error()}
			}
			r.re = re
		}
		s := *regex
		r.regex = &s
	}
	if req.Topics != nil {
		r.owned = make(tps, len(req.Topics))
		for _, t := range req.Topics {
			ps := normalize(t.Partitions)
			if len(ps) > 0 {
				r.owned[t.TopicID] = union(r.owned[t.TopicID], ps)
			}
		}
	}
	r.full = r.epoch == joinEpoch ||
		(r.rebalance != -1 && (req.SubscribedTopicNames != nil || regex != nil) && req.Topics != nil)
	return r, nil
}

// Heartbeat handles a ConsumerGroupHeartbeat request (any claimed version)
// from client c at now, resolving subscriptions against topics. It answers at once; it
// may run the group's assignor (with ctx) when the group epoch moved past
// the target assignment epoch.
func (g *Group) Heartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, version int16, c Client, topics TopicView, now time.Time) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = version
	fail := func(e *hbError) *kmsg.ConsumerGroupHeartbeatResponse {
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
	if ctx == nil {
		ctx = context.Background()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	now = g.now
	if g.dead {
		return fail(&hbError{g.deadErr, ""})
	}
	r, e := g.parse(req, version)
	if e != nil {
		return fail(e)
	}
	if r.epoch == leaveEpoch || r.epoch == staticLeaveEpoch {
		m, e := g.leave(r, now)
		if e != nil {
			return fail(e)
		}
		g.touch(m)
		resp.MemberID = &m
		resp.MemberEpoch = r.epoch
		return resp
	}
	var (
		m    *member
		bump bool
	)
	if r.epoch == joinEpoch {
		m, bump, e = g.join(r, now)
	} else {
		m, e = g.lookup(r)
	}
	if e != nil {
		return fail(e)
	}
	oldAssigned, oldState, oldEpoch := m.assigned, m.state, m.epoch

	// Update the member; a subscription change bumps the group epoch.
	if r.rebalance >= 0 {
		m.rebalanceTimeout = time.Duration(r.rebalance) * time.Millisecond
	}
	if r.instanceID != nil && m.instanceID == "" {
		m.instanceID = *r.instanceID
		g.static[m.instanceID] = m.id
	}
	if r.rack != nil && *r.rack != m.rack {
		m.rack, bump = *r.rack, true
	}
	m.clientID, m.host = c.ID, c.Host
	if r.names != nil && !slices.Equal(r.names, m.names) {
		g.setNames(m, r.names)
		bump = true
	}
	if r.regex != nil && *r.regex != m.regex {
		g.setRegex(m, *r.regex, r.re)
		bump = true
	}
	if r.assignorName != nil && *r.assignorName != m.serverAssignor {
		m.serverAssignor, bump = *r.assignorName, true
	}

	g.refresh(ctx, topics, now, bump)
	g.reconcile(m, r.owned)
	g.touch(m.id)
	m.sessionDeadline = now.Add(g.cfg.SessionTimeout)
	if m.state != MemberUnrevokedPartitions {
		m.revokeDeadline = time.Time{}
	} else if oldState != MemberUnrevokedPartitions || oldEpoch != m.epoch || m.revokeDeadline.IsZero() {
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
	}

	id := m.id
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(min(g.cfg.HeartbeatInterval.Milliseconds(), 1<<31-1))
	if r.full || !equalTPs(oldAssigned, m.assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		ids := make([]assignor.TopicID, 0, len(m.assigned))
		for t := range m.assigned {
			ids = append(ids, t)
		}
		slices.SortFunc(ids, assignor.TopicID.Compare)
		for _, t := range ids {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID = t
			at.Partitions = slices.Clone(m.assigned[t])
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp
}

// refresh bumps the group epoch when bump is set or the subscribed topics' metadata
// (regex matches included) changed, and computes a new target when the group epoch
// is ahead of it.
func (g *Group) refresh(ctx context.Context, topics TopicView, now time.Time, bump bool) {
	if g.refreshRegexes(topics, now) {
		bump = true
	}
	cur := g.currentMeta(topics)
	if g.metaChanged(cur) {
		bump = true
	}
	if bump {
		g.groupEpoch++
		g.meta = cur
	}
	if g.groupEpoch > g.targetEpoch {
		g.computeTarget(ctx, topics, cur)
	}
}

// join finds or creates the member of a heartbeat with epoch 0. bump
// reports a membership change.
func (g *Group) join(r *request, now time.Time) (*member, bool, *hbError) {
	if r.memberID == "" { // v0: the coordinator names the member
		for {
			r.memberID = g.cfg.NewMemberID()
			if _, used := g.members[r.memberID]; !used && r.memberID != "" {
				break
			}
		}
	}
	if r.instanceID != nil {
		if prevID, ok := g.static[*r.instanceID]; ok && prevID != r.memberID {
			prev := g.members[prevID]
			// A classic member holding the instance id is a client that moved to
			// the consumer protocol (classic clients do not leave when static).
			if prev.epoch != staticLeaveEpoch && prev.classic == nil {
				return nil, false, &hbError{kerr.UnreleasedInstanceID, "Static member " + prevID + " with instance id " +
					*r.instanceID + " is not released yet; it must leave first."}
			}
			if _, used := g.members[r.memberID]; used {
				return nil, false, &hbError{kerr.InvalidRequest, "MemberId is used by another member."}
			}
			return g.replaceStatic(prev, r.memberID), false, nil
		}
	}
	if m := g.members[r.memberID]; m != nil {
		if m.classic != nil {
			return nil, false, &hbError{kerr.UnknownMemberID, "Member " + r.memberID + " uses the classic protocol."}
		}
		if r.instanceID != nil && m.instanceID != "" && m.instanceID != *r.instanceID {
			return nil, false, &hbError{kerr.FencedInstanceID, "MemberId belongs to another instance."}
		}
		return m, false, nil // a rejoin: keeps its assignment, owns nothing now
	}
	if len(g.members) >= g.cfg.MaxSize {
		return nil, false, &hbError{kerr.GroupMaxSizeReached, "The consumer group has reached its maximum size."}
	}
	m := &member{id: r.memberID, assigned: tps{}, pending: tps{}}
	g.members[m.id] = m
	return m, true, nil
}

// replaceStatic gives a static member that left with epoch -2 a new member
// id: the new member inherits its assignment (and target) and starts at
// epoch 0, so its first heartbeat brings it back to the target epoch.
func (g *Group) replaceStatic(prev *member, id string) *member {
	m := &member{
		id: id, instanceID: prev.instanceID, rack: prev.rack,
		rebalanceTimeout: prev.rebalanceTimeout,
		serverAssignor:   prev.serverAssignor,
		names:            prev.names, regex: prev.regex,
		assigned: tps{}, pending: tps{},
	}
	assigned := prev.assigned
	g.setOwnership(prev, nil, nil)
	g.touch(prev.id)
	delete(g.members, prev.id)
	g.members[id] = m
	g.static[m.instanceID] = id
	g.setOwnership(m, assigned, nil)
	if t, ok := g.target[prev.id]; ok {
		delete(g.target, prev.id)
		g.target[id] = t
	}
	// names and regex moved with their references: nameRefs and the regex
	// refcounts are unchanged.
	return m
}

// lookup finds the member of a heartbeat with a positive epoch and fences
// stale epochs.
func (g *Group) lookup(r *request) (*member, *hbError) {
	var m *member
	if r.instanceID != nil {
		id, ok := g.static[*r.instanceID]
		if !ok {
			return nil, &hbError{kerr.UnknownMemberID, "Instance id " + *r.instanceID + " is unknown."}
		}
		if id != r.memberID {
			return nil, &hbError{kerr.FencedInstanceID, "Instance id " + *r.instanceID + " belongs to another member."}
		}
		m = g.members[id]
	} else {
		m = g.members[r.memberID]
		if m == nil {
			return nil, &hbError{kerr.UnknownMemberID, "Member " + r.memberID + " is not in the group."}
		}
	}
	if m.classic != nil {
		return nil, &hbError{kerr.UnknownMemberID, "Member " + r.memberID + " uses the classic protocol."}
	}
	switch {
	case r.epoch > m.epoch:
		return nil, &hbError{kerr.FencedMemberEpoch, "The member epoch is greater than the coordinator's; the member must rejoin."}
	case r.epoch < m.epoch:
		// A member that missed the response moving it to a new epoch may
		// come back with its previous epoch, owning a subset of its partitions.
		if r.epoch != m.prevEpoch || !isSubset(r.owned, m.assigned) {
			return nil, &hbError{kerr.FencedMemberEpoch, "The member epoch is stale; the member must rejoin."}
		}
	}
	return m, nil
}

// leave handles epochs -1 (leave: the member is removed) and -2 (a static
// member leaves for now: it keeps its assignment until its session ends).
func (g *Group) leave(r *request, now time.Time) (string, *hbError) {
	var m *member
	if r.instanceID == nil {
		m = g.members[r.memberID]
		if m == nil {
			return "", &hbError{kerr.UnknownMemberID, "Member " + r.memberID + " is not in the group."}
		}
	} else {
		id, ok := g.static[*r.instanceID]
		if !ok {
			return "", &hbError{kerr.UnknownMemberID, "Instance id " + *r.instanceID + " is unknown."}
		}
		if id != r.memberID {
			return "", &hbError{kerr.FencedInstanceID, "Instance id " + *r.instanceID + " belongs to another member."}
		}
		m = g.members[id]
	}
	if m.classic != nil {
		return "", &hbError{kerr.UnknownMemberID, "Member " + r.memberID + " uses the classic protocol."}
	}
	if r.epoch == leaveEpoch || m.instanceID == "" {
		g.removeMember(m)
		return m.id, nil
	}
	// The client is gone and owns nothing: partitions it was revoking are free.
	g.setOwnership(m, m.assigned, nil)
	m.state = MemberStable
	m.setEpoch(staticLeaveEpoch)
	m.revokeDeadline = time.Time{}
	m.sessionDeadline = now.Add(g.cfg.SessionTimeout)
	return m.id, nil
}
