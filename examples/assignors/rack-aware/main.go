// Command rack-aware is an example assignor plugin: it gives each member
// partitions that have a replica in the member's rack (client.rack) where it
// can, so consumers fetch from a local replica, and otherwise balances like
// the uniform assignor: per topic every subscriber gets the same number of
// partitions, give or take one.
//
//	go build -o bin/rack-aware ./examples/assignors/rack-aware
//
// and list it in the broker config (see plugins/README.md).
package main

import (
	"cmp"
	"context"
	"slices"

	"github.com/sluicehq/sluice/plugins/assignor"
)

func main() { assignor.Serve(RackAware{}) }

// RackAware is the assignor; it has no state.
type RackAware struct{}

// Name implements assignor.Assignor.
func (RackAware) Name() string { return "rack-aware" }

// Assign implements assignor.Assignor.
//
// Per topic (in topic id order), each subscriber's quota is partitions /
// subscribers, the remainder going to the subscribers with the fewest
// partitions so far over all topics. Partitions are then handed out in four
// passes, each within the quotas: current partitions in the member's rack;
// other partitions in the member's rack; the rest of the current partitions;
// everything left, to the subscriber with the most room.
func (RackAware) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	if err := assignor.Validate(in); err != nil {
		return nil, err
	}
	members := slices.SortedFunc(slices.Values(in.Members), func(a, b assignor.Member) int { return cmp.Compare(a.ID, b.ID) })
	topics := make([]assignor.Topic, 0, len(in.Topics))
	for _, t := range in.Topics {
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b assignor.Topic) int { return slices.Compare(a.ID[:], b.ID[:]) })

	out := make(assignor.Assignment, len(members))
	for _, m := range members {
		out[m.ID] = map[assignor.TopicID][]int32{}
	}
	total := make([]int, len(members)) // partitions per member over all topics
	for _, t := range topics {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var subs []int // member indices
		for i, m := range members {
			if slices.Contains(m.Topics, t.Name) {
				subs = append(subs, i)
			}
		}
		if len(subs) == 0 || t.Partitions == 0 {
			continue
		}
		// Quotas: the remainder goes to the least loaded subscribers.
		quota := make(map[int]int, len(subs))
		byLoad := slices.Clone(subs)
		slices.SortStableFunc(byLoad, func(a, b int) int { return cmp.Compare(total[a], total[b]) })
		for k, m := range byLoad {
			quota[m] = int(t.Partitions) / len(subs)
			if k < int(t.Partitions)%len(subs) {
				quota[m]++
			}
		}
		owner := make([]int, t.Partitions)
		for p := range owner {
			owner[p] = -1
		}
		inRack := func(m int, p int32) bool {
			return members[m].Rack != "" && len(t.PartitionRacks) > 0 && slices.Contains(t.PartitionRacks[p], members[m].Rack)
		}
		give := func(m int, p int32) {
			owner[p] = m
			quota[m]--
			total[m]++
		}
		keepCurrent := func(rackOnly bool) {
			for _, m := range subs {
				for _, p := range members[m].Current[t.ID] {
					if quota[m] > 0 && p >= 0 && p < t.Partitions && owner[p] < 0 && (!rackOnly || inRack(m, p)) {
						give(m, p)
					}
				}
			}
		}
		// best returns the subscriber with the most room left among those ok
		// accepts, or -1.
		best := func(ok func(m int) bool) int {
			b := -1
			for _, m := range subs {
				if quota[m] > 0 && ok(m) && (b < 0 || quota[m] > quota[b]) {
					b = m
				}
			}
			return b
		}
		keepCurrent(true)
		for p := range t.Partitions {
			if owner[p] < 0 {
				if m := best(func(m int) bool { return inRack(m, p) }); m >= 0 {
					give(m, p)
				}
			}
		}
		keepCurrent(false)
		for p := range t.Partitions {
			if owner[p] < 0 {
				give(best(func(int) bool { return true }), p) // quotas add up to the partitions
			}
		}
		for p, m := range owner {
			out[members[m].ID][t.ID] = append(out[members[m].ID][t.ID], int32(p))
		}
	}
	return out, nil
}
