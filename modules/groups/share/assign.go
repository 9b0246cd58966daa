package share

import (
	"slices"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// Member is a member as Assign sees it.
type Member struct {
	ID     string
	Topics []string // names of the subscribed topics, any order, duplicates allowed
}

// Topic is the metadata of one topic as Assign sees it.
type Topic struct {
	ID         assignor.TopicID
	Name       string
	Partitions int32
}

// Assign is the share assignor ("simple"): it spreads each topic's
// partitions over the members subscribed to it, independently per topic.
//
//   - Members <= partitions: every partition goes to exactly one member; the
//     counts of a topic's subscribers differ by at most one, and a member
//     keeps as many of its previous partitions as its share allows (its
//     lowest ones; a partition several members had stays with the first by
//     id). Which members get the larger share: those keeping more, then
//     those given fewer partitions so far (topics go in id order), then
//     the lower member id; so a fresh group does not give every topic's
//     extra partition to the same member.
//   - Members > partitions: every member gets exactly one partition of the
//     topic and each partition is shared by floor or ceil of
//     members/partitions members; a member keeps its lowest previous
//     partition that still has room, the partitions most members want get
//     the larger share.
//
// previous is the last assignment (member id → topic id → partitions);
// entries for unknown members, topics not in topics (keyed by id; Topic.ID
// is not consulted), out-of-range or repeated partitions are ignored.
// Duplicate member ids are merged (their subscriptions joined). The result
// has an entry for every member (an empty map when it gets nothing), lists
// partitions ascending, never an empty list, and depends only on the content
// of its input, not on orders. Fed its own output as previous, with the same
// members and topics, it returns that output. Assign does not modify its
// arguments.
func Assign(members []Member, topics map[assignor.TopicID]Topic, previous map[string]map[assignor.TopicID][]int32) map[string]map[assignor.TopicID][]int32 {
	subs := make(map[string]map[string]bool, len(members))
	for _, m := range members {
		s := subs[m.ID]
		if s == nil {
			s = map[string]bool{}
			subs[m.ID] = s
		}
		for _, n := range m.Topics {
			s[n] = true
		}
	}
	ids := make([]string, 0, len(subs))
	for id := range subs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make(map[string]map[assignor.TopicID][]int32, len(ids))
	byName := map[string][]int{} // topic name → subscribers (indices in ids), ascending
	for i, id := range ids {
		out[id] = map[assignor.TopicID][]int32{}
		for n := range subs[id] {
			byName[n] = append(byName[n], i)
		}
	}
	keys := make([]assignor.TopicID, 0, len(topics))
	for k := range topics {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, assignor.TopicID.Compare)

	load := make([]int, len(ids)) // partitions given so far, over topics, by index in ids
	for _, k := range keys {
		t := topics[k]
		ms := byName[t.Name]
		if t.Partitions <= 0 || len(ms) == 0 {
			continue
		}
		prev := make([][]int32, len(ms))
		for i, m := range ms {
			prev[i] = inRange(previous[ids[m]][k], t.Partitions)
		}
		var got [][]int32
		if len(ms) <= int(t.Partitions) {
			got = exclusive(ms, t.Partitions, prev, load)
		} else {
			got = shared(len(ms), t.Partitions, prev)
		}
		for i, m := range ms {
			if len(got[i]) > 0 {
				out[ids[m]][k] = got[i]
				load[m] += len(got[i])
			}
		}
	}
	return out
}

// inRange returns the partitions of ps in [0, n), ascending and unique.
func inRange(ps []int32, n int32) []int32 {
	out := make([]int32, 0, len(ps))
	for _, p := range ps {
		if p >= 0 && p < n {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// exclusive gives each of n partitions to exactly one of members ms
// (len(ms) <= n; indices in the sorted member ids, ascending), balanced and
// sticky; prev[i] is ms[i]'s previous partitions, load (by member index)
// what each member got of earlier topics.
func exclusive(ms []int, n int32, prev [][]int32, load []int) [][]int32 {
	owner := make([]int, n)
	for p := range owner {
		owner[p] = -1
	}
	kept := make([][]int32, len(ms))
	for i := range ms {
		for _, p := range prev[i] {
			if owner[p] < 0 {
				owner[p] = i
				kept[i] = append(kept[i], p)
			}
		}
	}
	base, extra := int(n)/len(ms), int(n)%len(ms)
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if d := len(kept[b]) - len(kept[a]); d != 0 {
			return d
		}
		if d := load[ms[a]] - load[ms[b]]; d != 0 {
			return d
		}
		return ms[a] - ms[b]
	})
	quota := make([]int, len(ms))
	for r, i := range order {
		quota[i] = base
		if r < extra {
			quota[i]++
		}
	}
	for i := range ms {
		if len(kept[i]) > quota[i] {
			for _, p := range kept[i][quota[i]:] {
				owner[p] = -1
			}
			kept[i] = kept[i][:quota[i]]
		}
	}
	next := 0
	for i := range ms {
		for len(kept[i]) < quota[i] {
			for owner[next] >= 0 {
				next++
			}
			owner[next] = i
			kept[i] = append(kept[i], int32(next))
		}
		slices.Sort(kept[i])
	}
	return kept
}

// shared gives each of m members (m > n) one of n partitions, each
// partition to floor(m/n) or ceil(m/n) members; prev[i] is member i's
// previous partitions.
func shared(m int, n int32, prev [][]int32) [][]int32 {
	demand := make([]int, n)
	for _, ps := range prev {
		if len(ps) > 0 {
			demand[ps[0]]++
		}
	}
	base, extra := m/int(n), m%int(n)
	byDemand := make([]int, n)
	for p := range byDemand {
		byDemand[p] = p
	}
	slices.SortStableFunc(byDemand, func(a, b int) int { return demand[b] - demand[a] })
	room := make([]int, n)
	for r, p := range byDemand {
		room[p] = base
		if r < extra {
			room[p]++
		}
	}
	got := make([][]int32, m)
	for i, ps := range prev {
		for _, p := range ps {
			if room[p] > 0 {
				room[p]--
				got[i] = []int32{p}
				break
			}
		}
	}
	next := 0
	for i := range got {
		if got[i] != nil {
			continue
		}
		for room[next] == 0 {
			next++
		}
		room[next]--
		got[i] = []int32{int32(next)}
	}
	return got
}
