package share

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

type assignment = map[string]map[assignor.TopicID][]int32

func topicsOf(parts map[string]int32) map[assignor.TopicID]Topic {
	out := map[assignor.TopicID]Topic{}
	for n, p := range parts {
		out[topicID(n)] = Topic{ID: topicID(n), Name: n, Partitions: p}
	}
	return out
}

func TestAssignExamples(t *testing.T) {
	a, b := topicID("a"), topicID("b")
	tests := []struct {
		name     string
		members  []Member
		topics   map[string]int32
		previous assignment
		want     assignment
	}{
		{
			name:    "no members",
			topics:  map[string]int32{"a": 3},
			members: nil,
			want:    assignment{},
		},
		{
			name:    "one member takes all",
			topics:  map[string]int32{"a": 3},
			members: []Member{{ID: "m1", Topics: []string{"a"}}},
			want:    assignment{"m1": {a: {0, 1, 2}}},
		},
		{
			name:    "fresh split: the first by id gets the extra",
			topics:  map[string]int32{"a": 5},
			members: []Member{{ID: "m2", Topics: []string{"a"}}, {ID: "m1", Topics: []string{"a"}}},
			want:    assignment{"m1": {a: {0, 1, 2}}, "m2": {a: {3, 4}}},
		},
		{
			name:    "extras rotate over topics",
			topics:  map[string]int32{"a": 3, "b": 3},
			members: []Member{{ID: "m1", Topics: []string{"a", "b"}}, {ID: "m2", Topics: []string{"b", "a"}}},
			want:    assignment{"m1": {a: {0, 1}, b: {0}}, "m2": {a: {2}, b: {1, 2}}},
		},
		{
			name:     "sticky: a joiner takes the partitions given up (the highest over quota)",
			topics:   map[string]int32{"a": 4},
			members:  []Member{{ID: "m1", Topics: []string{"a"}}, {ID: "m2", Topics: []string{"a"}}, {ID: "m0", Topics: []string{"a"}}},
			previous: assignment{"m1": {a: {1, 3}}, "m2": {a: {0, 2}}},
			want:     assignment{"m0": {a: {2}}, "m1": {a: {1, 3}}, "m2": {a: {0}}},
		},
		{
			name:     "sticky: the survivors keep theirs when one leaves",
			topics:   map[string]int32{"a": 4},
			members:  []Member{{ID: "m1", Topics: []string{"a"}}, {ID: "m2", Topics: []string{"a"}}},
			previous: assignment{"m0": {a: {3}}, "m1": {a: {1}}, "m2": {a: {0, 2}}},
			want:     assignment{"m1": {a: {1, 3}}, "m2": {a: {0, 2}}},
		},
		{
			name:    "more members than partitions",
			topics:  map[string]int32{"a": 2},
			members: []Member{{ID: "m1", Topics: []string{"a"}}, {ID: "m2", Topics: []string{"a"}}, {ID: "m3", Topics: []string{"a"}}},
			want:    assignment{"m1": {a: {0}}, "m2": {a: {0}}, "m3": {a: {1}}},
		},
		{
			name:     "more members than partitions, sticky",
			topics:   map[string]int32{"a": 2},
			members:  []Member{{ID: "m1", Topics: []string{"a"}}, {ID: "m2", Topics: []string{"a"}}, {ID: "m3", Topics: []string{"a"}}},
			previous: assignment{"m1": {a: {1}}, "m2": {a: {0}}},
			want:     assignment{"m1": {a: {1}}, "m2": {a: {0}}, "m3": {a: {0}}},
		},
		{
			name:     "from exclusive to shared: each keeps its lowest partition",
			topics:   map[string]int32{"a": 3},
			members:  []Member{{ID: "m1", Topics: []string{"a"}}, {ID: "m2", Topics: []string{"a"}}, {ID: "m3", Topics: []string{"a"}}, {ID: "m4", Topics: []string{"a"}}},
			previous: assignment{"m1": {a: {1, 2}}, "m2": {a: {0}}},
			want:     assignment{"m1": {a: {1}}, "m2": {a: {0}}, "m3": {a: {0}}, "m4": {a: {2}}},
		},
		{
			name:     "from shared to exclusive: a partition several had goes to the first",
			topics:   map[string]int32{"a": 2},
			members:  []Member{{ID: "m2", Topics: []string{"a"}}, {ID: "m3", Topics: []string{"a"}}},
			previous: assignment{"m1": {a: {0}}, "m2": {a: {0}}, "m3": {a: {0}}},
			want:     assignment{"m2": {a: {0}}, "m3": {a: {1}}},
		},
		{
			name:    "heterogeneous subscriptions",
			topics:  map[string]int32{"a": 2, "b": 1},
			members: []Member{{ID: "m1", Topics: []string{"a"}}, {ID: "m2", Topics: []string{"a", "b"}}, {ID: "m3", Topics: []string{"b"}}},
			want:    assignment{"m1": {a: {0}}, "m2": {a: {1}, b: {0}}, "m3": {b: {0}}},
		},
		{
			name:     "garbage in previous and subscriptions is ignored",
			topics:   map[string]int32{"a": 2, "b": 0},
			members:  []Member{{ID: "m1", Topics: []string{"a", "a", "b", "missing"}}, {ID: "m1", Topics: []string{"a"}}},
			previous: assignment{"m1": {a: {7, -1, 1, 1}, topicID("x"): {0}}, "ghost": {a: {0}}},
			want:     assignment{"m1": {a: {0, 1}}},
		},
		{
			name:    "members subscribed to nothing get an empty entry",
			topics:  map[string]int32{"a": 1},
			members: []Member{{ID: "m1"}, {ID: "m2", Topics: []string{"a"}}},
			want:    assignment{"m1": {}, "m2": {a: {0}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Assign(tc.members, topicsOf(tc.topics), tc.previous)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

// randomInput builds members with random subscriptions to random topics.
func randomInput(rng *rand.Rand) ([]Member, map[assignor.TopicID]Topic) {
	topics := map[assignor.TopicID]Topic{}
	var names []string
	for i := range 1 + rng.IntN(5) {
		n := fmt.Sprintf("t%d", i)
		names = append(names, n)
		topics[topicID(n)] = Topic{ID: topicID(n), Name: n, Partitions: int32(rng.IntN(9))}
	}
	var members []Member
	for i := range rng.IntN(12) {
		m := Member{ID: fmt.Sprintf("m%02d", i)}
		for _, n := range names {
			if rng.IntN(3) > 0 {
				m.Topics = append(m.Topics, n)
			}
		}
		if rng.IntN(8) == 0 {
			m.Topics = append(m.Topics, "missing")
		}
		members = append(members, m)
	}
	return members, topics
}

// checkAssign verifies Assign's rules for one input and output.
func checkAssign(t *testing.T, members []Member, topics map[assignor.TopicID]Topic, out assignment) {
	t.Helper()
	subs := map[string][]string{}
	for _, m := range members {
		if _, ok := out[m.ID]; !ok {
			t.Fatalf("member %s missing from the output", m.ID)
		}
		for _, n := range m.Topics {
			if !slices.Contains(subs[n], m.ID) {
				subs[n] = append(subs[n], m.ID)
			}
		}
	}
	for id := range out {
		if !slices.ContainsFunc(members, func(m Member) bool { return m.ID == id }) {
			t.Fatalf("output names %s, not a member", id)
		}
	}
	for id, a := range out {
		for top, ps := range a {
			tp, ok := topics[top]
			if !ok || !slices.Contains(subs[tp.Name], id) {
				t.Fatalf("%s assigned topic %v it does not subscribe to", id, top)
			}
			if len(ps) == 0 || !slices.Equal(ps, normalize(ps)) || ps[len(ps)-1] >= tp.Partitions {
				t.Fatalf("%s: bad partition list %v of %d", id, ps, tp.Partitions)
			}
		}
	}
	for k, tp := range topics {
		ms := subs[tp.Name]
		if tp.Partitions == 0 || len(ms) == 0 {
			continue
		}
		load := make([]int, tp.Partitions)
		lo, hi := 1<<30, 0
		for _, id := range ms {
			ps := out[id][k]
			lo, hi = min(lo, len(ps)), max(hi, len(ps))
			for _, p := range ps {
				load[p]++
			}
		}
		if lo == 0 || hi-lo > 1 {
			t.Fatalf("%s: members have %d to %d partitions", tp.Name, lo, hi)
		}
		n, m := int(tp.Partitions), len(ms)
		for p, l := range load {
			switch {
			case m <= n && l != 1:
				t.Fatalf("%s/%d: %d holders with %d members for %d partitions", tp.Name, p, l, m, n)
			case m > n && (l < m/n || l > (m+n-1)/n):
				t.Fatalf("%s/%d: %d holders with %d members for %d partitions", tp.Name, p, l, m, n)
			}
		}
		if m > n && hi != 1 {
			t.Fatalf("%s: a member got %d partitions with more members than partitions", tp.Name, hi)
		}
	}
}

func shuffled(rng *rand.Rand, members []Member) []Member {
	out := make([]Member, len(members))
	for i, m := range members {
		m.Topics = slices.Clone(m.Topics)
		rng.Shuffle(len(m.Topics), func(i, j int) { m.Topics[i], m.Topics[j] = m.Topics[j], m.Topics[i] })
		out[i] = m
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Random inputs: every rule holds, the output is deterministic and a fixed
// point, and the input is not modified.
func TestAssignProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		members, topics := randomInput(rng)
		var previous assignment
		if i%2 == 1 { // a random previous assignment, garbage included
			previous = assignment{}
			for _, m := range members {
				a := map[assignor.TopicID][]int32{}
				for id, tp := range topics {
					for range rng.IntN(4) {
						a[id] = append(a[id], int32(rng.IntN(int(tp.Partitions)+2))-1)
					}
				}
				previous[m.ID] = a
			}
		}
		membersCopy, prevCopy := slices.Clone(members), cloneAssignment(previous)
		out := Assign(members, topics, previous)
		checkAssign(t, members, topics, out)
		if !reflect.DeepEqual(members, membersCopy) || !reflect.DeepEqual(previous, prevCopy) {
			t.Fatal("Assign modified its input")
		}
		if again := Assign(shuffled(rng, members), topics, previous); !reflect.DeepEqual(again, out) {
			t.Fatalf("not deterministic:\n%v\n%v", out, again)
		}
		if fixed := Assign(members, topics, out); !reflect.DeepEqual(fixed, out) {
			t.Fatalf("not a fixed point:\n%v\n%v", out, fixed)
		}
	}
}

func cloneAssignment(a assignment) assignment {
	if a == nil {
		return nil
	}
	out := assignment{}
	for id, m := range a {
		out[id] = map[assignor.TopicID][]int32{}
		for t, ps := range m {
			out[id][t] = slices.Clone(ps)
		}
	}
	return out
}

// Stickiness: with members <= partitions, a member joining a balanced group
// only takes partitions others give up (each old member keeps a subset of
// what it had), and a member leaving only frees its own (each survivor keeps
// all it had).
func TestAssignSticky(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	id := topicID("t")
	for range 500 {
		parts := int32(1 + rng.IntN(30))
		topics := map[assignor.TopicID]Topic{id: {ID: id, Name: "t", Partitions: parts}}
		n := 1 + rng.IntN(int(parts))
		var members []Member
		for i := range n {
			members = append(members, Member{ID: fmt.Sprintf("m%03d", rng.IntN(1000)*10+i), Topics: []string{"t"}})
		}
		before := Assign(members, topics, nil)
		if n < int(parts) {
			joined := append(slices.Clone(members), Member{ID: fmt.Sprintf("new%d", rng.IntN(100)), Topics: []string{"t"}})
			after := Assign(joined, topics, before)
			checkAssign(t, joined, topics, after)
			moved := 0
			for _, m := range members {
				if d := difference(after[m.ID][id], before[m.ID][id]); len(d) > 0 {
					t.Fatalf("%s gained %v when a member joined", m.ID, d)
				}
				moved += len(before[m.ID][id]) - len(after[m.ID][id])
			}
			if want := int(parts) / (n + 1); moved < want || moved > want+1 {
				t.Fatalf("%d partitions moved to the joiner, want about %d", moved, want)
			}
		}
		if n > 1 {
			gone := rng.IntN(n)
			left := slices.Delete(slices.Clone(members), gone, gone+1)
			after := Assign(left, topics, before)
			checkAssign(t, left, topics, after)
			for _, m := range left {
				if d := difference(before[m.ID][id], after[m.ID][id]); len(d) > 0 {
					t.Fatalf("%s lost %v when a member left", m.ID, d)
				}
			}
		}
	}
}

// difference returns the elements of a not in b (both ascending).
func difference(a, b []int32) []int32 {
	var out []int32
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}

// Balance over topics: with homogeneous subscriptions to many topics on a
// fresh group, members' totals differ by at most one.
func TestAssignBalanceOverTopics(t *testing.T) {
	parts := map[string]int32{}
	for i := range 10 {
		parts[fmt.Sprintf("t%d", i)] = 5
	}
	var members []Member
	for i := range 3 {
		m := Member{ID: fmt.Sprintf("m%d", i)}
		for n := range parts {
			m.Topics = append(m.Topics, n)
		}
		members = append(members, m)
	}
	out := Assign(members, topicsOf(parts), nil)
	lo, hi := 1<<30, 0
	for _, a := range out {
		lo, hi = min(lo, count(a)), max(hi, count(a))
	}
	if hi-lo > 1 {
		t.Fatalf("totals %d to %d", lo, hi)
	}
}

func BenchmarkAssign(b *testing.B) {
	topics := map[assignor.TopicID]Topic{}
	var names []string
	for i := range 100 {
		n := fmt.Sprintf("topic-%d", i)
		names = append(names, n)
		topics[topicID(n)] = Topic{ID: topicID(n), Name: n, Partitions: 64}
	}
	var members []Member
	for i := range 200 {
		members = append(members, Member{ID: fmt.Sprintf("member-%03d", i), Topics: names})
	}
	prev := Assign(members, topics, nil)
	b.ResetTimer()
	for b.Loop() {
		Assign(members, topics, prev)
	}
}
