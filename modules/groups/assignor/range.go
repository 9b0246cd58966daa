package assignor

import "context"

// Range is the "range" assignor, with the semantics of Kafka's server-side
// RangeAssignor. Each topic is handled on its own: the members subscribed to
// it, sorted by id, get contiguous ranges of its partitions, and the first
// partitions%members of them get one partition more. So topics with the same
// partition count and the same subscribers are co-partitioned: partition i of
// each goes to the same member.
//
// Stickiness: the extra partitions go first to members that already hold more
// than partitions/members of the topic (in id order), then to the others in id
// order. A member keeps its current partitions of the topic (lowest first) up
// to its quota; the remaining partitions then fill the members with room in id
// order, lowest partition first. On a fresh group this is exactly
// the contiguous ranges; later, co-partitioned topics stay aligned as long as
// their current assignments were aligned.
//
// Range ignores racks (Member.Rack, Topic.PartitionRacks): rack preferences
// would break the alignment of co-partitioned topics. It does not implement
// UsesPartitionRacks, so the group coordinator does not look racks up for it.
type Range struct{}

// Name implements Assignor.
func (Range) Name() string { return "range" }

// Assign implements Assignor.
func (Range) Assign(ctx context.Context, in Input) (Assignment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g, err := newGroup(in)
	if err != nil {
		return nil, err
	}
	owner := make([]int, g.total())
	for p := range owner {
		owner[p] = -1
	}
	for t, subs := range g.subs {
		if len(subs) == 0 {
			continue
		}
		parts := int(g.topics[t].Partitions)
		// Quotas: partitions/members each; the partitions%members extra
		// ones go first to members already holding more than the base
		// quota, then to the others, in id order.
		base, extra := parts/len(subs), parts%len(subs)
		room := make([]int, len(subs))
		cur := make([][]int, len(subs))
		for k, m := range subs {
			room[k] = base
			cur[k] = g.current(m, t)
		}
		for _, holders := range []bool{true, false} {
			for k := range subs {
				if extra > 0 && room[k] == base && (len(cur[k]) > base) == holders {
					room[k]++
					extra--
				}
			}
		}
		for k, m := range subs {
			for _, p := range cur[k] {
				if room[k] == 0 {
					break
				}
				if owner[p] < 0 {
					owner[p] = m
					room[k]--
				}
			}
		}
		k := 0
		for p := g.base[t]; p < g.base[t+1]; p++ {
			if owner[p] >= 0 {
				continue
			}
			for room[k] == 0 {
				k++
			}
			owner[p] = subs[k]
			room[k]--
		}
	}
	return g.assignment(owner), nil
}

var _ Assignor = Range{}
