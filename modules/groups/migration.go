// Classic members in consumer groups and group.consumer.migration.policy.
//
// A KIP-848 group with members serves classic-protocol requests itself (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup: consumer.Group's *Classic methods), as Kafka 4
// does, so a group can hold both kinds of members and move between the protocols one
// client at a time. The broker config group.consumer.migration.policy (Kafka's
// values; default bidirectional, as in Kafka 4) says what may happen:
//
//	                       upgrade  downgrade  bidirectional  disabled
//	848 join, classic group   ✓                    ✓          GROUP_ID_NOT_FOUND
//	new classic member,       only its             ✓          INCONSISTENT_GROUP_PROTOCOL
//	  consumer group          known members
//	last 848 member leaves             ✓           ✓          (stays a consumer group)
//
// Upgrade (shard.upgrade): the first ConsumerGroupHeartbeat join to a Stable classic
// group of protocol type "consumer" turns it into a consumer group
// (consumer.FromClassic): its members become classic members at their generation, with
// their assignments as their targets, and the joining member then bumps the group
// epoch as any join does; the classic members are told to rejoin by their heartbeats
// and are assigned by the server's assignor from then on. A classic group that is
// rebalancing answers COORDINATOR_LOAD_IN_PROGRESS (retriable) until it is Stable: its
// assignment is not known mid-rebalance. Under "upgrade" classic members already in
// the group may rejoin, new ones may not (Kafka's KAFKA-20640).
//
// Downgrade (shard.maybeDowngrade): when a consumer group's last consumer-protocol
// member leaves (heartbeat, LeaveGroup, expiry) and classic members remain, the group
// becomes a classic group (classic.Restore) Stable at the group epoch with their
// current assignments and a protocol they all support (none: it stays a consumer
// group), its metadata is written, and it starts a rebalance so the classic protocol
// (its leader, or the server when sluice.consumer.assignor is set) assigns.
//
// Records: the first write after a conversion tombstones the other protocol's records
// of the group id (group.kindChecked), before the new ones, in one append.

package groups

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/classic"
	"github.com/sluicehq/sluice/modules/groups/consumer"
)

// migrationPolicy is group.consumer.migration.policy.
type migrationPolicy string

func (p migrationPolicy) upgrade() bool   { return p == "upgrade" || p == "bidirectional" || p == "" }
func (p migrationPolicy) downgrade() bool { return p == "downgrade" || p == "bidirectional" || p == "" }

// consumerWithMembers returns the KIP-848 group id of s when it has members, or nil:
// classic requests for it are served by its consumer.Group.
func (s *shard) consumerWithMembers(id string) *group {
	g := s.consumerFor(id)
	if g == nil || g.consumer.IsEmpty() {
		return nil
	}
	return g
}

// consumerFor returns group id of s when it is a KIP-848 group (with members or not):
// SyncGroup, Heartbeat and LeaveGroup for it go to its consumer.Group. A KIP-848 group
// not in memory is restored from its records first (groups of that protocol load
// lazily), so a classic member's first request after a restart finds its group.
func (s *shard) consumerFor(id string) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil
	}
	g := s.groups[id]
	if g == nil {
		if g = s.restoreConsumer(id, s.consumerConfig(), s.m.now()); g == nil {
			return nil
		}
		s.groups[id] = g
	}
	if g.consumer == nil {
		return nil
	}
	return g
}

// afterConsumerChange writes what a request changed in KIP-848 group g, then
// downgrades it when the policy says so and no consumer-protocol member is left.
func (s *shard) afterConsumerChange(ctx context.Context, g *group) {
	if sg := s.lookup(g.id); sg == g {
		s.persistConsumer(ctx, g)
	}
	s.maybeDowngrade(ctx, g)
}

