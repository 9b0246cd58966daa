package consumer

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// MemberRecord is one member as the coordinator persists it: what Kafka's member
// metadata record (its subscription, client, timeouts) and current assignment record
// (epochs, state, partitions) hold together.
type MemberRecord struct {
	ID, InstanceID, Rack string // InstanceID "" for a dynamic member
	ClientID, ClientHost string
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	ServerAssignor       string
	RebalanceTimeout     time.Duration
	Epoch, PrevEpoch     int32 // Epoch -2: a static member that left for now
	State                MemberState
	Assigned, Pending    map[assignor.TopicID][]int32
	// A classic-protocol member (Kafka's ClassicMemberMetadata): its protocols,
	// nil for a consumer-protocol member, and its session timeout.
	ClassicProtocols      []ClassicProtocol
	ClassicSessionTimeout time.Duration
}

// Persisted is a group's persisted state, or (from TakeChanges) what changed of it.
type Persisted struct {
	GroupEpoch int32
	// MetadataHash identifies the subscribed topics' metadata the group epoch was
	// computed against (Sluice's own hash of topic names, ids and partition
	// counts): a restore that finds another hash bumps the group epoch at the next
	// heartbeat, so a topic changed while the coordinator was away is noticed.
	MetadataHash int64
	// Target: TargetEpoch and Targets hold the whole target assignment (in a
	// TakeChanges result only when it changed).
	Target      bool
	TargetEpoch int32
	Targets     map[string]map[assignor.TopicID][]int32
	// Members: the members (in a TakeChanges result, those that may have changed),
	// sorted by id. Removed: members that left since the last TakeChanges, sorted.
	Members []MemberRecord
	Removed []string
}

// touch marks a member whose records may have changed for TakeChanges.
func (g *Group) touch(id string) {
	if g.touched == nil {
		g.touched = map[string]struct{}{}
	}
	g.touched[id] = struct{}{}
}

// TakeChanges returns what changed since the last call (group and target epochs,
// members that may have changed or left), for the coordinator to persist, and
// forgets it. The group epoch, target epoch and metadata hash are always set; the
// caller skips records whose bytes did not change.
func (g *Group) TakeChanges() Persisted {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := Persisted{GroupEpoch: g.groupEpoch, MetadataHash: metaHash(g.meta), TargetEpoch: g.targetEpoch}
	if g.targetDirty {
		p.Target = true
		p.Targets = make(map[string]map[assignor.TopicID][]int32, len(g.target))
		for id, t := range g.target {
			p.Targets[id] = cloneTPs(t)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(g.touched)) {
		if m := g.members[id]; m != nil {
			p.Members = append(p.Members, m.record())
		} else {
			p.Removed = append(p.Removed, id)
		}
	}
	g.targetDirty = false
	clear(g.touched)
	return p
}

// HasChanges reports whether TakeChanges has members or a target to report.
func (g *Group) HasChanges() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.targetDirty || len(g.touched) > 0
}

// Snapshot returns the whole persisted state (Target set, every member) without
// changing what TakeChanges reports.
func (g *Group) Snapshot() Persisted {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := Persisted{GroupEpoch: g.groupEpoch, MetadataHash: metaHash(g.meta), Target: true, TargetEpoch: g.targetEpoch,
		Targets: make(map[string]map[assignor.TopicID][]int32, len(g.target))}
	for id, t := range g.target {
		p.Targets[id] = cloneTPs(t)
	}
	for _, m := range g.sortedMembers() {
		p.Members = append(p.Members, m.record())
	}
	return p
}

func (m *member) record() MemberRecord {
	r := MemberRecord{
		ID: m.id, InstanceID: m.instanceID, Rack: m.rack, ClientID: m.clientID, ClientHost: m.host,
		SubscribedTopicNames: slices.Clone(m.names), SubscribedTopicRegex: m.regex, ServerAssignor: m.serverAssignor,
		RebalanceTimeout: m.rebalanceTimeout, Epoch: m.epoch, PrevEpoch: m.prevEpoch, State: m.state,
		Assigned: cloneTPs(m.assigned), Pending: cloneTPs(m.pending),
	}
	if m.classic != nil {
		r.ClassicProtocols, r.ClassicSessionTimeout = cloneProtocols(m.classic.protocols), m.classic.sessionTimeout
	}
	return r
}

