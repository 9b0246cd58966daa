package consumer

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// ClassicProtocolType is the only protocol type a classic member of a consumer group
// may use: its protocols' metadata are ConsumerMemberMetadata (subscriptions) and
// its assignments ConsumerMemberAssignment.
const ClassicProtocolType = "consumer"

// ClassicProtocol is one protocol a classic-protocol member supports: the name of a
// client-side assignor and its metadata (an encoded ConsumerMemberMetadata).
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// classicInfo is what a classic-protocol member said in its last JoinGroup.
type classicInfo struct {
	protocols      []ClassicProtocol // preference order, names unique
	sessionTimeout time.Duration
	subVersion     int16 // the version of its subscription, echoed in assignments
}

// ClassicMember is a classic-protocol member as a protocol migration carries it
// (FromClassic, ToClassic).
type ClassicMember struct {
	ID, InstanceID                   string // InstanceID "" for a dynamic member
	ClientID, ClientHost             string
	SessionTimeout, RebalanceTimeout time.Duration
	Protocols                        []ClassicProtocol // at least one
	// Assignment is the member's current partitions, an encoded
	// ConsumerMemberAssignment.
	Assignment []byte
}

func (c Config) classicDefaults() Config {
	if c.ClassicMinSessionTimeout <= 0 {
		c.ClassicMinSessionTimeout = 6 * time.Second
	}
	if c.ClassicMaxSessionTimeout <= 0 {
		c.ClassicMaxSessionTimeout = 30 * time.Minute
	}
	if c.ClassicMaxProtocols <= 0 {
		c.ClassicMaxProtocols = 64
	}
	if c.ClassicMaxMetadataBytes <= 0 {
		c.ClassicMaxMetadataBytes = 256 << 10
	}
	return c
}

// classicJoin is a validated JoinGroup of a classic member.
type classicJoin struct {
	protocols []ClassicProtocol
	session   time.Duration
	rebalance time.Duration
	sub       kmsg.ConsumerMemberMetadata
}

// parseClassicJoin validates a JoinGroup against the group's bounds, as the classic
// coordinator does, and decodes the subscription of its first protocol.
func (g *Group) parseClassicJoin(req *kmsg.JoinGroupRequest) (*classicJoin, *kerr.Error) {
	j := &classicJoin{
		session:   time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		rebalance: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
	}
	if req.Version == 0 || j.rebalance <= 0 {
		j.rebalance = j.session
	}
	if j.session < g.cfg.ClassicMinSessionTimeout || j.session > g.cfg.ClassicMaxSessionTimeout {
		return nil, kerr.InvalidSessionTimeout
	}
	if req.ProtocolType != ClassicProtocolType || len(req.Protocols) == 0 {
		return nil, kerr.InconsistentGroupProtocol
	}
	if len(req.Protocols) > g.cfg.ClassicMaxProtocols {
		return nil, kerr.InvalidRequest
	}
	size := 0
	for _, p := range req.Protocols {
		size += len(p.Name) + len(p.Metadata)
		if slices.ContainsFunc(j.protocols, func(q ClassicProtocol) bool { return q.Name == p.Name }) {
			continue
		}
		j.protocols = append(j.protocols, ClassicProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)})
	}
	if size > g.cfg.ClassicMaxMetadataBytes {
		return nil, kerr.InvalidRequest
	}
	if err := j.sub.ReadFrom(j.protocols[0].Metadata); err != nil {
		return nil, kerr.InconsistentGroupProtocol
	}
	if len(j.sub.Topics) > g.cfg.MaxTopics || len(j.sub.OwnedPartitions) > g.cfg.MaxTopics {
		return nil, kerr.InvalidRequest
	}
	return j, nil
}

