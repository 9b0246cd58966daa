package assignor

// The uniform assignor as it was before it became rack-aware (issue 21),
// kept verbatim as the reference the rack-blind cases must still match:
// without a member whose rack hosts a replica of a partition it subscribes
// to, Uniform must return exactly what legacyUniform returns.

import (
	"cmp"
	"slices"
)

func legacyUniform(in Input) (Assignment, error) {
	g, err := newGroup(in)
	if err != nil {
		return nil, err
	}
	n := g.total()
	owner := make([]int, n)
	for p := range owner {
		owner[p] = -1
	}
	count := make([]int, len(g.members))
	kept := make([]bool, n)

	// 1. Keep.
	for m := range g.members {
		for t := range g.topics {
			for _, p := range g.current(m, t) {
				if owner[p] < 0 {
					owner[p] = m
					kept[p] = true
					count[m]++
				}
			}
		}
	}

	// 2. Place unowned partitions, most constrained topics first.
	order := make([]int, 0, len(g.topics))
	assignable, active := 0, 0
	for t := range g.topics {
		if len(g.subs[t]) > 0 {
			order = append(order, t)
			assignable += int(g.topics[t].Partitions)
		}
	}
	activeMember := make([]bool, len(g.members))
	for m := range g.members {
		if slices.Contains(g.subOf[m], true) {
			activeMember[m] = true
			active++
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(g.subs[a]), len(g.subs[b])) })
	if active > 0 {
		share := assignable / active
		for _, t := range order {
			for p := g.base[t]; p < g.base[t+1]; p++ {
				if owner[p] >= 0 || !legacyHasRacks(g, p) {
					continue
				}
				best := -1
				for _, m := range g.subs[t] {
					if count[m] < share && legacyRackMatch(g, m, p) && (best < 0 || count[m] < count[best]) {
						best = m
					}
				}
				if best >= 0 {
					owner[p] = best
					count[best]++
				}
			}
		}
	}
	for _, t := range order {
		for p := g.base[t]; p < g.base[t+1]; p++ {
			if owner[p] >= 0 {
				continue
			}
			best, bestRack := -1, false
			for _, m := range g.subs[t] {
				r := legacyRackMatch(g, m, p)
				if best < 0 || count[m] < count[best] || (count[m] == count[best] && r && !bestRack) {
					best, bestRack = m, r
				}
			}
			owner[p] = best
			count[best]++
		}
	}

	// 3. Balance: one partition at a time, from the most loaded member that
	// can give one. Moving from the most loaded first is what keeps the moves
	// down to what balance requires.
	//
	// Each member's list of partitions, in the order they should leave it:
	// first those placed in step 2, then those it kept (stickiness beats rack
	// locality); within each, those off the member's rack first.
	owned := make([][]int, len(g.members))
	for _, keptPass := range []bool{false, true} {
		for _, rackPass := range []bool{false, true} {
			for p, m := range owner {
				if m >= 0 && kept[p] == keptPass && legacyRackMatch(g, m, p) == rackPass {
					owned[m] = append(owned[m], p)
				}
			}
		}
	}
	members := make([]int, 0, len(g.members))
	for m := range g.members {
		if activeMember[m] {
			members = append(members, m)
		}
	}
	// members stays sorted by (count descending, index ascending); a move
	// changes two counts by one, so two members bubble to their places.
	before := func(a, b int) bool { return count[a] > count[b] || (count[a] == count[b] && a < b) }
	slices.SortFunc(members, func(a, b int) int {
		if c := cmp.Compare(count[b], count[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	pos := make([]int, len(g.members))
	for i, m := range members {
		pos[m] = i
	}
	fix := func(m int) {
		for i := pos[m]; i > 0 && before(members[i], members[i-1]); i-- {
			members[i], members[i-1] = members[i-1], members[i]
			pos[members[i]], pos[members[i-1]] = i, i-1
		}
		for i := pos[m]; i+1 < len(members) && before(members[i+1], members[i]); i++ {
			members[i], members[i+1] = members[i+1], members[i]
			pos[members[i]], pos[members[i+1]] = i, i+1
		}
	}
	for { // the original checked ctx every 1024 moves
		from, to := legacyMoveOne(g, members, owner, owned, count)
		if from < 0 {
			break
		}
		fix(from)
		fix(to)
	}
	return g.assignment(owner), nil
}

// legacyRackMatch reports whether member m's rack hosts a replica of global
// partition p.
func legacyRackMatch(g *group, m, p int) bool {
	rack := g.members[m].Rack
	if rack == "" {
		return false
	}
	t := g.topicOf[p]
	racks := g.topics[t].PartitionRacks
	if len(racks) == 0 {
		return false
	}
	return slices.Contains(racks[p-g.base[t]], rack)
}

// legacyHasRacks reports whether global partition p has any replica rack listed.
func legacyHasRacks(g *group, p int) bool {
	t := g.topicOf[p]
	racks := g.topics[t].PartitionRacks
	return len(racks) != 0 && len(racks[p-g.base[t]]) != 0
}

// legacyMoveOne moves one partition from the first member of members (sorted by
// count, descending) that owns a partition some subscriber with at least two
// fewer partitions could take. It returns the two members, or -1, -1.
func legacyMoveOne(g *group, members []int, owner []int, owned [][]int, count []int) (from, to int) {
	if len(members) == 0 {
		return -1, -1
	}
	low := count[members[len(members)-1]]
	for _, a := range members {
		if count[a]-low < 2 {
			return -1, -1
		}
		for i, p := range owned[a] {
			best, bestRack := -1, false
			for _, b := range g.subs[g.topicOf[p]] {
				if count[b] > count[a]-2 {
					continue
				}
				r := legacyRackMatch(g, b, p)
				if best < 0 || (r && !bestRack) || (r == bestRack && count[b] < count[best]) {
					best, bestRack = b, r
				}
			}
			if best >= 0 {
				owner[p] = best
				owned[a] = slices.Delete(owned[a], i, i+1)
				owned[best] = append(owned[best], p)
				count[a]--
				count[best]++
				return a, best
			}
		}
	}
	return -1, -1
}
