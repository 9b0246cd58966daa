package classic

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is the state of a classic group.
type State int8

// The states of a classic group; see the diagram in doc.go.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

// String returns the state name Kafka uses in DescribeGroups and ListGroups.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// Config bounds and times a group. The zero value of a field means its default.
type Config struct {
	// MaxSize caps members plus pending (KIP-394) members (group.max.size). Default 1000.
	MaxSize int
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms. Default 3s; negative means 0.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound a member's session timeout
	// (group.min/max.session.timeout.ms). Defaults 6s and 30m.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxMetadataBytes caps the summed protocol metadata of one member. Default 256 KiB.
	MaxMetadataBytes int
	// MaxProtocols caps the protocols one member may list. Default 64.
	MaxProtocols int
	// MaxAssignmentBytes caps one member's assignment from the leader. Default 1 MiB.
	MaxAssignmentBytes int
	// NewMemberID generates a member id for a client id. Default
	// "<clientID>-<32 random hex digits>". Tests inject a deterministic one.
	NewMemberID func(clientID string) string
	// Server, if set, lets the coordinator assign generations itself (see
	// ServerAssigner); nil means the leader always assigns.
	Server ServerAssigner
}

// ServerAssigner lets the coordinator assign a classic group's generations itself
// instead of the leader (server-side assignment of classic members, as Kafka 4 does
// for classic members of a consumer group).
//
// In a server-assigned generation every member is told it is a follower (an empty
// leader id and member list, as Kafka's coordinator answers), each with a protocol
// name of its own (the first it listed, so members need not share one), and the
// group waits for Group.Assign instead of the leader's SyncGroup.
type ServerAssigner interface {
	// Wants reports whether the coordinator assigns group's next generation. It is
	// asked when a member joins (a group the coordinator assigns admits members
	// without a protocol in common) and when a join phase ends. It runs under the
	// group's lock: it must be quick and must not call the Group.
	Wants(group, protocolType string) bool
	// Start is called, under the group's lock, when a server-assigned generation
	// begins. It must not block or call the Group; it arranges for g.Assign to be
	// called with that generation (from another goroutine).
	Start(g *Group, generation int32)
}

func (c Config) withDefaults() Config {
	if c.MaxSize <= 0 {
		c.MaxSize = 1000
	}
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = 3 * time.Second
	} else if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.MaxMetadataBytes <= 0 {
		c.MaxMetadataBytes = 256 << 10
	}
	if c.MaxProtocols <= 0 {
		c.MaxProtocols = 64
	}
	if c.MaxAssignmentBytes <= 0 {
		c.MaxAssignmentBytes = 1 << 20
	}
	if c.NewMemberID == nil {
		c.NewMemberID = randomMemberID
	}
	return c
}

func randomMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return clientID + "-" + hex.EncodeToString(b[:])
}

// Client identifies the connection a request came from.
type Client struct {
	ID   string // the request header's client id
	Host string // the peer address, as DescribeGroups shows it
}

type protocol struct {
	name     string
	metadata []byte
}

type member struct {
	id               string
	instanceID       *string
	clientID, host   string
	protocolType     string
	protocols        []protocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	sessionDeadline  time.Time
	assignment       []byte
	assignGen        int32  // generation assignment came from
	selected         string // in a server-assigned generation, the protocol it is told
	prevAssignment   []byte // the last assignment before the current rebalance

	join        chan *kmsg.JoinGroupResponse // non-nil while awaiting the join's end
	joinVersion int16
	sync        chan *kmsg.SyncGroupResponse // non-nil while awaiting the leader's sync
	syncVersion int16
}

