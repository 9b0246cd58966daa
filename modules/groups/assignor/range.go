package assignor

import "context"

// Range is the "range" assignor, with the semantics of Kafka's server-side
// RangeAssignor. Each topic is handled on its own: the members subscribed to
// it, sorted by id, get contiguous ranges of its partitions, and the first
// partitions%members of them get one partition more. So topics with the same
// partition count and the same subscribers are co-partitioned: partition i of
// each goes to the same member.
//
// Stickiness: a member first keeps its current partitions of the topic (lowest
// first) up to its quota; the remaining partitions then fill the members with
// room in id order, lowest partition first. On a fresh group this is exactly
// the contiguous ranges; later, co-partitioned topics stay aligned as long as
// their current assignments were aligned.
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
		room := make([]int, len(subs))
		for k := range subs {
			room[k] = parts / len(subs)
			if k < parts%len(subs) {
				room[k]++
			}
		}
		for k, m := range subs {
			for _, p := range g.current(m, t) {
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
