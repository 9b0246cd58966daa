package classic

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// Join handles a JoinGroup request (any version the coordinator claims) from
// client c at now. The returned channel has a buffer of one and receives
// exactly one response: at once for errors and for rejoins that need no
// rebalance, otherwise when the join phase ends (every member rejoined, or the
// rebalance timeout or initial delay ran out as observed by a later call or
// Tick). A caller that stops waiting loses nothing: the response is dropped
// with the channel.
func (g *Group) Join(req *kmsg.JoinGroupRequest, c Client, now time.Time) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	now = g.now
	fail := func(err *kerr.Error, memberID string) <-chan *kmsg.JoinGroupResponse {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = req.Version
		r.ErrorCode = err.Code
		r.Generation = -1
		r.MemberID = memberID
		ch <- r
		return ch
	}
	if g.state == Dead {
		return fail(kerr.CoordinatorNotAvailable, req.MemberID)
	}
	session := millis(req.SessionTimeoutMillis)
	rebalance := millis(req.RebalanceTimeoutMillis)
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	if session < g.cfg.MinSessionTimeout || session > g.cfg.MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout, req.MemberID)
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return fail(kerr.InconsistentGroupProtocol, req.MemberID)
	}
	if len(req.Protocols) > g.cfg.MaxProtocols {
		return fail(kerr.InvalidRequest, req.MemberID)
	}
	size := 0
	protos := make([]protocol, 0, len(req.Protocols))
	seen := make(map[string]bool, len(req.Protocols))
	for _, p := range req.Protocols {
		size += len(p.Name) + len(p.Metadata)
		if seen[p.Name] {
			continue // a repeated name must not count twice in the vote
		}
		seen[p.Name] = true
		protos = append(protos, protocol{name: p.Name, metadata: append([]byte{}, p.Metadata...)})
	}
	if size > g.cfg.MaxMetadataBytes {
		return fail(kerr.InvalidRequest, req.MemberID)
	}
	var self *member
	if req.MemberID != "" {
		self = g.byID[req.MemberID]
	}
	if req.InstanceID != nil && self == nil {
		if id, ok := g.static[*req.InstanceID]; ok {
			self = g.byID[id]
		}
	}
	others := len(g.members)
	if self != nil {
		others--
	}
	if others > 0 && (req.ProtocolType != g.protocolType ||
		!g.supports(protos, self) && (g.cfg.Server == nil || !g.cfg.Server.Wants(g.id, req.ProtocolType))) {
		return fail(kerr.InconsistentGroupProtocol, req.MemberID)
	}
	j := joinArgs{req: req, c: c, protos: protos, session: session, rebalance: rebalance, ch: ch, now: now}
	if req.MemberID == "" {
		g.joinUnknown(j, fail)
	} else {
		g.joinKnown(j, fail)
	}
	return ch
}

type joinArgs struct {
	req                *kmsg.JoinGroupRequest
	c                  Client
	protos             []protocol
	session, rebalance time.Duration
	ch                 chan *kmsg.JoinGroupResponse
	now                time.Time
}

func (g *Group) full() bool { return len(g.members)+len(g.pending) >= g.cfg.MaxSize }

func (g *Group) joinUnknown(j joinArgs, fail func(*kerr.Error, string) <-chan *kmsg.JoinGroupResponse) {
	req := j.req
	if req.InstanceID != nil {
		if oldID, ok := g.static[*req.InstanceID]; ok {
			g.replaceStatic(g.byID[oldID], g.cfg.NewMemberID(j.c.ID), j)
			return
		}
		if g.full() {
			fail(kerr.GroupMaxSizeReached, "")
			return
		}
		g.addMember(g.cfg.NewMemberID(j.c.ID), j)
		return
	}
	if g.full() {
		fail(kerr.GroupMaxSizeReached, "")
		return
	}
	id := g.cfg.NewMemberID(j.c.ID)
	if req.Version >= 4 {
		// KIP-394: the client must come back with this id.
		g.pending[id] = j.now.Add(j.session)
		fail(kerr.MemberIDRequired, id)
		return
	}
	g.addMember(id, j)
}

// replaceStatic gives a static member a new member id (KIP-345): the old
// id is fenced and its waiting calls answered with FENCED_INSTANCE_ID.
func (g *Group) replaceStatic(m *member, newID string, j joinArgs) {
	g.failWaiters(m, kerr.FencedInstanceID.Code)
	oldID := m.id
	delete(g.byID, oldID)
	m.id = newID
	g.byID[newID] = m
	g.static[*m.instanceID] = newID
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	if g.leader == oldID {
		g.leader = newID
	}
	g.revision++
	unchanged := j.req.ProtocolType == m.protocolType && sameProtocols(m.protocols, j.protos)
	g.update(m, j)
	switch g.state {
	case Stable:
		if unchanged {
			// A restarted static member resumes its assignment without a rebalance.
			j.ch <- g.joinResponse(m, j.req.Version, true)
			return
		}
		m.join, m.joinVersion = j.ch, j.req.Version
		g.prepareRebalance(j.now)
	case CompletingRebalance:
		m.join, m.joinVersion = j.ch, j.req.Version
		g.prepareRebalance(j.now)
	default: // PreparingRebalance
		m.join, m.joinVersion = j.ch, j.req.Version
		g.maybeCompleteJoin(j.now)
	}
}

