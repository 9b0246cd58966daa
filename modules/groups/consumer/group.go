package consumer

import (
	"crypto/rand"
	"encoding/base64"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// State is the state of a consumer group, as ListGroups and
// ConsumerGroupDescribe show it.
type State int8

// The states of a consumer group; see the diagram in doc.go.
const (
	Empty State = iota
	Assigning
	Reconciling
	Stable
	Dead
)

// String returns the state name Kafka uses.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Assigning:
		return "Assigning"
	case Reconciling:
		return "Reconciling"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// MemberState is where a member is in its reconciliation towards the
// target assignment (Kafka's MemberState).
type MemberState int8

// The member states; see doc.go.
const (
	// MemberStable: the member has every partition of its target it can
	// have, at the target epoch.
	MemberStable MemberState = iota
	// MemberUnrevokedPartitions: the member must revoke partitions
	// (PendingRevocation) before it may move to a newer epoch.
	MemberUnrevokedPartitions
	// MemberUnreleasedPartitions: the member is at the target epoch but
	// waits for partitions another member has not released yet.
	MemberUnreleasedPartitions
)

// String returns Kafka's name of the member state.
func (s MemberState) String() string {
	switch s {
	case MemberStable:
		return "STABLE"
	case MemberUnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case MemberUnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// TopicView is what a group needs of the cluster's topic metadata. It is
// called with the group's lock held and must not call back into the group.
type TopicView interface {
	// TopicByName returns a topic's id and partition count.
	TopicByName(name string) (id assignor.TopicID, partitions int32, ok bool)
	// TopicByID returns a topic's name and partition count.
	TopicByID(id assignor.TopicID) (name string, partitions int32, ok bool)
	// TopicNames returns all topic names (for regex subscriptions), any order.
	TopicNames() []string
}

// TopicStats is an optional interface of a TopicView: per-partition end
// offsets and the group's lag, for assignors that use them (StatsUser). It is
// asked only when the chosen assignor is a StatsUser, so built-in assignment
// stays cheap. ok false (or slices of the wrong length) leaves both unknown.
type TopicStats interface {
	// PartitionStats returns, for partitions 0..partitions-1 of topic id,
	// the end offset (high watermark) and group's lag (end offset minus its
	// committed offset, or minus the log start when nothing is committed);
	// -1 for a partition whose figures are unknown here.
	PartitionStats(group string, id assignor.TopicID, partitions int32) (endOffsets, lag []int64, ok bool)
}

// TopicRacks is an optional interface of a TopicView: per partition, the
// racks of its replicas, for assignors that use them (RackUser), such as the
// built-in uniform assignor (range is not one). It is asked only when the
// chosen assignor is a RackUser. ok false (or a slice of the wrong length)
// leaves Topic.PartitionRacks unknown (nil).
type TopicRacks interface {
	// PartitionRacks returns, for partitions 0..partitions-1 of topic id, the
	// racks of the partition's replicas (brokers without a rack skipped, nil
	// for a partition none of whose replicas has one); ok false when the
	// topic is unknown or no replica of any of its partitions has a rack.
	PartitionRacks(id assignor.TopicID, partitions int32) (racks [][]string, ok bool)
}

// GroupAssignors is an optional interface of a TopicView: the assignor a
// group is configured to use (the group config sluice.consumer.assignor),
// which wins over the members' ServerAssignor. "" means none; a name that is
// not one of Config.Assignors is ignored.
type GroupAssignors interface {
	GroupAssignor(group string) string
}

// StatsUser is an optional interface of an assignor.Assignor: it reports
// whether the assignor reads Topic.PartitionEndOffsets and PartitionLag, so
// that the group fills them (through TopicStats) only for such assignors.
type StatsUser interface {
	UsesPartitionStats() bool
}

// RackUser is an optional interface of an assignor.Assignor: it reports
// whether the assignor reads Topic.PartitionRacks, so that the group fills
// them (through TopicRacks) only for such assignors.
type RackUser interface {
	UsesPartitionRacks() bool
}

// Config times and bounds a group. The zero value of a field means its default.
type Config struct {
	// SessionTimeout is group.consumer.session.timeout.ms. Default 45s.
	SessionTimeout time.Duration
	// HeartbeatInterval is group.consumer.heartbeat.interval.ms. Default 5s.
	HeartbeatInterval time.Duration
	// MaxSize is group.consumer.max.size, in members. Default 1000.
	MaxSize int
	// Assignors are the server-side assignors members may ask for; the
	// first is the default. Default {Uniform, Range}. Nil entries are dropped.
	Assignors []assignor.Assignor
	// MaxRegexBytes bounds one SubscribedTopicRegex. Default 1024.
	MaxRegexBytes int
	// MaxTopics bounds the SubscribedTopicNames and owned topic lists of
	// one heartbeat. Default 10000.
	MaxTopics int
	// RegexRefreshInterval is how often regex subscriptions are resolved
	// again against TopicView.TopicNames (a new regex is resolved at once).
	// Default 10s; negative means on every heartbeat.
	RegexRefreshInterval time.Duration
	// OnAssignorChosen, if set, is called when the assignor that computes the
	// group's target, or the reason it was chosen (WhyGroupConfig, WhyRequested,
	// WhyDefault), differs from the previous computation's. It runs under the
	// group's lock: it must not block or call the Group.
	OnAssignorChosen func(group, assignor, why string)
	// NewMemberID generates a member id for a v0 join without one (and for
	// classic members). Default a random UUID in Kafka's text form (22
	// characters of url-safe base64).
	NewMemberID func() string

	// Classic members (classic.go): ClassicMinSessionTimeout and
	// ClassicMaxSessionTimeout bound the session timeout a JoinGroup asks for
	// (group.min.session.timeout.ms, group.max.session.timeout.ms; default 6 s
	// and 30 min); ClassicMaxProtocols and ClassicMaxMetadataBytes bound its
	// protocols (default 64 and 256 KiB), as for classic groups.
	ClassicMinSessionTimeout, ClassicMaxSessionTimeout time.Duration
	ClassicMaxProtocols, ClassicMaxMetadataBytes       int
}

func (c Config) withDefaults() Config {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.MaxSize <= 0 {
		c.MaxSize = 1000
	}
	as := make([]assignor.Assignor, 0, len(c.Assignors))
	for _, a := range c.Assignors {
		if a != nil {
			as = append(as, a)
		}
	}
	if len(as) == 0 {
		as = []assignor.Assignor{assignor.Uniform{}, assignor.Range{}}
	}
	c.Assignors = as
	if c.MaxRegexBytes <= 0 {
		c.MaxRegexBytes = 1024
	}
	if c.MaxTopics <= 0 {
		c.MaxTopics = 10000
	}
	if c.RegexRefreshInterval == 0 {
		c.RegexRefreshInterval = 10 * time.Second
	}
	if c.NewMemberID == nil {
		c.NewMemberID = randomMemberID
	}
	return c.classicDefaults()
}

func randomMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Client identifies the connection a request came from.
type Client struct {
	ID   string // the request header's client id
	Host string // the peer address, as ConsumerGroupDescribe shows it
}

// tps is a set of partitions: topic id → partitions, ascending and unique,
// no empty lists.
type tps = map[assignor.TopicID][]int32

type tp struct {
	topic     assignor.TopicID
	partition int32
}

type member struct {
	id, instanceID, rack string // instanceID "" for a dynamic member
	clientID, host       string
	epoch, prevEpoch     int32
	state                MemberState
	rebalanceTimeout     time.Duration
	names                []string // explicit subscription, sorted and unique
	regex                string   // "" for none
	serverAssignor       string   // "" for no preference

	assigned, pending tps // pending: awaiting revocation

	sessionDeadline time.Time
	// revokeDeadline: zero unless a consumer-protocol member is in
	// MemberUnrevokedPartitions or a classic member was told to rejoin.
	revokeDeadline time.Time

	classic *classicInfo // nil for a consumer-protocol member
}

// Group is one consumer group's state machine. Its methods are safe for
// concurrent use.
type Group struct {
	mu      sync.Mutex
	id      string
	cfg     Config
	now     time.Time // latest time seen; the clock never goes back
	dead    bool
	deadErr *kerr.Error

	groupEpoch  int32
	targetEpoch int32
	target      assignor.Assignment // member id → its target partitions
	targetBy    string              // assignor that computed target
	chosenBy    string              // assignor chosen at the last computation (even if it failed)
	chosenWhy   string              // why it was chosen (WhyGroupConfig, ...)
	targetWhy   string              // why targetBy was chosen
	assignErr   error

	members  map[string]*member
	static   map[string]string // instance id → member id
	owner    map[tp]string     // partition → member holding it (assigned or pending revocation)
	nameRefs map[string]int    // explicit subscriptions: topic name → members
	regexes  map[string]*regexEntry
	regexAt  time.Time // when regexes were last resolved
	meta     map[string]topicMeta

	// For TakeChanges (persist.go): members whose records may have changed since
	// the last take, and whether the target assignment was recomputed.
	touched     map[string]struct{}
	targetDirty bool
}

// New returns an Empty group with group epoch 0.
func New(id string, cfg Config, now time.Time) *Group {
	return &Group{
		id:       id,
		cfg:      cfg.withDefaults(),
		now:      now,
		target:   assignor.Assignment{},
		members:  map[string]*member{},
		static:   map[string]string{},
		owner:    map[tp]string{},
		nameRefs: map[string]int{},
		regexes:  map[string]*regexEntry{},
		meta:     map[string]topicMeta{},
	}
}

// ID returns the group id.
func (g *Group) ID() string { return g.id }

// State returns the current state.
func (g *Group) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state()
}

func (g *Group) state() State {
	switch {
	case g.dead:
		return Dead
	case len(g.members) == 0:
		return Empty
	case g.groupEpoch > g.targetEpoch:
		return Assigning
	}
	for _, m := range g.members {
		if m.classic != nil {
			// A classic member's generation moves only when it rejoins, which it
			// needs to only when its partitions must change.
			if g.classicMustRejoin(m) {
				return Reconciling
			}
		} else if m.epoch != g.targetEpoch {
			return Reconciling
		}
	}
	return Stable
}

// IsEmpty reports whether the group has no members (and is not Dead), so
// its committed offsets may expire.
func (g *Group) IsEmpty() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.dead && len(g.members) == 0
}

// Size returns the number of members, static members that left with epoch
// -2 included.
func (g *Group) Size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.members)
}

