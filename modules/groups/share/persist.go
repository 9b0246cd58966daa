package share

import (
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// MemberRecord is one member as the coordinator persists it: its
// subscription and client (Kafka's share group member metadata record) and
// its epoch and assignment (the current member assignment record).
type MemberRecord struct {
	ID, Rack, ClientID, ClientHost string
	SubscribedTopicNames           []string
	Epoch                          int32
	Assigned                       map[assignor.TopicID][]int32
}

// Persisted is a group's whole persisted state.
type Persisted struct {
	GroupEpoch  int32
	TargetEpoch int32
	// Targets is the target assignment: member id → its partitions.
	Targets map[string]map[assignor.TopicID][]int32
	// Members are sorted by id.
	Members []MemberRecord
}

// Snapshot returns the group's whole persisted state.
func (g *Group) Snapshot() Persisted {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := Persisted{
		GroupEpoch: g.groupEpoch, TargetEpoch: g.targetEpoch,
		Targets: make(map[string]map[assignor.TopicID][]int32, len(g.target)),
	}
	for id, t := range g.target {
		p.Targets[id] = cloneTPs(t)
	}
	for _, m := range g.sortedMembers() {
		p.Members = append(p.Members, MemberRecord{
			ID: m.id, Rack: m.rack, ClientID: m.clientID, ClientHost: m.host,
			SubscribedTopicNames: slices.Clone(m.names),
			Epoch:                m.epoch,
			Assigned:             cloneTPs(m.assigned),
		})
	}
	return p
}

// Restore builds a group from its persisted state, at now: every member's
// session starts at now, members keep their epochs and assignments (their
// heartbeats carry on), and members that do not come back expire as usual.
// Inconsistent input is repaired, not refused: records with an empty id are
// dropped (of records with the same id, the first is kept), partition lists
// are normalized, a member epoch above the target epoch is lowered to it,
// targets of unknown members are dropped, and the group epoch is raised to
// the target epoch if below it. If the group epoch equals the target epoch
// but the target is not what Assign computes from it for the members and the
// topics as they are now (a subscribed topic changed while the coordinator
// was away, a member has no target), the group epoch is bumped, so the next
// heartbeat recomputes the target.
func Restore(id string, cfg Config, p Persisted, topics TopicView, now time.Time) *Group {
	g := New(id, cfg, now)
	if topics == nil {
		topics = noTopics{}
	}
	g.groupEpoch, g.targetEpoch = max(p.GroupEpoch, p.TargetEpoch), p.TargetEpoch
	ms := slices.Clone(p.Members)
	slices.SortStableFunc(ms, func(a, b MemberRecord) int { return strings.Compare(a.ID, b.ID) })
	for _, r := range ms {
		if strings.TrimSpace(r.ID) == "" || g.members[r.ID] != nil {
			continue
		}
		m := &member{
			id: r.ID, rack: r.Rack, clientID: r.ClientID, host: r.ClientHost,
			epoch:           min(max(r.Epoch, 0), g.targetEpoch),
			sessionDeadline: now.Add(g.cfg.SessionTimeout),
		}
		g.members[m.id] = m
		names := slices.Clone(r.SubscribedTopicNames)
		slices.Sort(names)
		g.setNames(m, slices.Compact(names))
		g.setAssigned(m, normalizeTPs(r.Assigned))
		g.target[m.id] = normalizeTPs(p.Targets[m.id])
	}
	g.meta = g.currentMeta(topics)
	if g.groupEpoch == g.targetEpoch && len(g.members) > 0 && !g.targetIsCurrent() {
		g.groupEpoch++
	}
	return g
}

// targetIsCurrent reports whether recomputing the target over g.meta would
// leave it as it is (Assign returns its own output unchanged).
func (g *Group) targetIsCurrent() bool {
	topics := make(map[assignor.TopicID]Topic, len(g.meta))
	for n, t := range g.meta {
		topics[t.id] = Topic{ID: t.id, Name: n, Partitions: t.partitions}
	}
	ms := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, Member{ID: m.id, Topics: m.names})
	}
	for id, a := range Assign(ms, topics, g.target) {
		if !equalTPs(a, g.target[id]) {
			return false
		}
	}
	return true
}

// normalizeTPs copies a with every list normalized and empty ones dropped.
func normalizeTPs(a map[assignor.TopicID][]int32) tps {
	out := make(tps, len(a))
	for t, ps := range a {
		if ps = normalize(ps); len(ps) > 0 {
			out[t] = ps
		}
	}
	return out
}