// update records a (re)join's client, timeouts and protocols.
func (g *Group) update(m *member, j joinArgs) {
	m.clientID, m.host = j.c.ID, j.c.Host
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.protocolType, m.protocols = j.req.ProtocolType, j.protos
	m.sessionDeadline = j.now.Add(j.session)
	if len(g.members) == 1 {
		g.protocolType = j.req.ProtocolType
	}
}

func (g *Group) addMember(id string, j joinArgs) {
	m := &member{id: id, instanceID: j.req.InstanceID, join: j.ch, joinVersion: j.req.Version}
	if m.instanceID != nil {
		inst := *m.instanceID
		m.instanceID = &inst
		g.static[inst] = id
	}
	g.members = append(g.members, m)
	g.byID[id] = m
	g.update(m, j)
	switch g.state {
	case PreparingRebalance:
		if g.initialDelay {
			g.initialNewMembers = true
		}
		g.maybeCompleteJoin(j.now)
	default:
		g.prepareRebalance(j.now)
	}
}

func (g *Group) joinKnown(j joinArgs, fail func(*kerr.Error, string) <-chan *kmsg.JoinGroupResponse) {
	req := j.req
	id := req.MemberID
	if _, ok := g.pending[id]; ok {
		if req.InstanceID != nil {
			if _, taken := g.static[*req.InstanceID]; taken {
				fail(kerr.FencedInstanceID, id)
				return
			}
		}
		delete(g.pending, id)
		g.addMember(id, j)
		return
	}
	if req.InstanceID != nil {
		if cur, ok := g.static[*req.InstanceID]; ok && cur != id {
			fail(kerr.FencedInstanceID, id)
			return
		}
	}
	m := g.byID[id]
	if m == nil || g.state == Empty {
		fail(kerr.UnknownMemberID, id)
		return
	}
	unchanged := req.ProtocolType == m.protocolType && sameProtocols(m.protocols, j.protos)
	wait := func() {
		if m.join != nil {
			// A duplicate join: the older request is answered, the newer one waits.
			r := kmsg.NewPtrJoinGroupResponse()
			r.Version = m.joinVersion
			r.ErrorCode = kerr.RebalanceInProgress.Code
			r.Generation = -1
			r.MemberID = m.id
			m.join <- r
		}
		m.join, m.joinVersion = j.ch, req.Version
	}
	switch g.state {
	case PreparingRebalance:
		g.update(m, j)
		wait()
		g.maybeCompleteJoin(j.now)
	case CompletingRebalance, Stable:
		if unchanged && (g.state == CompletingRebalance || m.id != g.leader) {
			// The member missed the join response (a Stable group's leader rejoining
			// unchanged rebalances instead); send it again.
			m.sessionDeadline = j.now.Add(m.sessionTimeout)
			j.ch <- g.joinResponse(m, req.Version, false)
			return
		}
		g.update(m, j)
		wait()
		g.prepareRebalance(j.now)
	}
}

// Sync handles a SyncGroup request (any claimed version) at now. The returned channel has
// a buffer of one and receives exactly one response: at once, or for a
// follower in CompletingRebalance, when the leader's SyncGroup arrives (or
// the group moves on to another rebalance).
func (g *Group) Sync(req *kmsg.SyncGroupRequest, now time.Time) <-chan *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	now = g.now
	fail := func(err *kerr.Error) <-chan *kmsg.SyncGroupResponse {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version = req.Version
		r.ErrorCode = err.Code
		ch <- r
		return ch
	}
	if e := g.checkGeneration(req.MemberID, req.InstanceID, req.Generation); e != nil {
		return fail(e)
	}
	m := g.byID[req.MemberID]
	if req.Version >= 5 && ((req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocolFor(m))) {
		return fail(kerr.InconsistentGroupProtocol)
	}
	switch g.state {
	case PreparingRebalance:
		return fail(kerr.RebalanceInProgress)
	case Stable:
		delete(g.pendingSync, m.id)
		m.sessionDeadline = now.Add(m.sessionTimeout)
		ch <- g.syncResponse(m, req.Version)
		g.maybeFollowUp(now)
		return ch
	}
	// CompletingRebalance.
	if m.id == g.leader && !g.server {
		for _, a := range req.GroupAssignment {
			if len(a.MemberAssignment) > g.cfg.MaxAssignmentBytes {
				fail(kerr.InvalidRequest)
				g.dropMember(m, kerr.UnknownMemberID.Code)
				g.prepareRebalance(now)
				return ch
			}
		}
	}
	delete(g.pendingSync, m.id)
	if m.sync != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version = m.syncVersion
		r.ErrorCode = kerr.RebalanceInProgress.Code
		m.sync <- r
	}
	m.sync, m.syncVersion = ch, req.Version
	if m.id != g.leader || g.server {
		return ch
	}
	given := make(map[string][]byte, len(req.GroupAssignment))
	for _, a := range req.GroupAssignment {
		given[a.MemberID] = a.MemberAssignment
	}
	g.install(given, now)
	return ch
}