// GroupEpoch returns the group epoch.
func (g *Group) GroupEpoch() int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.groupEpoch
}

// LastAssignorError returns why the latest attempt to compute a target
// assignment failed (the assignor's error, a panic it raised, or its answer
// failing assignor.Check), or nil if that attempt succeeded. While it is
// non-nil the previous target stays in force and the group stays Assigning;
// every heartbeat tries again.
func (g *Group) LastAssignorError() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.assignErr
}

// AssignorChoice returns the assignor that computed the current target and why it
// was chosen; both "" before the first computation.
func (g *Group) AssignorChoice() (name, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.targetBy, g.targetWhy
}

// MarkDead marks the group Dead (deleted or unloaded) and forgets its
// members. Later heartbeats and validations get err (NOT_COORDINATOR when
// the coordinator moved); nil means COORDINATOR_NOT_AVAILABLE.
func (g *Group) MarkDead(err *kerr.Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		err = kerr.CoordinatorNotAvailable
	}
	g.dead, g.deadErr = true, err
	clear(g.members)
	clear(g.static)
	clear(g.owner)
	clear(g.nameRefs)
	clear(g.regexes)
	clear(g.target)
}

// NextDeadline returns the earliest time at which Tick has something to do:
// a session timeout or a rebalance (revocation) timeout.
func (g *Group) NextDeadline() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, m := g.nextEvent()
	return at, m != nil
}

