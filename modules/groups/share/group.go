package share

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/modules/groups/consumer"
)

// State is the state of a share group, as ListGroups and ShareGroupDescribe
// show it.
type State int8

// The states of a share group; see doc.go.
const (
	Empty State = iota
	Stable
	Dead
)

// String returns the state name Kafka uses.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// AssignorName is the name of the share assignor (Assign), as
// ShareGroupDescribe reports it.
const AssignorName = "simple"

// TopicView is what a group needs of the cluster's topic metadata: the
// consumer group's interface (TopicNames is not used here). It is called with
// the group's lock held and must not call back into the group.
type TopicView = consumer.TopicView

// Config times and bounds a group. The zero value of a field means its default.
type Config struct {
	// SessionTimeout is group.share.session.timeout.ms. Default 45s.
	SessionTimeout time.Duration
	// HeartbeatInterval is group.share.heartbeat.interval.ms. Default 5s.
	HeartbeatInterval time.Duration
	// MaxSize is group.share.max.size, in members. Default 200.
	MaxSize int
	// MaxTopics bounds the SubscribedTopicNames of one heartbeat. Default 10000.
	MaxTopics int
}

func (c Config) withDefaults() Config {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.MaxSize <= 0 {
		c.MaxSize = 200
	}
	if c.MaxTopics <= 0 {
		c.MaxTopics = 10000
	}
	return c
}

// Client identifies the connection a request came from.
type Client struct {
	ID   string // the request header's client id
	Host string // the peer address, as ShareGroupDescribe shows it
}

// tps is a set of partitions: topic id → partitions, ascending and unique,
// no empty lists.
type tps = map[assignor.TopicID][]int32

type tp struct {
	topic     assignor.TopicID
	partition int32
}

type member struct {
	id, rack, clientID, host string
	epoch                    int32
	names                    []string // subscription, sorted and unique
	assigned                 tps      // what the last Assignment sent to it lists
	sessionDeadline          time.Time
}

// topicMeta is what the group saw of one subscribed topic.
type topicMeta struct {
	id         assignor.TopicID
	partitions int32
}

// Group is one share group's membership state machine. Its methods are safe
// for concurrent use.
type Group struct {
	mu      sync.Mutex
	id      string
	cfg     Config
	now     time.Time // latest time seen; the clock never goes back
	dead    bool
	deadErr *kerr.Error

	groupEpoch  int32
	targetEpoch int32
	target      map[string]tps // member id → its target partitions

	members  map[string]*member
	nameRefs map[string]int       // subscribed topic name → members subscribing
	meta     map[string]topicMeta // subscribed topics as the target last saw them
	holders  map[tp]int           // partition → members whose assignment has it
}

// New returns an Empty group with group epoch 0.
func New(id string, cfg Config, now time.Time) *Group {
	return &Group{
		id:       id,
		cfg:      cfg.withDefaults(),
		now:      now,
		target:   map[string]tps{},
		members:  map[string]*member{},
		nameRefs: map[string]int{},
		meta:     map[string]topicMeta{},
		holders:  map[tp]int{},
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
	}
	return Stable
}

// IsEmpty reports whether the group has no members (and is not Dead).
func (g *Group) IsEmpty() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.dead && len(g.members) == 0
}

// Size returns the number of members.
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

// MarkDead marks the group Dead (deleted or unloaded) and forgets its
// members. Later heartbeats get err (NOT_COORDINATOR when the coordinator
// moved); nil means COORDINATOR_NOT_AVAILABLE.
func (g *Group) MarkDead(err *kerr.Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		err = kerr.CoordinatorNotAvailable
	}
	g.dead, g.deadErr = true, err
	clear(g.members)
	clear(g.nameRefs)
	clear(g.meta)
	clear(g.holders)
	clear(g.target)
}

// NextDeadline returns the earliest session deadline, when Tick has
// something to do; false without members.
func (g *Group) NextDeadline() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, m := g.nextExpiry()
	return at, m != nil
}

// Tick removes the members whose session expired at or before now, each
// bumping the group epoch.
func (g *Group) Tick(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
}

func (g *Group) nextExpiry() (time.Time, *member) {
	var (
		at  time.Time
		who *member
	)
	for _, m := range g.members {
		if who == nil || m.sessionDeadline.Before(at) || (m.sessionDeadline.Equal(at) && m.id < who.id) {
			at, who = m.sessionDeadline, m
		}
	}
	return at, who
}

// advance moves the clock to now and expires the sessions due by then.
func (g *Group) advance(now time.Time) {
	if now.After(g.now) {
		g.now = now
	}
	for {
		at, m := g.nextExpiry()
		if m == nil || at.After(g.now) {
			return
		}
		g.removeMember(m)
	}
}

// removeMember forgets m and bumps the group epoch. The target assignment
// is recomputed by the next heartbeat.
func (g *Group) removeMember(m *member) {
	g.setAssigned(m, nil)
	g.setNames(m, nil)
	delete(g.members, m.id)
	delete(g.target, m.id)
	g.groupEpoch++
}