// JoinClassic handles a JoinGroup (v0-v9) of a classic-protocol member in this
// consumer group (KIP-848's classic members, see doc.go). It answers at once: every
// member is a follower (empty leader, no member list) with its first protocol; the
// server's assignor assigns, and SyncClassic hands the member its partitions.
// admitNew says whether a member the group does not know yet may join (the migration
// policy lets classic members in); a known member id or static instance id always
// may. It may run the group's assignor (with ctx).
func (g *Group) JoinClassic(ctx context.Context, req *kmsg.JoinGroupRequest, c Client, topics TopicView, admitNew bool, now time.Time) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = req.Version
	resp.Generation = -1
	resp.MemberID = req.MemberID
	fail := func(e *kerr.Error) *kmsg.JoinGroupResponse {
		resp.ErrorCode = e.Code
		return resp
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
		return fail(g.deadErr)
	}
	j, e := g.parseClassicJoin(req)
	if e != nil {
		return fail(e)
	}
	m, bump, e := g.classicMemberFor(req.MemberID, req.InstanceID, admitNew)
	if e != nil {
		return fail(e)
	}
	m.classic = &classicInfo{protocols: j.protocols, sessionTimeout: j.session, subVersion: j.sub.Version}
	m.rebalanceTimeout = j.rebalance
	m.clientID, m.host = c.ID, c.Host
	names := slices.Clone(j.sub.Topics)
	slices.Sort(names)
	names = slices.Compact(names)
	if names == nil {
		names = []string{}
	}
	if !slices.Equal(names, m.names) {
		g.setNames(m, names)
		bump = true
	}
	if m.regex != "" {
		g.setRegex(m, "")
		bump = true
	}
	rack := ""
	if j.sub.Rack != nil {
		rack = strings.TrimSpace(*j.sub.Rack)
	}
	if rack != m.rack {
		m.rack, bump = rack, true
	}
	if m.serverAssignor != "" {
		m.serverAssignor, bump = "", true
	}

	// A classic client joins having revoked what it gives up: an eager one
	// everything, a cooperative one what its subscription does not list as owned.
	// Of what it was given, it still owns only what it lists.
	owned := tps{}
	for _, t := range j.sub.OwnedPartitions {
		if id, _, ok := topics.TopicByName(t.Topic); ok {
			owned[id] = union(owned[id], normalize(t.Partitions))
		}
	}
	still := tps{}
	for _, t := range topicUnion(m.assigned, m.pending) {
		putNonEmpty(still, t, intersect(owned[t], union(m.assigned[t], m.pending[t])))
	}
	g.setOwnership(m, still, nil)

	g.refresh(ctx, topics, now, bump)
	g.reconcileClassic(m, now)
	g.touch(m.id)
	m.sessionDeadline = now.Add(j.session)

	resp.Generation = m.epoch
	pt, p := ClassicProtocolType, j.protocols[0].Name
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.MemberID = m.id
	return resp
}

// classicMemberFor finds or creates the member of a classic JoinGroup. bump reports a
// new member. A static member joining without its member id (a restarted client)
// replaces the one holding its instance id, keeping its partitions, as in the classic
// protocol (KIP-345).
func (g *Group) classicMemberFor(memberID string, instanceID *string, admitNew bool) (*member, bool, *kerr.Error) {
	if instanceID != nil && *instanceID == "" {
		instanceID = nil
	}
	if instanceID != nil {
		if prevID, ok := g.static[*instanceID]; ok {
			prev := g.members[prevID]
			switch {
			case memberID == "":
				return g.replaceStatic(prev, g.newMemberID()), false, nil
			case memberID != prevID:
				return nil, false, kerr.FencedInstanceID
			case prev.classic == nil:
				return nil, false, kerr.UnknownMemberID
			}
			return prev, false, nil
		}
		if memberID != "" {
			return nil, false, kerr.UnknownMemberID
		}
	} else if memberID != "" {
		m := g.members[memberID]
		if m == nil || m.classic == nil {
			return nil, false, kerr.UnknownMemberID
		}
		return m, false, nil
	}
	if !admitNew {
		return nil, false, kerr.InconsistentGroupProtocol
	}
	if len(g.members) >= g.cfg.MaxSize {
		return nil, false, kerr.GroupMaxSizeReached
	}
	m := &member{id: g.newMemberID(), assigned: tps{}, pending: tps{}, classic: &classicInfo{}}
	if instanceID != nil {
		m.instanceID = *instanceID
		g.static[m.instanceID] = m.id
	}
	g.members[m.id] = m
	return m, true, nil
}

