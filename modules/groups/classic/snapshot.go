package classic

import (
	"time"
)

// Snapshot is what a group's metadata record (Kafka's GroupMetadataValue in
// __consumer_offsets) holds: enough to bring a Stable group back with its members
// and assignments after a coordinator restart or move, or an Empty group back with
// its generation and protocol type.
//
// Only snapshots of Stable and Empty groups are meant to be persisted (State
// tells which one a snapshot is), as Kafka writes group metadata only when a
// generation's assignment is complete and when the group empties. A snapshot of a
// group in PreparingRebalance or CompletingRebalance describes a generation whose
// assignment is not (or no longer) known: its members have no assignment, and
// Restore would bring them back Stable with empty assignments. The coordinator
// therefore keeps the last Stable or Empty snapshot it wrote; restoring it after a
// crash mid-rebalance gives the previous generation, whose members rejoin (a
// member that already rejoined gets the restored generation back or
// ILLEGAL_GENERATION, then rejoins), as in Kafka.
type Snapshot struct {
	State        State // the state the snapshot was taken in
	ProtocolType string
	Generation   int32
	Protocol     string // the selected protocol; "" unless Stable or CompletingRebalance
	Leader       string // "" when there are no members
	// StateTimestamp is when the group entered State (Kafka's
	// currentStateTimestamp; for an Empty group, when it became empty).
	StateTimestamp time.Time
	Members        []MemberSnapshot // in join order
}

// MemberSnapshot is one member of a Snapshot.
type MemberSnapshot struct {
	ID               string
	InstanceID       *string // KIP-345 group.instance.id; nil for dynamic members
	ClientID, Host   string
	RebalanceTimeout time.Duration
	SessionTimeout   time.Duration
	// Metadata is the member's metadata for the selected protocol (its
	// subscription); other protocols it listed are not kept, as in Kafka.
	Metadata   []byte
	Assignment []byte // the current generation's assignment; nil unless Stable
}

// Snapshot returns the group's persistable state; see Snapshot for which states
// are worth persisting. The returned slices are copies.
func (g *Group) Snapshot() Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Snapshot{
		State:          g.state,
		ProtocolType:   g.protocolType,
		Generation:     g.generation,
		Protocol:       g.protocol,
		Leader:         g.leader,
		StateTimestamp: g.stateSince,
	}
	for _, m := range g.members {
		ms := MemberSnapshot{
			ID:               m.id,
			ClientID:         m.clientID,
			Host:             m.host,
			RebalanceTimeout: m.rebalanceTimeout,
			SessionTimeout:   m.sessionTimeout,
			Metadata:         append([]byte(nil), m.metadataFor(g.protocolFor(m))...),
		}
		if m.instanceID != nil {
			inst := *m.instanceID
			ms.InstanceID = &inst
		}
		if g.state == Stable && m.assignGen == g.generation {
			ms.Assignment = append([]byte{}, m.assignment...)
		}
		s.Members = append(s.Members, ms)
	}
	return s
}

// Restore returns the group a snapshot describes, as Kafka loads a group from its
// metadata record:
//
//   - with members and a selected protocol: Stable at the snapshot's generation,
//     with its leader (the first member if the leader is not a member), members,
//     assignments and static members registered. Every member's session deadline
//     is now + its session timeout, so members that do not come back expire as
//     usual and the group rebalances without them. Each member supports only the
//     selected protocol (the only one the snapshot keeps), so a rejoin listing
//     more protocols counts as changed protocols and rebalances.
//   - otherwise (no members, or members but no protocol): Empty with the
//     snapshot's generation and protocol type, so the next generation follows it.
//
// Restore ignores s.State: a snapshot taken mid-rebalance comes back Stable (see
// Snapshot). A zero s.StateTimestamp means now.
func Restore(id string, cfg Config, s Snapshot, now time.Time) *Group {
	g := New(id, cfg, now)
	g.generation = s.Generation
	g.protocolType = s.ProtocolType
	if !s.StateTimestamp.IsZero() {
		g.stateSince = s.StateTimestamp
	}
	if len(s.Members) == 0 || s.Protocol == "" {
		g.state = Empty
		return g
	}
	g.protocol = s.Protocol
	for _, ms := range s.Members {
		if ms.ID == "" || g.byID[ms.ID] != nil {
			continue
		}
		m := &member{
			id:               ms.ID,
			clientID:         ms.ClientID,
			host:             ms.Host,
			protocolType:     s.ProtocolType,
			protocols:        []protocol{{name: s.Protocol, metadata: append([]byte{}, ms.Metadata...)}},
			sessionTimeout:   ms.SessionTimeout,
			rebalanceTimeout: ms.RebalanceTimeout,
			sessionDeadline:  now.Add(ms.SessionTimeout),
			assignment:       append([]byte{}, ms.Assignment...),
			assignGen:        s.Generation,
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		if ms.InstanceID != nil {
			if _, taken := g.static[*ms.InstanceID]; taken {
				continue // a corrupt snapshot: one member per instance id
			}
			inst := *ms.InstanceID
			m.instanceID = &inst
			g.static[inst] = m.id
		}
		g.members = append(g.members, m)
		g.byID[m.id] = m
	}
	if len(g.members) == 0 {
		g.protocol = ""
		g.state = Empty
		return g
	}
	g.leader = s.Leader
	if g.byID[g.leader] == nil {
		g.leader = g.members[0].id
	}
	g.state = Stable
	return g
}