// install gives every member its assignment (none for a member given has not),
// makes the group Stable and answers the waiting syncs.
func (g *Group) install(given map[string][]byte, now time.Time) {
	for _, x := range g.members {
		x.assignment = append([]byte{}, given[x.id]...)
		x.assignGen = g.generation
	}
	g.setState(Stable, now)
	for _, x := range g.members {
		if x.sync != nil {
			x.sync <- g.syncResponse(x, x.syncVersion)
			x.sync = nil
			x.sessionDeadline = now.Add(x.sessionTimeout)
		}
	}
}

// Assign installs a server-assigned generation's assignment (see ServerAssigner):
// each member's ConsumerMemberAssignment bytes, the assignor's name (the group's
// protocol as DescribeGroups shows it) and whether another rebalance must follow once
// every member has synced (partitions were withheld until their owners release them).
// It reports false, changing nothing, when generation is no longer waiting for it.
func (g *Group) Assign(generation int32, assignor string, given map[string][]byte, followUp bool, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	if g.state != CompletingRebalance || !g.server || g.generation != generation {
		return false
	}
	for _, a := range given {
		if len(a) > g.cfg.MaxAssignmentBytes {
			// Not the members' fault: assign nothing this generation and rebalance.
			g.prepareRebalance(g.now)
			return false
		}
	}
	g.protocol = assignor
	g.followUp = followUp
	g.install(given, g.now)
	g.maybeFollowUp(g.now)
	return true
}

// ServerMember is one member of a server-assigned generation, as the coordinator's
// assignor sees it.
type ServerMember struct {
	ID         string
	InstanceID *string
	ClientID   string
	// Protocol is the protocol name the member was told and Metadata its
	// subscription under it (a ConsumerMemberMetadata for protocol type consumer).
	Protocol string
	Metadata []byte
	// Assignment is the member's assignment of the previous generation it was
	// assigned in (nil if none), for members whose metadata lists no owned partitions.
	Assignment []byte
}

// ServerMembers returns the members of a server-assigned generation in join order,
// or false when generation is no longer waiting for its assignment.
func (g *Group) ServerMembers(generation int32) ([]ServerMember, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != CompletingRebalance || !g.server || g.generation != generation {
		return nil, false
	}
	out := make([]ServerMember, 0, len(g.members))
	for _, m := range g.members {
		sm := ServerMember{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, Protocol: m.selected,
			Metadata: m.metadataFor(m.selected), Assignment: m.prevAssignment}
		out = append(out, sm)
	}
	return out, true
}

// maybeFollowUp starts the rebalance Assign asked for once nobody is left to sync.
func (g *Group) maybeFollowUp(now time.Time) {
	if g.followUp && g.state == Stable && len(g.pendingSync) == 0 {
		g.followUp = false
		g.prepareRebalance(now)
	}
}

func (g *Group) syncResponse(m *member, version int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	pt, p := g.protocolType, g.protocolFor(m)
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberAssignment = m.assignment
	return r
}

// checkMember returns FENCED_INSTANCE_ID when instanceID belongs to another
// member id, UNKNOWN_MEMBER_ID when id is not a member, nil otherwise.
func (g *Group) checkMember(id string, instanceID *string) *kerr.Error {
	if instanceID != nil {
		if cur, ok := g.static[*instanceID]; ok && cur != id {
			return kerr.FencedInstanceID
		}
	}
	if g.byID[id] == nil || g.state == Empty {
		return kerr.UnknownMemberID
	}
	return nil
}

// checkGeneration checks a request of a member of the current generation: a Dead
// group is COORDINATOR_NOT_AVAILABLE, then checkMember's codes, then
// ILLEGAL_GENERATION for another generation; nil means the member may go on.
func (g *Group) checkGeneration(id string, instanceID *string, generation int32) *kerr.Error {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if e := g.checkMember(id, instanceID); e != nil {
		return e
	}
	if generation != g.generation {
		return kerr.IllegalGeneration
	}
	return nil
}