// protocolFor is the protocol name m is told: its own in a server-assigned generation,
// else the group's, else (a restored member of a server-assigned group) its first.
func (g *Group) protocolFor(m *member) string {
	if m.selected != "" {
		return m.selected
	}
	if m.metadataFor(g.protocol) != nil || len(m.protocols) == 0 {
		return g.protocol
	}
	return m.protocols[0].name
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// Group is one classic group's membership state machine. Its methods are
// safe for concurrent use; none blocks. JoinGroup and SyncGroup return a
// channel that receives exactly one response, possibly later (from another
// member's call or from Tick).
type Group struct {
	mu  sync.Mutex
	id  string
	cfg Config
	now time.Time // latest time seen; the clock never goes back

	state        State
	stateSince   time.Time // when the group entered state
	revision     uint64    // see Revision
	generation   int32
	protocolType string
	protocol     string // selected protocol, "" unless CompletingRebalance or Stable
	leader       string

	members []*member          // in join order
	byID    map[string]*member // member id -> member
	static  map[string]string  // instance id -> member id
	pending map[string]time.Time

	// PreparingRebalance: when the join ends (rebalance timeout or initial delay).
	joinDeadline      time.Time
	initialDelay      bool // the join is an initial delayed join
	initialRemaining  time.Duration
	initialNewMembers bool

	// CompletingRebalance / Stable: members that got the join response but
	// have not sent SyncGroup yet, and when they are given up on.
	pendingSync  map[string]struct{}
	syncDeadline time.Time

	// server: this generation is assigned by cfg.Server (see ServerAssigner); in
	// CompletingRebalance the group then waits for Assign until syncDeadline.
	// followUp: Assign asked for another rebalance once every member has synced.
	server, followUp bool
}

// New returns an Empty group with generation 0.
func New(id string, cfg Config, now time.Time) *Group {
	return &Group{
		id:          id,
		cfg:         cfg.withDefaults(),
		now:         now,
		stateSince:  now,
		byID:        map[string]*member{},
		static:      map[string]string{},
		pending:     map[string]time.Time{},
		pendingSync: map[string]struct{}{},
	}
}

// ID returns the group id.
func (g *Group) ID() string { return g.id }

// State returns the current state.
func (g *Group) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// Generation returns the current generation id.
func (g *Group) Generation() int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.generation
}

// Revision returns a counter that grows whenever what a Snapshot of the group
// holds may have changed other than by session deadlines: every state change and
// every KIP-345 static member replacement (a new member id for an instance id).
// The coordinator compares it to decide whether to write group metadata again.
func (g *Group) Revision() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.revision
}

func (g *Group) setState(s State, at time.Time) {
	g.state = s
	g.stateSince = at
	g.revision++
}

// ProtocolType returns the group's protocol type ("consumer" for consumers),
// kept while the group is Empty, as ListGroups shows it.
func (g *Group) ProtocolType() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.protocolType
}

// IsEmpty reports whether the group has no members and no pending members,
// so its committed offsets may expire.
func (g *Group) IsEmpty() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state == Empty && len(g.pending) == 0
}

// Size returns the number of members and of pending (KIP-394) members.
func (g *Group) Size() (members, pending int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.members), len(g.pending)
}

// MarkDead marks the group Dead (deleted or unloaded). Waiting calls get err
// (NOT_COORDINATOR when the coordinator moved, COORDINATOR_NOT_AVAILABLE
// otherwise), later calls get COORDINATOR_NOT_AVAILABLE.
func (g *Group) MarkDead(err *kerr.Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.members {
		g.failWaiters(m, err.Code)
	}
	g.members = nil
	clear(g.byID)
	clear(g.static)
	clear(g.pending)
	clear(g.pendingSync)
	g.leader, g.protocol = "", ""
	g.setState(Dead, g.now)
}

// NextDeadline returns the earliest time at which Tick has something to do.
func (g *Group) NextDeadline() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, k, _ := g.nextEvent()
	return t, k != evNone
}

// Tick fires every timer due at or before now: pending member and session
// expiry, the end of a join phase, and the sync deadline.
func (g *Group) Tick(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
}

type event int8

const (
	evNone event = iota
	evPending
	evSession
	evJoin
	evSync
)

func (g *Group) nextEvent() (time.Time, event, string) {
	var (
		at   time.Time
		kind = evNone
		who  string
	)
	consider := func(t time.Time, k event, id string) {
		if kind == evNone || t.Before(at) {
			at, kind, who = t, k, id
		}
	}
	for id, t := range g.pending {
		consider(t, evPending, id)
	}
	for _, m := range g.members {
		if m.join == nil && m.sync == nil {
			consider(m.sessionDeadline, evSession, m.id)
		}
	}
	if g.state == PreparingRebalance {
		consider(g.joinDeadline, evJoin, "")
	}
	if (g.state == CompletingRebalance || g.state == Stable) && len(g.pendingSync) > 0 ||
		g.state == CompletingRebalance && g.server {
		consider(g.syncDeadline, evSync, "")
	}
	return at, kind, who
}

