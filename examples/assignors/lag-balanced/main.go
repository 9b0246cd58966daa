// Command lag-balanced is an example assignor plugin: it spreads the group's
// lag (Topic.PartitionLag, filled in by the broker) evenly over the members,
// so no consumer is left with all the backlog, and keeps each member's
// current partitions as long as that does not unbalance the group.
//
//	go build -o bin/lag-balanced ./examples/assignors/lag-balanced
package main

import (
	"cmp"
	"context"
	"slices"

	"github.com/sluicehq/sluice/plugins/assignor"
)

func main() { assignor.Serve(LagBalanced{}) }

// LagBalanced is the assignor; it has no state.
type LagBalanced struct{}

// Name implements assignor.Assignor.
func (LagBalanced) Name() string { return "lag-balanced" }

// maxLag caps one partition's lag so sums cannot overflow.
const maxLag = 1 << 48

// part is one partition of a subscribed topic.
type part struct {
	topic  assignor.TopicID
	p      int32
	weight int64 // 1 + lag: with no lag known, counts are balanced
	subs   []int // members that may own it
}

// Assign implements assignor.Assignor.
//
// A partition weighs 1 + its lag (an unknown lag counts as the topic's mean
// known lag), and a member's load is the sum of its partitions' weights.
// Members first keep their valid current partitions; unowned partitions go,
// heaviest first, to the least loaded subscriber; then partitions move from
// the most loaded member to less loaded subscribers while a move lowers both
// below the old maximum. The result's load spread (most minus least loaded,
// among members sharing subscriptions) is at most the heaviest partition's
// weight, and a balanced group is left as it is.
func (LagBalanced) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	if err := assignor.Validate(in); err != nil {
		return nil, err
	}
	members := slices.SortedFunc(slices.Values(in.Members), func(a, b assignor.Member) int { return cmp.Compare(a.ID, b.ID) })
	topics := make([]assignor.Topic, 0, len(in.Topics))
	for _, t := range in.Topics {
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b assignor.Topic) int { return slices.Compare(a.ID[:], b.ID[:]) })

	// Partitions, with weights and subscribers.
	var parts []part
	index := map[assignor.TopicID]int{} // topic → index of its partition 0 in parts
	for _, t := range topics {
		var subs []int
		for i, m := range members {
			if slices.Contains(m.Topics, t.Name) {
				subs = append(subs, i)
			}
		}
		if len(subs) == 0 {
			continue
		}
		var known, sum int64
		for _, l := range t.PartitionLag {
			if l >= 0 {
				known++
				sum += min(l, maxLag)
			}
		}
		mean := int64(0)
		if known > 0 {
			mean = sum / known
		}
		index[t.ID] = len(parts)
		for p := range t.Partitions {
			w := mean
			if len(t.PartitionLag) > 0 && t.PartitionLag[p] >= 0 {
				w = min(t.PartitionLag[p], maxLag)
			}
			parts = append(parts, part{topic: t.ID, p: p, weight: 1 + w, subs: subs})
		}
	}

	owner := make([]int, len(parts))
	for i := range owner {
		owner[i] = -1
	}
	load := make([]int64, len(members))
	count := make([]int, len(members))
	give := func(i, m int) {
		if owner[i] >= 0 {
			load[owner[i]] -= parts[i].weight
			count[owner[i]]--
		}
		owner[i] = m
		load[m] += parts[i].weight
		count[m]++
	}
	// 1. Keep valid current partitions (first claimer in member id order).
	for m, mem := range members {
		for tid, ps := range mem.Current {
			base, ok := index[tid]
			if !ok || !slices.Contains(parts[base].subs, m) {
				continue
			}
			for _, p := range ps {
				if p >= 0 && int(p) < len(parts)-base && parts[base+int(p)].topic == tid && owner[base+int(p)] < 0 {
					give(base+int(p), m)
				}
			}
		}
	}
	// 2. Unowned partitions, heaviest first, to the least loaded subscriber.
	var free []int
	for i := range parts {
		if owner[i] < 0 {
			free = append(free, i)
		}
	}
	slices.SortStableFunc(free, func(a, b int) int { return cmp.Compare(parts[b].weight, parts[a].weight) })
	lighter := func(a, b int) bool { // is member a less loaded than b
		if load[a] != load[b] {
			return load[a] < load[b]
		}
		return count[a] < count[b]
	}
	for _, i := range free {
		best := parts[i].subs[0]
		for _, m := range parts[i].subs[1:] {
			if lighter(m, best) {
				best = m
			}
		}
		give(i, best)
	}
	// 3. Move partitions off the most loaded members while it helps. Every
	// move lowers the sum of squared loads, so this ends; the cap is a guard.
	for range 4 * (len(parts) + 1) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !improve(parts, owner, load, give) {
			break
		}
	}

	out := make(assignor.Assignment, len(members))
	for _, m := range members {
		out[m.ID] = map[assignor.TopicID][]int32{}
	}
	for i, m := range owner { // parts are in partition order per topic
		id := members[m].ID
		out[id][parts[i].topic] = append(out[id][parts[i].topic], parts[i].p)
	}
	return out, nil
}

// improve makes the best single move of a partition from a most loaded owner
// to another of its subscribers that leaves both below that owner's old
// load, and reports whether it found one.
func improve(parts []part, owner []int, load []int64, give func(i, m int)) bool {
	bestI, bestM := -1, -1
	var bestPeak int64
	for i, from := range owner {
		w := parts[i].weight
		for _, to := range parts[i].subs {
			if to == from || load[to]+w >= load[from] {
				continue
			}
			// Prefer moves off the heaviest member, then the lowest peak.
			peak := max(load[from]-w, load[to]+w)
			if bestI < 0 || load[from] > load[owner[bestI]] || (load[from] == load[owner[bestI]] && peak < bestPeak) {
				bestI, bestM, bestPeak = i, to, peak
			}
		}
	}
	if bestI < 0 {
		return false
	}
	give(bestI, bestM)
	return true
}