func (g *Group) newMemberID() string {
	for {
		id := g.cfg.NewMemberID()
		if _, used := g.members[id]; !used && id != "" {
			return id
		}
	}
}

// reconcileClassic gives classic member m, at its join, its next assignment: what it
// still owns of its target, plus the target's partitions nobody else holds. What it
// owns outside its target stays pending revocation (the client drops it when it sees
// its new assignment, then rejoins) and counts as owned by it until its next join
// lists it no more, so nobody gets a partition before its classic owner gave it up.
// The member moves to the target epoch: that is its generation.
func (g *Group) reconcileClassic(m *member, now time.Time) {
	target := g.target[m.id]
	assigned, revoke := tps{}, tps{}
	unreleased := false
	for _, t := range topicUnion(m.assigned, target) {
		cur, want := m.assigned[t], target[t]
		putNonEmpty(revoke, t, difference(cur, want))
		keep := intersect(cur, want)
		var free []int32
		for _, p := range difference(want, cur) {
			if o, held := g.owner[tp{t, p}]; held && o != m.id {
				unreleased = true
				continue
			}
			free = append(free, p)
		}
		putNonEmpty(assigned, t, union(keep, free))
	}
	m.setEpoch(g.targetEpoch)
	g.setOwnership(m, assigned, revoke)
	m.revokeDeadline = time.Time{}
	switch {
	case len(revoke) > 0:
		m.state = MemberUnrevokedPartitions
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
	case unreleased:
		m.state = MemberUnreleasedPartitions
	default:
		m.state = MemberStable
	}
}

// classicMustRejoin reports whether classic member m must rejoin to move on: it has
// partitions to revoke, or its target has partitions it lacks that nobody holds.
func (g *Group) classicMustRejoin(m *member) bool {
	if len(m.pending) > 0 {
		return true
	}
	target := g.target[m.id]
	for _, t := range topicUnion(m.assigned, target) {
		if len(difference(m.assigned[t], target[t])) > 0 {
			return true
		}
		for _, p := range difference(target[t], m.assigned[t]) {
			if o, held := g.owner[tp{t, p}]; !held || o == m.id {
				return true
			}
		}
	}
	return false
}

// classicLookup finds the classic member a SyncGroup or Heartbeat names.
func (g *Group) classicLookup(memberID string, instanceID *string) (*member, *kerr.Error) {
	if instanceID != nil && *instanceID != "" {
		id, ok := g.static[*instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID
		}
		if id != memberID {
			return nil, kerr.FencedInstanceID
		}
	}
	m := g.members[memberID]
	if m == nil || m.classic == nil {
		return nil, kerr.UnknownMemberID
	}
	return m, nil
}