// upgrade turns the classic group id, which has members, into a consumer group (see
// the file comment), or answers why it cannot: GROUP_ID_NOT_FOUND (policy or protocol
// type), COORDINATOR_LOAD_IN_PROGRESS (rebalancing), GROUP_MAX_SIZE_REACHED. It
// returns nil, nil when the group is not (any more) a classic group with members.
func (s *shard) upgrade(id string) (*consumer.Group, *kerr.Error, string) {
	policy := s.m.settings.Load().migration
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[id]
	if s.dead || g == nil || g.classic == nil || g.classic.IsEmpty() {
		return nil, nil, ""
	}
	if !policy.upgrade() {
		return nil, kerr.GroupIDNotFound, "group " + id + " has classic-protocol members and group.consumer.migration.policy (" +
			string(policy) + ") does not allow an upgrade to the consumer protocol"
	}
	snap := g.classic.Snapshot()
	switch {
	case snap.ProtocolType != consumer.ClassicProtocolType:
		return nil, kerr.GroupIDNotFound, "group " + id + " is a classic group of protocol type " + snap.ProtocolType + ", not consumer"
	case snap.State != classic.Stable:
		return nil, kerr.CoordinatorLoadInProgress, "classic group " + id + " is rebalancing; it is upgraded once it is stable"
	case len(snap.Members) >= s.consumerConfig().MaxSize:
		return nil, kerr.GroupMaxSizeReached, "the group has reached group.consumer.max.size"
	}
	members := make([]consumer.ClassicMember, 0, len(snap.Members))
	for _, ms := range snap.Members {
		cm := consumer.ClassicMember{
			ID: ms.ID, ClientID: ms.ClientID, ClientHost: ms.Host,
			SessionTimeout: ms.SessionTimeout, RebalanceTimeout: ms.RebalanceTimeout,
			Protocols:  []consumer.ClassicProtocol{{Name: snap.Protocol, Metadata: ms.Metadata}},
			Assignment: ms.Assignment,
		}
		if ms.InstanceID != nil {
			cm.InstanceID = *ms.InstanceID
		}
		members = append(members, cm)
	}
	cg := consumer.FromClassic(id, s.consumerConfig(), snap.Generation, members, s.m.topicView(), s.m.now())
	g.classic.MarkDead(kerr.CoordinatorNotAvailable) // requests that raced the swap retry
	s.groups[id] = &group{id: id, consumer: cg}
	s.m.log.Info("group upgraded to the consumer protocol", "group", id, "generation", snap.Generation, "members", len(members))
	return cg, nil, ""
}

// maybeDowngrade turns consumer group g into a classic group when the policy allows a
// downgrade and all its members are classic ones (see the file comment).
func (s *shard) maybeDowngrade(ctx context.Context, g *group) {
	if g.consumer == nil || !s.m.settings.Load().migration.downgrade() {
		return
	}
	if n848, nClassic := g.consumer.Protocols(); n848 > 0 || nClassic == 0 {
		return
	}
	s.mu.Lock()
	if s.dead || s.groups[g.id] != g {
		s.mu.Unlock()
		return
	}
	gen, members, ok := g.consumer.ToClassic(s.m.topicView())
	cfg := s.m.settings.Load().classic
	if !ok || cfg.MaxSize > 0 && len(members) > cfg.MaxSize {
		s.mu.Unlock()
		return
	}
	protocol := commonProtocol(members)
	if protocol == "" {
		s.mu.Unlock()
		s.m.log.Warn("group not downgraded: its classic members share no protocol", "group", g.id)
		return
	}
	snap := classic.Snapshot{State: classic.Stable, ProtocolType: consumer.ClassicProtocolType, Generation: gen,
		Protocol: protocol, Leader: members[0].ID}
	for _, cm := range members {
		ms := classic.MemberSnapshot{
			ID: cm.ID, ClientID: cm.ClientID, Host: cm.ClientHost,
			SessionTimeout: cm.SessionTimeout, RebalanceTimeout: cm.RebalanceTimeout,
			Assignment: cm.Assignment,
		}
		if cm.InstanceID != "" {
			inst := cm.InstanceID
			ms.InstanceID = &inst
		}
		for _, p := range cm.Protocols {
			if p.Name == protocol {
				ms.Metadata = p.Metadata
			}
		}
		snap.Members = append(snap.Members, ms)
	}
	cfg.Server = classicAssigner{s}
	cg := classic.Restore(g.id, cfg, snap, s.m.now())
	g.consumer.MarkDead(kerr.CoordinatorNotAvailable)
	ng := &group{id: g.id, classic: cg}
	s.groups[g.id] = ng
	s.mu.Unlock()
	s.m.log.Info("group downgraded to the classic protocol", "group", g.id, "generation", gen, "members", len(members), "protocol", protocol)
	// Write the classic generation (tombstoning the consumer records) before the
	// members rejoin, so a restart from now on finds a classic group.
	s.persist(ctx, ng)
	cg.Rebalance(s.m.now())
}

// commonProtocol is the protocol every member supports that the first member prefers
// most, or "".
func commonProtocol(members []consumer.ClassicMember) string {
	for _, p := range members[0].Protocols {
		all := true
		for _, cm := range members[1:] {
			if !slices.ContainsFunc(cm.Protocols, func(q consumer.ClassicProtocol) bool { return q.Name == p.Name }) {
				all = false
				break
			}
		}
		if all {
			return p.Name
		}
	}
	return ""
}

// joinConsumerAsClassic serves a JoinGroup for consumer group g.
func (m *Module) joinConsumerAsClassic(ctx context.Context, req *kernel.Request, s *shard, g *group, r *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	admit := m.settings.Load().migration.downgrade()
	resp := g.consumer.JoinClassic(ctx, r, consumer.Client{ID: req.ClientID, Host: clientHost(req.Conn)}, m.topicView(), admit, m.now())
	s.afterConsumerChange(ctx, g)
	return resp
}