// Restore builds a group from its persisted state, at now: every member's session
// (and, while it revokes, its rebalance timeout) starts at now, regexes are resolved
// against topics, and the group epoch is bumped at the next heartbeat if the
// subscribed topics' metadata is not what MetadataHash says. Members come back with
// their epochs and assignments, so their heartbeats carry on; members that do not
// come back expire as usual. Inconsistent input is repaired, not refused: a
// partition two members claim stays with the first (by id), a target of an unknown
// member is dropped, and the group epoch is raised to the target epoch if below it.
func Restore(id string, cfg Config, p Persisted, topics TopicView, now time.Time) *Group {
	g := New(id, cfg, now)
	if topics == nil {
		topics = noTopics{}
	}
	g.groupEpoch, g.targetEpoch = max(p.GroupEpoch, p.TargetEpoch), p.TargetEpoch
	ms := slices.Clone(p.Members)
	slices.SortFunc(ms, func(a, b MemberRecord) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	for _, r := range ms {
		if r.ID == "" || g.members[r.ID] != nil {
			continue
		}
		if r.InstanceID != "" {
			if _, taken := g.static[r.InstanceID]; taken {
				continue
			}
		}
		m := &member{
			id: r.ID, instanceID: r.InstanceID, rack: r.Rack, clientID: r.ClientID, host: r.ClientHost,
			epoch: r.Epoch, prevEpoch: r.PrevEpoch, state: r.State, rebalanceTimeout: r.RebalanceTimeout,
			serverAssignor: r.ServerAssignor, assigned: tps{}, pending: tps{},
		}
		if m.state > MemberUnreleasedPartitions || m.state < MemberStable {
			m.state = MemberStable
		}
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
		names := slices.Clone(r.SubscribedTopicNames)
		slices.Sort(names)
		g.setNames(m, slices.Compact(names))
		if r.SubscribedTopicRegex != "" {
			if re, err := g.compileRegex(r.SubscribedTopicRegex); err == nil {
				g.setRegex(m, r.SubscribedTopicRegex, re)
			}
		}
		g.setOwnership(m, g.unowned(r.Assigned), g.unowned(r.Pending))
		m.sessionDeadline = now.Add(g.cfg.SessionTimeout)
		if len(r.ClassicProtocols) > 0 {
			var sub kmsg.ConsumerMemberMetadata
			_ = sub.ReadFrom(r.ClassicProtocols[0].Metadata)
			m.classic = &classicInfo{protocols: cloneProtocols(r.ClassicProtocols), sessionTimeout: r.ClassicSessionTimeout, subVersion: sub.Version}
			if r.ClassicSessionTimeout > 0 {
				m.sessionDeadline = now.Add(r.ClassicSessionTimeout)
			} else {
				m.classic.sessionTimeout = g.cfg.SessionTimeout
			}
		}
		if m.state == MemberUnrevokedPartitions {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
	}
	for id, t := range p.Targets {
		if g.members[id] != nil {
			g.target[id] = cloneTPs(t)
		}
	}
	g.refreshRegexes(topics, now)
	if cur := g.currentMeta(topics); metaHash(cur) == p.MetadataHash {
		g.meta = cur
	}
	return g
}

// unowned returns the partitions of set nobody in g owns yet, normalized.
func (g *Group) unowned(set map[assignor.TopicID][]int32) tps {
	out := tps{}
	for t, ps := range set {
		var free []int32
		for _, p := range normalize(slices.Clone(ps)) {
			if _, held := g.owner[tp{t, p}]; !held && p >= 0 {
				free = append(free, p)
			}
		}
		putNonEmpty(out, t, free)
	}
	return out
}

// metaHash hashes topic metadata as the group saw it (names, ids, partition counts),
// order-independent; 0 for none.
func metaHash(meta map[string]topicMeta) int64 {
	if len(meta) == 0 {
		return 0
	}
	h := fnv.New64a()
	var b [4]byte
	for _, n := range slices.Sorted(maps.Keys(meta)) {
		t := meta[n]
		_, _ = h.Write([]byte(n))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write(t.id[:])
		binary.BigEndian.PutUint32(b[:], uint32(t.partitions))
		_, _ = h.Write(b[:])
	}
	return int64(h.Sum64())
}