// advance fires all timers due by now, each at its own deadline, in order.
func (g *Group) advance(now time.Time) {
	if now.After(g.now) {
		g.now = now
	}
	for {
		at, kind, who := g.nextEvent()
		if kind == evNone || at.After(g.now) {
			return
		}
		switch kind {
		case evPending:
			delete(g.pending, who)
			if g.state == PreparingRebalance {
				g.maybeCompleteJoin(at)
			}
		case evSession:
			g.removeMember(g.byID[who], at)
		case evJoin:
			g.joinTimerFired(at)
		case evSync:
			for id := range g.pendingSync {
				if m := g.byID[id]; m != nil {
					g.dropMember(m, kerr.UnknownMemberID.Code)
				}
			}
			clear(g.pendingSync)
			// Also the backstop of a server-assigned generation whose
			// assignment did not come in time (the coordinator always
			// answers, falling back to a built-in assignor): waiting syncs
			// get REBALANCE_IN_PROGRESS and members rejoin.
			g.prepareRebalance(at)
		}
	}
}

func (g *Group) joinTimerFired(at time.Time) {
	if g.initialDelay {
		if g.initialNewMembers && g.initialRemaining > 0 {
			d := min(g.cfg.InitialRebalanceDelay, g.initialRemaining)
			g.initialRemaining -= d
			g.initialNewMembers = false
			g.joinDeadline = at.Add(d)
			return
		}
		g.initialDelay = false
	}
	g.completeJoin(at)
}

// failWaiters completes a member's outstanding join or sync with code.
func (g *Group) failWaiters(m *member, code int16) {
	if m.join != nil {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = m.joinVersion
		r.ErrorCode = code
		r.Generation = -1
		r.MemberID = m.id
		m.join <- r
		m.join = nil
	}
	if m.sync != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version = m.syncVersion
		r.ErrorCode = code
		m.sync <- r
		m.sync = nil
	}
}

// dropMember forgets m without changing the state.
func (g *Group) dropMember(m *member, code int16) {
	g.failWaiters(m, code)
	delete(g.byID, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i], g.members[i+1:]...)
			break
		}
	}
	if g.leader == m.id {
		g.leader = ""
		if len(g.members) > 0 {
			g.leader = g.members[0].id
		}
	}
}

// removeMember drops m (leave or expiry) and moves the group on.
func (g *Group) removeMember(m *member, at time.Time) {
	g.dropMember(m, kerr.UnknownMemberID.Code)
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance(at)
	case PreparingRebalance:
		g.maybeCompleteJoin(at)
	}
}