// Tick fires every timer due at or before now: members whose session
// expired and members that did not revoke within their rebalance timeout
// are removed, each bumping the group epoch.
func (g *Group) Tick(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
}

func (g *Group) nextEvent() (time.Time, *member) {
	var (
		at  time.Time
		who *member
	)
	for _, m := range g.members {
		d := m.sessionDeadline
		if !m.revokeDeadline.IsZero() && m.revokeDeadline.Before(d) {
			d = m.revokeDeadline
		}
		if who == nil || d.Before(at) || (d.Equal(at) && m.id < who.id) {
			at, who = d, m
		}
	}
	return at, who
}

// advance moves the clock to now and fires the timers due by then.
func (g *Group) advance(now time.Time) {
	if now.After(g.now) {
		g.now = now
	}
	for {
		at, m := g.nextEvent()
		if m == nil || at.After(g.now) {
			return
		}
		g.removeMember(m)
	}
}

// removeMember fences m: forgets it, frees its partitions and bumps the
// group epoch. The target assignment is recomputed by the next heartbeat.
func (g *Group) removeMember(m *member) {
	g.touch(m.id)
	g.setOwnership(m, nil, nil)
	g.setNames(m, nil)
	g.setRegex(m, "")
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	delete(g.target, m.id)
	g.groupEpoch++
}

