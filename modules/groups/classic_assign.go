// Server-side assignment of classic-protocol members: when a group's config
// sluice.consumer.assignor names an assignor (built-in or plugin), the coordinator
// assigns the classic members of that group itself, as Kafka 4 does for classic
// members of a consumer group, so kcat -G, librdkafka, kafkajs, sarama and kgo's
// classic balancers are assigned by the operator's assignor without any change to
// the client.
//
// How a generation runs (classic.ServerAssigner):
//
//	JoinGroup ends ─► every member is told it is a follower (empty leader id and
//	                  member list) with its own first protocol name
//	              ─► Start: a goroutine decodes each member's ConsumerMemberMetadata
//	                  (topics, owned partitions, rack), runs the assignor on the
//	                  current image, encodes ConsumerMemberAssignments
//	              ─► Group.Assign: Stable, waiting SyncGroups answered, the group's
//	                  metadata record written
//
// Invariants:
//   - Cooperative members (a protocol name with "cooperative", as kgo's and
//     librdkafka's cooperative-sticky) never get a partition another cooperative
//     member still owns (its metadata's owned partitions): the owner is assigned
//     without it, revokes it, and the rebalance that Assign starts once every member
//     has synced hands it over. Eager members own nothing when they join (they
//     revoke first), so nothing is withheld for them. A partition is thus never
//     assigned to two members of one generation, nor owned by one while another
//     is assigned it.
//   - The assignor's answer must pass assignor.Check; a failure (a plugin's is
//     already covered by its own fallback) is answered by the built-in uniform
//     assignor, so a generation is always assigned. The classic group's sync
//     deadline is the backstop if even that does not come back.

package groups

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/modules/groups/classic"
	"github.com/sluicehq/sluice/modules/groups/consumer"
)

// classicAssignTimeout bounds one server-side assignment of a classic group (a
// plugin's own deadline is shorter; its fallback then answers).
const classicAssignTimeout = 30 * time.Second

// classicAssigner is a shard's classic.ServerAssigner.
type classicAssigner struct{ s *shard }

// Wants reports whether the group's config names a configured assignor and the
// group is a consumer group (only their metadata can be read).
func (a classicAssigner) Wants(group, protocolType string) bool {
	return protocolType == "consumer" && a.s.m.topicView().GroupAssignor(group) != ""
}

// Start assigns generation gen of g in a goroutine the module waits for at Stop.
func (a classicAssigner) Start(g *classic.Group, gen int32) {
	s := a.s
	s.m.assigning.Go(func() {
		ctx, cancel := context.WithTimeout(s.Context(), classicAssignTimeout)
		defer cancel()
		s.assignClassic(ctx, g, gen)
	})
}

// assignClassic computes and installs generation gen's assignment.
func (s *shard) assignClassic(ctx context.Context, g *classic.Group, gen int32) {
	members, ok := g.ServerMembers(gen)
	if !ok {
		return
	}
	view := s.m.topicView()
	a, why := s.m.assignors[0], consumer.WhyDefault
	if name := view.GroupAssignor(g.ID()); name != "" {
		for _, x := range s.m.assignors {
			if x.Name() == name {
				a, why = x, consumer.WhyGroupConfig
			}
		}
	}
	in, owned := classicInput(view, g.ID(), members, a)
	out, err := runAssignor(ctx, a, in)
	if err != nil {
		s.m.log.Warn("classic group assignment failed; using uniform", "group", g.ID(), "generation", gen, "assignor", a.Name(), "err", err)
		a, why = assignor.Uniform{}, "fallback after "+a.Name()+" failed"
		if out, err = runAssignor(ctx, a, in); err != nil {
			s.m.log.Warn("classic group assignment failed", "group", g.ID(), "generation", gen, "err", err)
			return // the group's sync deadline starts another rebalance
		}
	}
	withheld := withholdOwned(out, owned)
	given := make(map[string][]byte, len(members))
	for _, m := range members {
		given[m.ID] = encodeClassicAssignment(view, out[m.ID], m.Metadata)
	}
	if !g.Assign(gen, a.Name(), given, withheld > 0, s.m.now()) {
		return
	}
	s.m.log.Info("classic group assigned by the coordinator", "group", g.ID(), "generation", gen,
		"assignor", a.Name(), "why", why, "members", len(members), "withheld", withheld)
	if sg := s.lookup(g.ID()); sg != nil && sg.classic == g {
		s.persist(ctx, sg)
	}
}

// ownedBy maps a partition a cooperative member still owns to that member.
type ownedBy map[assignor.TopicID]map[int32]string