func maxRebalanceTimeout(ms []*member) time.Duration {
	var d time.Duration
	for _, m := range ms {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// prepareRebalance enters PreparingRebalance (or restarts nothing if already there).
func (g *Group) prepareRebalance(at time.Time) {
	if g.state == PreparingRebalance || g.state == Dead {
		return
	}
	if g.state == CompletingRebalance {
		// Members waiting for the leader's assignment must rejoin.
		for _, m := range g.members {
			if m.sync != nil {
				r := kmsg.NewPtrSyncGroupResponse()
				r.Version = m.syncVersion
				r.ErrorCode = kerr.RebalanceInProgress.Code
				m.sync <- r
				m.sync = nil
				m.sessionDeadline = at.Add(m.sessionTimeout)
			}
		}
	}
	for _, m := range g.members {
		if m.assignment != nil {
			m.prevAssignment = m.assignment
		}
		m.assignment = nil
		m.selected = ""
	}
	clear(g.pendingSync)
	g.server, g.followUp = false, false
	timeout := maxRebalanceTimeout(g.members)
	if g.state == Empty && g.cfg.InitialRebalanceDelay > 0 {
		g.initialDelay = true
		g.initialNewMembers = false
		d := min(g.cfg.InitialRebalanceDelay, timeout)
		g.initialRemaining = max(timeout-g.cfg.InitialRebalanceDelay, 0)
		g.joinDeadline = at.Add(d)
	} else {
		g.initialDelay = false
		g.joinDeadline = at.Add(timeout)
	}
	g.setState(PreparingRebalance, at)
	g.maybeCompleteJoin(at)
}

// maybeCompleteJoin ends the join phase early when every member has rejoined
// and no KIP-394 member is still expected.
func (g *Group) maybeCompleteJoin(at time.Time) {
	if g.state != PreparingRebalance || g.initialDelay || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	g.completeJoin(at)
}

// completeJoin ends the join phase: drops dynamic members that did not
// rejoin, starts the next generation and answers every waiting join.
func (g *Group) completeJoin(at time.Time) {
	for _, m := range append([]*member(nil), g.members...) {
		if m.join == nil && m.instanceID == nil {
			g.dropMember(m, kerr.UnknownMemberID.Code)
		}
	}
	g.initialDelay = false
	var joined []*member
	for _, m := range g.members {
		if m.join != nil {
			joined = append(joined, m)
		}
	}
	if len(joined) == 0 && len(g.members) > 0 {
		// Only static members that did not rejoin are left: nobody can
		// lead. Wait another rebalance timeout; their sessions expire
		// meanwhile unless they come back (Kafka does the same).
		g.joinDeadline = at.Add(maxRebalanceTimeout(g.members))
		return
	}
	g.generation++
	if len(joined) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(Empty, at)
		return
	}
	if l := g.byID[g.leader]; l == nil || l.join == nil {
		g.leader = joined[0].id
	}
	g.protocol = selectProtocol(g.members)
	// Members admitted without a protocol in common (the coordinator wanted to
	// assign when they joined) are assigned by the coordinator whatever Wants says
	// now: no leader could.
	g.server = g.cfg.Server != nil && (g.protocol == "" || g.cfg.Server.Wants(g.id, g.protocolType))
	if g.server {
		g.protocol = "" // set by Assign: the assignor's name
		for _, m := range g.members {
			m.selected = m.protocols[0].name
		}
	}
	g.setState(CompletingRebalance, at)
	g.syncDeadline = at.Add(maxRebalanceTimeout(g.members))
	for _, m := range joined {
		g.pendingSync[m.id] = struct{}{}
	}
	for _, m := range joined {
		m.join <- g.joinResponse(m, m.joinVersion, false)
		m.join = nil
		m.sessionDeadline = at.Add(m.sessionTimeout)
	}
	if g.server {
		g.cfg.Server.Start(g, g.generation)
	}
}

// joinResponse describes the current generation to m; the leader gets the
// member list unless skip (a static leader rejoining, v9+ only).
func (g *Group) joinResponse(m *member, version int16, skip bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	pt, p := g.protocolType, g.protocolFor(m)
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberID = m.id
	if g.server {
		return r // every member a follower: empty leader id and member list
	}
	r.LeaderID = g.leader
	if m.id == g.leader && (!skip || version >= 9) {
		r.SkipAssignment = skip
		for _, x := range g.members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = x.id
			if version >= 5 {
				rm.InstanceID = x.instanceID
			}
			rm.ProtocolMetadata = x.metadataFor(g.protocol)
			r.Members = append(r.Members, rm)
		}
	}
	return r
}

// selectProtocol picks, among protocols every member supports, the one most
// members list first (each member votes for its most preferred candidate).
// Ties go to the candidate the earliest member prefers most.
func selectProtocol(ms []*member) string {
	if len(ms) == 0 {
		return ""
	}
	count := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			count[p.name]++
		}
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if count[p.name] == len(ms) {
				votes[p.name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, p := range ms[0].protocols {
		if count[p.name] == len(ms) && votes[p.name] > bestVotes {
			best, bestVotes = p.name, votes[p.name]
		}
	}
	return best
}

// supports reports whether protocols share a name with every member but except.
func (g *Group) supports(protocols []protocol, except *member) bool {
	n := 0
	count := map[string]int{}
	for _, m := range g.members {
		if m == except {
			continue
		}
		n++
		for _, p := range m.protocols {
			count[p.name]++
		}
	}
	for _, p := range protocols {
		if count[p.name] == n {
			return true
		}
	}
	return false
}

func sameProtocols(a, b []protocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || !bytes.Equal(a[i].metadata, b[i].metadata) {
			return false
		}
	}
	return true
}