// SyncClassic handles a SyncGroup (v0-v5) of a classic member: it answers the
// assignment its JoinGroup computed (the leader's assignments, if a client sends
// any, are ignored: the server assigns).
func (g *Group) SyncClassic(req *kmsg.SyncGroupRequest, topics TopicView, now time.Time) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.Version
	if topics == nil {
		topics = noTopics{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	if g.dead {
		resp.ErrorCode = g.deadErr.Code
		return resp
	}
	m, e := g.classicLookup(req.MemberID, req.InstanceID)
	if e == nil && req.Generation != m.epoch {
		e = kerr.IllegalGeneration
	}
	if e == nil && ((req.ProtocolType != nil && *req.ProtocolType != ClassicProtocolType) ||
		(req.Protocol != nil && *req.Protocol != m.classic.protocols[0].Name)) {
		e = kerr.InconsistentGroupProtocol
	}
	if e != nil {
		resp.ErrorCode = e.Code
		return resp
	}
	m.sessionDeadline = g.now.Add(m.classic.sessionTimeout)
	pt, p := ClassicProtocolType, m.classic.protocols[0].Name
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.MemberAssignment = encodeClassicAssignment(m.classic.subVersion, m.assigned, topics)
	return resp
}

// encodeClassicAssignment encodes partitions as a ConsumerMemberAssignment of the
// member's subscription version (at most 3), topics by name; topics unknown to
// topics are left out.
func encodeClassicAssignment(version int16, set tps, topics TopicView) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = min(max(version, 0), 3)
	for _, id := range slices.SortedFunc(func(yield func(assignor.TopicID) bool) {
		for t := range set {
			if !yield(t) {
				return
			}
		}
	}, assignor.TopicID.Compare) {
		name, _, ok := topics.TopicByID(id)
		if !ok {
			continue
		}
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = name, slices.Clone(set[id])
		a.Topics = append(a.Topics, t)
	}
	return a.AppendTo(nil)
}

// HeartbeatClassic handles a Heartbeat (v0-v4) of a classic member: it keeps the
// member's session and, when the member must rejoin to move towards its target
// (classicMustRejoin), answers REBALANCE_IN_PROGRESS; a member told so must rejoin
// within its rebalance timeout or is removed. It also notices metadata changes of
// the subscribed topics and computes a new target when the group epoch moved, as
// ConsumerGroupHeartbeat does, so a group of only classic members rebalances too.
func (g *Group) HeartbeatClassic(ctx context.Context, req *kmsg.HeartbeatRequest, topics TopicView, now time.Time) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
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
		resp.ErrorCode = g.deadErr.Code
		return resp
	}
	m, e := g.classicLookup(req.MemberID, req.InstanceID)
	if e == nil && req.Generation != m.epoch {
		e = kerr.IllegalGeneration
	}
	if e != nil {
		resp.ErrorCode = e.Code
		return resp
	}
	m.sessionDeadline = now.Add(m.classic.sessionTimeout)
	g.refresh(ctx, topics, now, false)
	if g.classicMustRejoin(m) {
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		if m.revokeDeadline.IsZero() {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
	}
	return resp
}

// LeaveClassic handles a LeaveGroup (v0-v5): v0-v2 name one member by id, v3+ a batch
// by member id and/or instance id (KIP-345), each answered with its own error code.
// Any member may be removed this way, consumer-protocol ones included (an admin
// removing a static member, as Kafka allows).
func (g *Group) LeaveClassic(req *kmsg.LeaveGroupRequest, now time.Time) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	if g.dead {
		resp.ErrorCode = g.deadErr.Code
		return resp
	}
	if req.Version < 3 {
		resp.ErrorCode = g.leaveOneClassic(req.MemberID, nil)
		return resp
	}
	for _, lm := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		rm.ErrorCode = g.leaveOneClassic(lm.MemberID, lm.InstanceID)
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func (g *Group) leaveOneClassic(id string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if id != "" && id != cur {
			return kerr.FencedInstanceID.Code
		}
		id = cur
	}
	m := g.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	g.removeMember(m)
	return 0
}

// IsClassicMember reports whether id is a classic-protocol member (which commits
// with its generation, at any OffsetCommit version).
func (g *Group) IsClassicMember(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[id]
	return m != nil && m.classic != nil
}

// Protocols counts the members of each protocol: consumer (KIP-848) and classic.
func (g *Group) Protocols() (consumerMembers, classicMembers int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.members {
		if m.classic != nil {
			classicMembers++
		} else {
			consumerMembers++
		}
	}
	return consumerMembers, classicMembers
}