// classicInput builds the assignor's input from the members' subscriptions, and
// the partitions cooperative members own.
func classicInput(view imageTopics, group string, members []classic.ServerMember, a assignor.Assignor) (assignor.Input, ownedBy) {
	in := assignor.Input{Topics: map[assignor.TopicID]assignor.Topic{}}
	owned := ownedBy{}
	stats, _ := any(view).(consumer.TopicStats)
	if su, ok := a.(consumer.StatsUser); !ok || !su.UsesPartitionStats() {
		stats = nil
	}
	racks := true
	if ru, ok := a.(consumer.RackUser); !ok || !ru.UsesPartitionRacks() {
		racks = false
	}
	addTopic := func(name string) (assignor.TopicID, bool) {
		id, n, ok := view.TopicByName(name)
		if !ok {
			return id, false
		}
		if _, done := in.Topics[id]; !done {
			t := assignor.Topic{ID: id, Name: name, Partitions: n}
			if racks {
				if rs, ok := view.PartitionRacks(id, n); ok {
					t.PartitionRacks = rs
				}
			}
			if stats != nil {
				if ends, lag, ok := stats.PartitionStats(group, id, n); ok && len(ends) == int(n) && len(lag) == int(n) {
					t.PartitionEndOffsets, t.PartitionLag = ends, lag
				}
			}
			in.Topics[id] = t
		}
		return id, true
	}
	for _, m := range members {
		am := assignor.Member{ID: m.ID}
		if m.InstanceID != nil {
			am.InstanceID = *m.InstanceID
		}
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.Metadata); err == nil {
			if md.Rack != nil {
				am.Rack = *md.Rack
			}
			for _, t := range md.Topics {
				if _, ok := addTopic(t); ok {
					am.Topics = append(am.Topics, t)
				}
			}
			cur := map[assignor.TopicID][]int32{}
			for _, op := range md.OwnedPartitions {
				if id, _, ok := view.TopicByName(op.Topic); ok {
					cur[id] = append(cur[id], op.Partitions...)
				}
			}
			if len(md.OwnedPartitions) == 0 {
				var prev kmsg.ConsumerMemberAssignment
				if len(m.Assignment) > 0 && prev.ReadFrom(m.Assignment) == nil {
					for _, t := range prev.Topics {
						if id, _, ok := view.TopicByName(t.Topic); ok {
							cur[id] = append(cur[id], t.Partitions...)
						}
					}
				}
			}
			if len(cur) > 0 {
				am.Current = cur
			}
			if strings.Contains(m.Protocol, "cooperative") {
				for _, op := range md.OwnedPartitions {
					id, _, ok := view.TopicByName(op.Topic)
					if !ok {
						continue
					}
					if owned[id] == nil {
						owned[id] = map[int32]string{}
					}
					for _, p := range op.Partitions {
						owned[id][p] = m.ID
					}
				}
			}
		}
		if am.Topics == nil {
			am.Topics = []string{}
		}
		in.Members = append(in.Members, am)
	}
	return in, owned
}

// runAssignor runs a and checks its answer; a panic is an error.
func runAssignor(ctx context.Context, a assignor.Assignor, in assignor.Input) (out assignor.Assignment, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("assignor %s panicked: %v", a.Name(), r)
		}
	}()
	if out, err = a.Assign(ctx, in); err == nil {
		err = assignor.Check(in, out)
	}
	return out, err
}

// withholdOwned removes from each member's assignment the partitions another
// cooperative member still owns, and returns how many it removed.
func withholdOwned(out assignor.Assignment, owned ownedBy) int {
	n := 0
	for member, tps := range out {
		for id, ps := range tps {
			kept := ps[:0]
			for _, p := range ps {
				if o, ok := owned[id][p]; ok && o != member {
					n++
					continue
				}
				kept = append(kept, p)
			}
			tps[id] = kept
		}
	}
	return n
}

// encodeClassicAssignment encodes a member's partitions as a ConsumerMemberAssignment
// of the version its metadata was (capped at 3), topics by name.
func encodeClassicAssignment(view imageTopics, tps map[assignor.TopicID][]int32, metadata []byte) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	var md kmsg.ConsumerMemberMetadata
	if md.ReadFrom(metadata) == nil {
		a.Version = min(max(md.Version, 0), 3)
	}
	for id, ps := range tps {
		if len(ps) == 0 {
			continue
		}
		name, _, ok := view.TopicByID(id)
		if !ok {
			continue
		}
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = name, slices.Sorted(slices.Values(ps))
		a.Topics = append(a.Topics, t)
	}
	slices.SortFunc(a.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int { return strings.Compare(x.Topic, y.Topic) })
	return a.AppendTo(nil)
}