// MemberInfo is a snapshot of one member.
type MemberInfo struct {
	ID, InstanceID, Rack string // InstanceID "" for a dynamic member
	ClientID, ClientHost string
	MemberEpoch          int32 // -2: a static member that left temporarily
	PreviousEpoch        int32
	State                MemberState
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	// Assigned is what the member may use now (what it was last sent);
	// PendingRevocation what it must give up; Target its target assignment.
	Assigned, PendingRevocation, Target map[assignor.TopicID][]int32
	// ClassicProtocols: a classic-protocol member's protocols (preference
	// order); nil for a consumer-protocol member.
	ClassicProtocols []ClassicProtocol
}

// Members returns a snapshot of the members, sorted by id.
func (g *Group) Members() []MemberInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]MemberInfo, 0, len(g.members))
	for _, m := range g.sortedMembers() {
		out = append(out, MemberInfo{
			ID: m.id, InstanceID: m.instanceID, Rack: m.rack,
			ClientID: m.clientID, ClientHost: m.host,
			MemberEpoch: m.epoch, PreviousEpoch: m.prevEpoch, State: m.state,
			SubscribedTopicNames: slices.Clone(m.names),
			SubscribedTopicRegex: m.regex,
			Assigned:             cloneTPs(m.assigned),
			PendingRevocation:    cloneTPs(m.pending),
			Target:               cloneTPs(g.target[m.id]),
		})
		if m.classic != nil {
			out[len(out)-1].ClassicProtocols = cloneProtocols(m.classic.protocols)
		}
	}
	return out
}

func (g *Group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return ms
}