// setAssigned replaces m's assignment, keeping holders in step.
func (g *Group) setAssigned(m *member, a tps) {
	for t, ps := range m.assigned {
		for _, p := range ps {
			k := tp{t, p}
			if g.holders[k]--; g.holders[k] <= 0 {
				delete(g.holders, k)
			}
		}
	}
	m.assigned = cloneTPs(a)
	for t, ps := range m.assigned {
		for _, p := range ps {
			g.holders[tp{t, p}]++
		}
	}
}

// setNames replaces m's subscription, keeping nameRefs in step.
func (g *Group) setNames(m *member, names []string) {
	for _, n := range m.names {
		if g.nameRefs[n]--; g.nameRefs[n] <= 0 {
			delete(g.nameRefs, n)
		}
	}
	m.names = names
	for _, n := range names {
		g.nameRefs[n]++
	}
}

// MemberInfo is a snapshot of one member.
type MemberInfo struct {
	ID, ClientID, ClientHost, Rack string // Rack "" when the client sent none
	MemberEpoch                    int32
	SubscribedTopicNames           []string // sorted
	// Assignment is what the member was last sent (its target as of its
	// last heartbeat).
	Assignment map[assignor.TopicID][]int32
}

// Members returns a snapshot of the members, sorted by id.
func (g *Group) Members() []MemberInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]MemberInfo, 0, len(g.members))
	for _, m := range g.sortedMembers() {
		out = append(out, MemberInfo{
			ID: m.id, ClientID: m.clientID, ClientHost: m.host, Rack: m.rack,
			MemberEpoch:          m.epoch,
			SubscribedTopicNames: slices.Clone(m.names),
			Assignment:           cloneTPs(m.assigned),
		})
	}
	return out
}

// IsMember reports whether memberID is a member of the (live) group, for the
// share fetch path to check a request's member id.
func (g *Group) IsMember(memberID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.dead && g.members[memberID] != nil
}

// AssignedTo returns a copy of the partitions memberID was last sent; nil
// for an unknown member.
func (g *Group) AssignedTo(memberID string) map[assignor.TopicID][]int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[memberID]
	if m == nil {
		return nil
	}
	return cloneTPs(m.assigned)
}

// Subscribers returns how many members have partition of topic id in their
// assignment (what they were last sent); 0 when none or unknown.
func (g *Group) Subscribers(id assignor.TopicID, partition int32) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holders[tp{id, partition}]
}

func (g *Group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.id, b.id) })
	return ms
}

// Describe returns the group as ShareGroupDescribe shows it, topic names
// filled in from topics; partitions of topics topics does not know are left
// out. The caller sets ErrorCode, ErrorMessage and AuthorizedOperations.
func (g *Group) Describe(topics TopicView, now time.Time) kmsg.ShareGroupDescribeResponseGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(now)
	if topics == nil {
		topics = noTopics{}
	}
	r := kmsg.NewShareGroupDescribeResponseGroup()
	r.GroupID = g.id
	r.GroupState = g.state().String()
	r.GroupEpoch = g.groupEpoch
	r.AssignmentEpoch = g.targetEpoch
	r.Assignor = AssignorName
	r.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
	for _, m := range g.sortedMembers() {
		rm := kmsg.NewShareGroupDescribeResponseGroupMember()
		rm.MemberID = m.id
		if m.rack != "" {
			s := m.rack
			rm.RackID = &s
		}
		rm.MemberEpoch = m.epoch
		rm.ClientID = m.clientID
		rm.ClientHost = m.host
		rm.SubscribedTopicNames = slices.Clone(m.names)
		if rm.SubscribedTopicNames == nil {
			rm.SubscribedTopicNames = []string{}
		}
		rm.Assignment = describeAssignment(m.assigned, topics)
		r.Members = append(r.Members, rm)
	}
	return r
}

func describeAssignment(a tps, topics TopicView) kmsg.ShareGroupDescribeResponseGroupMemberAssignment {
	out := kmsg.NewShareGroupDescribeResponseGroupMemberAssignment()
	out.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
	for _, id := range sortedTopics(a) {
		name, _, ok := topics.TopicByID(id)
		if !ok {
			continue
		}
		t := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
		t.TopicID = id
		t.Topic = name
		t.Partitions = slices.Clone(a[id])
		out.TopicPartitions = append(out.TopicPartitions, t)
	}
	return out
}

func sortedTopics(a tps) []assignor.TopicID {
	ids := make([]assignor.TopicID, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, assignor.TopicID.Compare)
	return ids
}

// normalize turns a partition list into a set: negative ids dropped,
// sorted, unique.
func normalize(ps []int32) []int32 {
	out := make([]int32, 0, len(ps))
	for _, p := range ps {
		if p >= 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func equalTPs(a, b tps) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// cloneTPs copies a, dropping empty lists; never nil.
func cloneTPs(a tps) tps {
	out := make(tps, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			out[t] = slices.Clone(ps)
		}
	}
	return out
}

// noTopics is the TopicView used when the caller passes nil.
type noTopics struct{}

func (noTopics) TopicByName(string) (assignor.TopicID, int32, bool) {
	return assignor.TopicID{}, 0, false
}
func (noTopics) TopicByID(assignor.TopicID) (string, int32, bool) { return "", 0, false }
func (noTopics) TopicNames() []string                             { return nil }