// simpleCommit reports a commit that names no member (generation < 0, no member id,
// no instance id) to a group that is not Dead.
func (g *Group) simpleCommit(memberID string, instanceID *string, generation int32) bool {
	return g.state != Dead && generation < 0 && memberID == "" && instanceID == nil
}

// Rebalance starts a rebalance of a Stable group: its members are told to rejoin (as
// after a downgrade from the consumer protocol, whose assignment the classic protocol
// then recomputes). Other states are left as they are.
func (g *Group) Rebalance(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	if g.state == Stable {
		g.prepareRebalance(g.now)
	}
}

// Heartbeat handles a Heartbeat request (any claimed version) at now and resets the
// member's session timer. REBALANCE_IN_PROGRESS tells a member to rejoin.
func (g *Group) Heartbeat(req *kmsg.HeartbeatRequest, now time.Time) *kmsg.HeartbeatResponse {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = req.Version
	if e := g.checkGeneration(req.MemberID, req.InstanceID, req.Generation); e != nil {
		r.ErrorCode = e.Code
		return r
	}
	m := g.byID[req.MemberID]
	m.sessionDeadline = g.now.Add(m.sessionTimeout)
	if g.state == PreparingRebalance {
		r.ErrorCode = kerr.RebalanceInProgress.Code
	}
	return r
}

// Leave handles a LeaveGroup request: v0-v2 by member id, v3+ a batch of
// members by member id and/or instance id, with an error code per member.
func (g *Group) Leave(req *kmsg.LeaveGroupRequest, now time.Time) *kmsg.LeaveGroupResponse {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = req.Version
	if g.state == Dead {
		r.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return r
	}
	if req.Version < 3 {
		r.ErrorCode = g.leaveOne(req.MemberID, nil)
		return r
	}
	for _, lm := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		rm.ErrorCode = g.leaveOne(lm.MemberID, lm.InstanceID)
		r.Members = append(r.Members, rm)
	}
	return r
}

func (g *Group) leaveOne(id string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if id != "" && id != cur {
			return kerr.FencedInstanceID.Code
		}
		id = cur
	} else if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		g.maybeCompleteJoin(g.now)
		return 0
	}
	m := g.byID[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	g.removeMember(m, g.now)
	return 0
}

// Describe returns the group as DescribeGroups shows it: members with
// their metadata and assignment only while Stable, as Kafka does.
func (g *Group) Describe(now time.Time) kmsg.DescribeGroupsResponseGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = g.id
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	if g.state == Stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.members {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID = m.id, m.instanceID
		dm.ClientID, dm.ClientHost = m.clientID, m.host
		if g.state == Stable {
			dm.ProtocolMetadata = m.metadataFor(g.protocolFor(m))
			dm.MemberAssignment = m.assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// ValidateTxnCommit checks a TxnOffsetCommit against the group at now, as Kafka's
// classic group does for transactional commits: a Dead group is
// COORDINATOR_NOT_AVAILABLE; a commit naming a member (generation >= 0, a member id or
// an instance id: v3+) must come from a current member (UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID) of the current generation (ILLEGAL_GENERATION); one naming none
// (v0-v2) is allowed whatever the state. Unlike ValidateCommit, a rebalance does not
// refuse it and it does not count as a heartbeat.
func (g *Group) ValidateTxnCommit(memberID string, instanceID *string, generation int32, now time.Time) *kerr.Error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	if g.simpleCommit(memberID, instanceID, generation) {
		return nil
	}
	return g.checkGeneration(memberID, instanceID, generation)
}

// ValidateCommit checks an OffsetCommit against the group at now, as Kafka's classic
// group does: a commit with generation < 0, no member id and no instance id is a
// "simple" commit, allowed only while the group is Empty (else
// UNKNOWN_MEMBER_ID); any other commit must come from a current member
// (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) of the current generation
// (ILLEGAL_GENERATION), and not while the group waits for the leader's assignment
// (REBALANCE_IN_PROGRESS). Commits during PreparingRebalance are allowed, so
// cooperative members keep committing what they still own. A member's valid commit
// also counts as a heartbeat, as in Kafka.
func (g *Group) ValidateCommit(memberID string, instanceID *string, generation int32, now time.Time) *kerr.Error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	if g.simpleCommit(memberID, instanceID, generation) {
		if g.state != Empty {
			return kerr.UnknownMemberID
		}
		return nil
	}
	if e := g.checkGeneration(memberID, instanceID, generation); e != nil {
		return e
	}
	if g.state == CompletingRebalance {
		return kerr.RebalanceInProgress
	}
	m := g.byID[memberID]
	m.sessionDeadline = g.now.Add(m.sessionTimeout)
	return nil
}