// Describe returns the group as ConsumerGroupDescribe shows it,
// topic names filled in from topics; partitions of topics topics does not
// know are left out. The caller sets ErrorCode and AuthorizedOperations.
func (g *Group) Describe(topics TopicView, now time.Time) kmsg.ConsumerGroupDescribeResponseGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	if topics == nil {
		topics = noTopics{}
	}
	r := kmsg.NewConsumerGroupDescribeResponseGroup()
	r.Group = g.id
	r.State = g.state().String()
	r.Epoch = g.groupEpoch
	r.AssignmentEpoch = g.targetEpoch
	if !g.dead {
		a, _ := g.chooseAssignor(topics)
		r.AssignorName = a.Name()
	}
	for _, m := range g.sortedMembers() {
		rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		rm.MemberID = m.id
		if m.instanceID != "" {
			s := m.instanceID
			rm.InstanceID = &s
		}
		if m.rack != "" {
			s := m.rack
			rm.RackID = &s
		}
		rm.MemberEpoch = m.epoch
		rm.ClientID = m.clientID
		rm.ClientHost = m.host
		rm.SubscribedTopics = slices.Clone(m.names)
		if rm.SubscribedTopics == nil {
			rm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			s := m.regex
			rm.SubscribedTopicRegex = &s
		}
		rm.Assignment = describeAssignment(m.assigned, topics)
		rm.TargetAssignment = describeAssignment(g.target[m.id], topics)
		rm.MemberType = 1 // consumer protocol (v1+)
		if m.classic != nil {
			rm.MemberType = 0
		}
		r.Members = append(r.Members, rm)
	}
	return r
}

func describeAssignment(a tps, topics TopicView) kmsg.Assignment {
	out := kmsg.NewAssignment()
	ids := make([]assignor.TopicID, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, assignor.TopicID.Compare)
	for _, id := range ids {
		name, _, ok := topics.TopicByID(id)
		if !ok {
			continue
		}
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID = id
		t.Topic = name
		t.Partitions = slices.Clone(a[id])
		out.TopicPartitions = append(out.TopicPartitions, t)
	}
	if out.TopicPartitions == nil {
		out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	}
	return out
}

// ValidateCommit checks an OffsetCommit (v9+: its generation is the member
// epoch) against the group, as Kafka's ConsumerGroup.validateOffsetCommit:
//   - a negative epoch on an Empty group is a simple (admin or manually
//     assigned) commit and is allowed, whatever the member id;
//   - otherwise the member must exist (else UNKNOWN_MEMBER_ID; so a simple
//     commit to a group with members is UNKNOWN_MEMBER_ID) and the epoch
//     must equal its current member epoch (else STALE_MEMBER_EPOCH).
//
// The caller checks the rest: that members of this group commit with
// OffsetCommit v9+ outside transactions (UNSUPPORTED_VERSION).
func (g *Group) ValidateCommit(memberID string, memberEpoch int32) *kerr.Error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return g.deadErr
	}
	if memberEpoch < 0 && len(g.members) == 0 {
		return nil
	}
	return g.validateMemberEpoch(memberID, memberEpoch)
}

// ValidateFetch checks an OffsetFetch (v9+) carrying a member id and epoch,
// as Kafka's ConsumerGroup.validateOffsetFetch: an empty member id with a
// negative epoch (the defaults: admin clients, old consumers) is not
// checked; otherwise the member must exist (UNKNOWN_MEMBER_ID) and the epoch
// must equal its member epoch (STALE_MEMBER_EPOCH).
func (g *Group) ValidateFetch(memberID string, memberEpoch int32) *kerr.Error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return g.deadErr
	}
	if memberID == "" && memberEpoch < 0 {
		return nil
	}
	return g.validateMemberEpoch(memberID, memberEpoch)
}

func (g *Group) validateMemberEpoch(memberID string, memberEpoch int32) *kerr.Error {
	m := g.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID
	}
	if memberEpoch != m.epoch {
		if m.classic != nil {
			return kerr.IllegalGeneration // what a classic client knows to rejoin on
		}
		return kerr.StaleMemberEpoch
	}
	return nil
}

// noTopics is the TopicView used when the caller passes nil.
type noTopics struct{}

func (noTopics) TopicByName(string) (assignor.TopicID, int32, bool) {
	return assignor.TopicID{}, 0, false
}
func (noTopics) TopicByID(assignor.TopicID) (string, int32, bool) { return "", 0, false }
func (noTopics) TopicNames() []string                             { return nil }