// FromClassic builds a consumer group from a classic group's Stable generation (the
// migration policy's upgrade, when a consumer-protocol member joins a classic group):
// every member becomes a classic member at the generation as its epoch, with its
// assignment as both its current and target partitions, so nothing moves until the
// joining member bumps the group epoch. Members with no protocol, repeated ids or
// instance ids, and partitions already given to an earlier member are skipped.
func FromClassic(id string, cfg Config, generation int32, members []ClassicMember, topics TopicView, now time.Time) *Group {
	g := New(id, cfg, now)
	if topics == nil {
		topics = noTopics{}
	}
	g.groupEpoch, g.targetEpoch = generation, generation
	for _, cm := range members {
		if cm.ID == "" || g.members[cm.ID] != nil || len(cm.Protocols) == 0 {
			continue
		}
		if cm.InstanceID != "" {
			if _, taken := g.static[cm.InstanceID]; taken {
				continue
			}
		}
		var sub kmsg.ConsumerMemberMetadata
		_ = sub.ReadFrom(cm.Protocols[0].Metadata) // undecodable: subscribed to nothing
		m := &member{
			id: cm.ID, instanceID: cm.InstanceID, clientID: cm.ClientID, host: cm.ClientHost,
			epoch: generation, prevEpoch: generation, rebalanceTimeout: cm.RebalanceTimeout,
			assigned: tps{}, pending: tps{},
			classic: &classicInfo{protocols: cloneProtocols(cm.Protocols), sessionTimeout: cm.SessionTimeout, subVersion: sub.Version},
		}
		if sub.Rack != nil {
			m.rack = strings.TrimSpace(*sub.Rack)
		}
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
		names := slices.Clone(sub.Topics)
		slices.Sort(names)
		g.setNames(m, slices.Compact(names))
		set := tps{}
		var a kmsg.ConsumerMemberAssignment
		if a.ReadFrom(cm.Assignment) == nil {
			for _, t := range a.Topics {
				tid, n, ok := topics.TopicByName(t.Topic)
				if !ok {
					continue
				}
				ps := slices.DeleteFunc(normalize(t.Partitions), func(p int32) bool { return p >= n })
				set[tid] = union(set[tid], ps)
			}
		}
		g.setOwnership(m, g.unowned(set), nil)
		g.target[m.id] = cloneTPs(m.assigned)
		m.sessionDeadline = now.Add(cm.SessionTimeout)
		g.touch(m.id)
	}
	g.meta = g.currentMeta(topics)
	g.targetDirty = true
	return g
}

// ToClassic returns the group as a classic group's members (the migration policy's
// downgrade, when the last consumer-protocol member left): ok only when the group has
// members and all are classic ones. generation is the members' generation when they
// all have the same (so their heartbeats are answered REBALANCE_IN_PROGRESS, not
// ILLEGAL_GENERATION, when the classic group rebalances), else the group epoch. Each
// member's Assignment is its current partitions (what it was last given), topics by
// name.
func (g *Group) ToClassic(topics TopicView) (generation int32, members []ClassicMember, ok bool) {
	if topics == nil {
		topics = noTopics{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead || len(g.members) == 0 {
		return 0, nil, false
	}
	for _, m := range g.sortedMembers() {
		if m.classic == nil {
			return 0, nil, false
		}
		members = append(members, ClassicMember{
			ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.host,
			SessionTimeout: m.classic.sessionTimeout, RebalanceTimeout: m.rebalanceTimeout,
			Protocols:  cloneProtocols(m.classic.protocols),
			Assignment: encodeClassicAssignment(m.classic.subVersion, m.assigned, topics),
		})
	}
	generation = g.groupEpoch
	for i, m := range g.sortedMembers() {
		if i == 0 {
			generation = m.epoch
		} else if m.epoch != generation {
			generation = g.groupEpoch
			break
		}
	}
	return generation, members, true
}

func cloneProtocols(ps []ClassicProtocol) []ClassicProtocol {
	out := make([]ClassicProtocol, len(ps))
	for i, p := range ps {
		out[i] = ClassicProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)}
	}
	return out
}
