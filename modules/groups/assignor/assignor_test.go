package assignor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

var builtins = []Assignor{Uniform{}, Range{}}

func tid(n int) TopicID {
	var id TopicID
	id[0], id[15] = byte(n>>8), byte(n)
	id[7] = 0xa5
	return id
}

// topics builds topics t0, t1, ... with the given partition counts.
func topics(counts ...int32) map[TopicID]Topic {
	ts := make(map[TopicID]Topic, len(counts))
	for i, n := range counts {
		ts[tid(i)] = Topic{ID: tid(i), Name: fmt.Sprintf("t%d", i), Partitions: n}
	}
	return ts
}

// members builds n members m000, m001, ... subscribed to subs.
func members(n int, subs ...string) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{ID: fmt.Sprintf("m%03d", i), Topics: slices.Clone(subs)}
	}
	return ms
}

func names(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("t%d", i)
	}
	return s
}

func mustAssign(t *testing.T, a Assignor, in Input) Assignment {
	t.Helper()
	out, err := a.Assign(context.Background(), in)
	if err != nil {
		t.Fatalf("%s: %v", a.Name(), err)
	}
	if err := Check(in, out); err != nil {
		t.Fatalf("%s: %v\nout: %v", a.Name(), err, out)
	}
	for _, m := range in.Members {
		if _, ok := out[m.ID]; !ok {
			t.Fatalf("%s: member %q missing from the assignment", a.Name(), m.ID)
		}
	}
	return out
}

func count(a Assignment, id string) int {
	n := 0
	for _, ps := range a[id] {
		n += len(ps)
	}
	return n
}

// locallyBalanced fails t if some partition could move from its owner to a
// subscriber owning at least two fewer partitions.
func locallyBalanced(t *testing.T, in Input, out Assignment) {
	t.Helper()
	byName := map[string]TopicID{}
	for id, tp := range in.Topics {
		byName[tp.Name] = id
	}
	subscribed := func(m Member, id TopicID) bool {
		return slices.ContainsFunc(m.Topics, func(n string) bool { tid, ok := byName[n]; return ok && tid == id })
	}
	for _, a := range in.Members {
		for id, ps := range out[a.ID] {
			if len(ps) == 0 {
				continue
			}
			for _, b := range in.Members {
				if subscribed(b, id) && count(out, b.ID) <= count(out, a.ID)-2 {
					t.Fatalf("%s (%d partitions) could give topic %v to %s (%d)", a.ID, count(out, a.ID), id, b.ID, count(out, b.ID))
				}
			}
		}
	}
}

func TestHomogeneousSizes(t *testing.T) {
	for _, a := range builtins {
		for _, n := range []int{0, 1, 3, 20} {
			for _, p := range []int32{1, 12, 200} {
				for _, nt := range []int{1, 3} {
					t.Run(fmt.Sprintf("%s/members=%d/partitions=%d/topics=%d", a.Name(), n, p, nt), func(t *testing.T) {
						counts := make([]int32, nt)
						for i := range counts {
							counts[i] = p
						}
						in := Input{Members: members(n, names(nt)...), Topics: topics(counts...)}
						out := mustAssign(t, a, in)
						spread, homo := Balance(in, out)
						if !homo {
							t.Fatal("Balance: not homogeneous")
						}
						limit := 1
						if a.Name() == "range" {
							limit = nt // one extra per topic may land on the same member
						}
						if spread > limit {
							t.Fatalf("spread %d > %d: %v", spread, limit, out)
						}
						if n == 0 && len(out) != 0 {
							t.Fatalf("no members, got %v", out)
						}
					})
				}
			}
		}
	}
}

func TestEdgeCases(t *testing.T) {
	ts := topics(6, 4, 5)
	cases := []struct {
		name    string
		members []Member
		// empty lists member ids that must get nothing; unassigned lists
		// topic indices that must stay unassigned.
		empty      []string
		unassigned []int
	}{
		{name: "no subscriptions", members: append(members(2, "t0", "t1", "t2"), Member{ID: "z"}), empty: []string{"z"}},
		{name: "unknown topic only", members: append(members(2, "t0", "t1", "t2"), Member{ID: "z", Topics: []string{"nope"}}), empty: []string{"z"}},
		{name: "topic nobody subscribes", members: members(3, "t0", "t1"), unassigned: []int{2}},
		{name: "duplicate subscriptions", members: members(3, "t0", "t0", "t1", "t2", "t1")},
		{name: "nobody subscribes", members: append(members(2), Member{ID: "x", Topics: []string{"nope"}}), unassigned: []int{0, 1, 2}},
		{name: "heterogeneous", members: []Member{
			{ID: "a", Topics: []string{"t0"}},
			{ID: "b", Topics: []string{"t0", "t1"}},
			{ID: "c", Topics: []string{"t1", "t2"}},
			{ID: "d", Topics: []string{"t2"}},
		}},
	}
	for _, a := range builtins {
		for _, c := range cases {
			t.Run(a.Name()+"/"+c.name, func(t *testing.T) {
				in := Input{Members: c.members, Topics: ts}
				out := mustAssign(t, a, in)
				for _, id := range c.empty {
					if count(out, id) != 0 {
						t.Errorf("%s got %v", id, out[id])
					}
				}
				for _, ti := range c.unassigned {
					for id, tps := range out {
						if len(tps[tid(ti)]) != 0 {
							t.Errorf("%s got unsubscribed topic t%d", id, ti)
						}
					}
				}
				if a.Name() == "uniform" {
					locallyBalanced(t, in, out)
				}
			})
		}
	}
}

func TestUniformHeterogeneous(t *testing.T) {
	// a alone on t0 (10 partitions); everyone on t1 (10). a must not take t1.
	in := Input{
		Topics: topics(10, 10),
		Members: []Member{
			{ID: "a", Topics: []string{"t0", "t1"}},
			{ID: "b", Topics: []string{"t1"}},
			{ID: "c", Topics: []string{"t1"}},
		},
	}
	out := mustAssign(t, Uniform{}, in)
	locallyBalanced(t, in, out)
	if got := len(out["a"][tid(0)]); got != 10 {
		t.Fatalf("a has %d of t0, want 10", got)
	}
	if got := len(out["a"][tid(1)]); got != 0 {
		t.Fatalf("a has %d of t1, want 0: %v", got, out)
	}
}

func TestRangeLayout(t *testing.T) {
	in := Input{Topics: topics(7, 7, 2), Members: members(3, "t0", "t1", "t2")}
	out := mustAssign(t, Range{}, in)
	want := Assignment{
		"m000": {tid(0): {0, 1, 2}, tid(1): {0, 1, 2}, tid(2): {0}},
		"m001": {tid(0): {3, 4}, tid(1): {3, 4}, tid(2): {1}},
		"m002": {tid(0): {5, 6}, tid(1): {5, 6}},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %v\nwant %v", out, want)
	}

	// Per topic, only its subscribers count.
	in = Input{Topics: topics(4, 4), Members: []Member{
		{ID: "a", Topics: []string{"t0"}},
		{ID: "b", Topics: []string{"t0", "t1"}},
		{ID: "c", Topics: []string{"t1"}},
	}}
	out = mustAssign(t, Range{}, in)
	want = Assignment{
		"a": {tid(0): {0, 1}},
		"b": {tid(0): {2, 3}, tid(1): {0, 1}},
		"c": {tid(1): {2, 3}},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %v\nwant %v", out, want)
	}
}

func TestRangeCopartitionedAfterChurn(t *testing.T) {
	ts := topics(12, 12)
	ms := members(4, "t0", "t1")
	steps := []Step{{Leave: "m001"}, {Join: &Member{ID: "m009", Topics: []string{"t0", "t1"}}}, {Join: &Member{ID: "m000a", Topics: []string{"t0", "t1"}}}, {Leave: "m003"}}
	in := Input{Members: ms, Topics: ts}
	prev := mustAssign(t, Range{}, in)
	for i, s := range steps {
		var next []Member
		for _, m := range in.Members {
			if m.ID != s.Leave {
				m.Current = prev[m.ID]
				next = append(next, m)
			}
		}
		if s.Join != nil {
			next = append(next, *s.Join)
		}
		in = Input{Members: next, Topics: ts}
		prev = mustAssign(t, Range{}, in)
		for id, tps := range prev {
			if !slices.Equal(tps[tid(0)], tps[tid(1)]) {
				t.Fatalf("step %d: %s has t0 %v but t1 %v", i, id, tps[tid(0)], tps[tid(1)])
			}
		}
	}
}

func TestRacks(t *testing.T) {
	racks := []string{"a", "b", "c"}
	ts := topics(12, 30)
	for id, tp := range ts {
		tp.PartitionRacks = make([][]string, tp.Partitions)
		for p := range tp.PartitionRacks {
			tp.PartitionRacks[p] = []string{racks[p%3]}
		}
		ts[id] = tp
	}
	ms := members(3, "t0", "t1")
	for i := range ms {
		ms[i].Rack = racks[i]
	}
	in := Input{Members: ms, Topics: ts}
	out := mustAssign(t, Uniform{}, in)
	for i, m := range ms {
		for id, ps := range out[m.ID] {
			for _, p := range ps {
				if racks[p%3] != racks[i] {
					t.Errorf("%s (rack %s) got %v/%d on rack %s", m.ID, racks[i], id, p, racks[p%3])
				}
			}
		}
	}

	// Every replica in rack a, members in a, b, c: balance wins.
	for id, tp := range ts {
		for p := range tp.PartitionRacks {
			tp.PartitionRacks[p] = []string{"a"}
		}
		ts[id] = tp
	}
	out = mustAssign(t, Uniform{}, in)
	if spread, _ := Balance(in, out); spread > 1 {
		t.Fatalf("spread %d: %v", spread, out)
	}

	// Six members, two per rack, one topic of 12 with racks: each member gets
	// two partitions of its own rack.
	ts = topics(12)
	tp := ts[tid(0)]
	tp.PartitionRacks = make([][]string, 12)
	for p := range tp.PartitionRacks {
		tp.PartitionRacks[p] = []string{racks[p%3], "x"}
	}
	ts[tid(0)] = tp
	ms = members(6, "t0")
	for i := range ms {
		ms[i].Rack = racks[i%3]
	}
	in = Input{Members: ms, Topics: ts}
	out = mustAssign(t, Uniform{}, in)
	for i, m := range ms {
		ps := out[m.ID][tid(0)]
		if len(ps) != 2 {
			t.Fatalf("%s has %v", m.ID, ps)
		}
		for _, p := range ps {
			if racks[p%3] != ms[i].Rack {
				t.Errorf("%s (rack %s) got partition %d", m.ID, ms[i].Rack, p)
			}
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// randomChurn makes count steps, each at random either the leave of one of the members
// ids names (while more than keep are left) or the join of join(i) for step i.
func randomChurn(r *rand.Rand, ids []string, count, keep int, join func(i int) *Member) []Step {
	ids = slices.Clone(ids)
	var steps []Step
	for i := range count {
		if len(ids) > keep && r.IntN(2) == 0 {
			k := r.IntN(len(ids))
			steps = append(steps, Step{Leave: ids[k]})
			ids = slices.Delete(ids, k, k+1)
		} else {
			m := join(i)
			steps = append(steps, Step{Join: m})
			ids = append(ids, m.ID)
		}
	}
	return steps
}

// stickinessViolations lists where a scenario that started with n members of a
// homogeneous group, over total partitions, broke what the uniform assignor promises
// at each step: a join moves at most ceil(total/(members after)) partitions, a leave
// moves none of the staying members' partitions, the group keeps the size the steps
// give it, stays homogeneous, and no member owns more than one partition above another.
func stickinessViolations(res []StepResult, steps []Step, n, total int) []string {
	var out []string
	size := n
	for i, r := range res {
		if steps[i].Join != nil {
			if bound := ceilDiv(total, size+1); r.Moved > bound {
				out = append(out, fmt.Sprintf("step %d (join %d→%d): moved %d > %d", i, size, size+1, r.Moved, bound))
			}
			size++
		} else {
			if r.Moved != 0 {
				out = append(out, fmt.Sprintf("step %d (leave): moved %d partitions of staying members", i, r.Moved))
			}
			size--
		}
		if r.Spread > 1 || !r.Homogeneous || r.Members != size {
			out = append(out, fmt.Sprintf("step %d: %+v, want spread at most 1, homogeneous, %d members", i, r, size))
		}
	}
	return out
}

func TestUniformStickiness(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 19} {
		for _, p := range []int32{1, 12, 200} {
			for _, nt := range []int{1, 3} {
				t.Run(fmt.Sprintf("members=%d/partitions=%d/topics=%d", n, p, nt), func(t *testing.T) {
					counts := make([]int32, nt)
					for i := range counts {
						counts[i] = p
					}
					ts := topics(counts...)
					total := int(p) * nt
					subs := names(nt)
					steps := []Step{
						{Join: &Member{ID: "new1", Topics: subs}},
						{Leave: "m000"},
						{Join: &Member{ID: "new2", Topics: subs}},
						{Leave: "new1"},
					}
					res, err := Scenario(context.Background(), Uniform{}, ts, members(n, subs...), steps)
					if err != nil {
						t.Fatal(err)
					}
					for _, v := range stickinessViolations(res, steps, n, total) {
						t.Error(v)
					}
				})
			}
		}
	}
}

func TestRangeStickiness(t *testing.T) {
	// Appending a member whose id sorts last only moves what its quota takes.
	ts := topics(12)
	res, err := Scenario(context.Background(), Range{}, ts, members(3, "t0"), []Step{
		{Join: &Member{ID: "z", Topics: []string{"t0"}}},
		{Leave: "z"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Moved != 3 || res[1].Moved != 0 || res[1].Released != 3 {
		t.Fatalf("%+v", res)
	}

	// m000 {0,1,2}, m001 {3,4}, m002 {5,6}; "a" joins, sorting first. Base
	// quota 1, three extras: they go to the members holding more than one,
	// so only one partition moves (positional extras would move two).
	in := Input{Topics: topics(7), Members: members(3, "t0")}
	out := mustAssign(t, Range{}, in)
	for i := range in.Members {
		in.Members[i].Current = out[in.Members[i].ID]
	}
	in.Members = append(in.Members, Member{ID: "a", Topics: []string{"t0"}})
	out = mustAssign(t, Range{}, in)
	want := Assignment{"a": {tid(0): {2}}, "m000": {tid(0): {0, 1}}, "m001": {tid(0): {3, 4}}, "m002": {tid(0): {5, 6}}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %v\nwant %v", out, want)
	}
}

// Random joins and leaves in a homogeneous group: uniform stays balanced, a
// join moves at most ceil(P/(N+1)), a leave moves nothing but the leaver's.
func TestUniformRandomChurn(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 60 {
		counts := make([]int32, 1+r.IntN(4))
		total := 0
		for i := range counts {
			counts[i] = int32(r.IntN(60))
			total += int(counts[i])
		}
		subs := names(len(counts))
		n := 1 + r.IntN(10)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("m%03d", i)
		}
		steps := randomChurn(r, ids, 15, 1, func(i int) *Member {
			return &Member{ID: fmt.Sprintf("j%d-%d", i, r.IntN(1000)), Topics: subs}
		})
		ts := topics(counts...)
		racks := []string{"a", "b", "c"}
		withRacks := round%2 == 1
		if withRacks {
			for id, tp := range ts {
				tp.PartitionRacks = make([][]string, tp.Partitions)
				for p := range tp.PartitionRacks {
					tp.PartitionRacks[p] = []string{racks[r.IntN(3)]}
				}
				ts[id] = tp
			}
			for _, s := range steps {
				if s.Join != nil {
					s.Join.Rack = racks[r.IntN(3)]
				}
			}
		}
		initial := members(n, subs...)
		for i := range initial {
			if withRacks {
				initial[i].Rack = racks[r.IntN(3)]
			}
		}
		res, err := Scenario(context.Background(), Uniform{}, ts, initial, steps)
		if err != nil {
			t.Fatal(err)
		}
		if v := stickinessViolations(res, steps, n, total); len(v) > 0 {
			t.Fatalf("round %d: %s", round, strings.Join(v, "; "))
		}
	}
}

// Feeding an assignor its own output must change nothing.
func TestFixedPoint(t *testing.T) {
	for _, a := range builtins {
		t.Run(a.Name(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			for range 200 {
				in := randomInput(r)
				out := mustAssign(t, a, in)
				for i := range in.Members {
					in.Members[i].Current = out[in.Members[i].ID]
				}
				again := mustAssign(t, a, in)
				if !reflect.DeepEqual(out, again) {
					t.Fatalf("not a fixed point:\n%v\n%v", out, again)
				}
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, a := range builtins {
		t.Run(a.Name(), func(t *testing.T) {
			for range 100 {
				in := randomInput(r)
				first := mustAssign(t, a, in)
				if second := mustAssign(t, a, in); !reflect.DeepEqual(first, second) {
					t.Fatalf("same input, different output")
				}
				// Shuffle member order, subscription order and current lists.
				sh := Input{Topics: in.Topics, Members: slices.Clone(in.Members)}
				r.Shuffle(len(sh.Members), func(i, j int) { sh.Members[i], sh.Members[j] = sh.Members[j], sh.Members[i] })
				for i, m := range sh.Members {
					m.Topics = slices.Clone(m.Topics)
					r.Shuffle(len(m.Topics), func(i, j int) { m.Topics[i], m.Topics[j] = m.Topics[j], m.Topics[i] })
					cur := make(map[TopicID][]int32, len(m.Current))
					for id, ps := range m.Current {
						ps = slices.Clone(ps)
						r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
						cur[id] = ps
					}
					m.Current = cur
					sh.Members[i] = m
				}
				if got := mustAssign(t, a, sh); !reflect.DeepEqual(first, got) {
					t.Fatalf("shuffled input, different output")
				}
			}
		})
	}
}

// randomInput makes a group with random topics, subscriptions, racks and
// current assignments, including junk the assignors must ignore.
func randomInput(r *rand.Rand) Input {
	nt := r.IntN(6)
	ts := make(map[TopicID]Topic, nt)
	racks := []string{"", "a", "b", "c"}
	for i := range nt {
		tp := Topic{ID: tid(i), Name: fmt.Sprintf("t%d", i), Partitions: int32(r.IntN(40))}
		if r.IntN(2) == 0 {
			tp.PartitionRacks = make([][]string, tp.Partitions)
			for p := range tp.PartitionRacks {
				tp.PartitionRacks[p] = []string{racks[1+r.IntN(3)], racks[r.IntN(4)]}
			}
		}
		ts[tp.ID] = tp
	}
	homogeneous := r.IntN(2) == 0
	shared := randomSubs(r, nt)
	ms := make([]Member, r.IntN(25))
	for i := range ms {
		m := Member{ID: fmt.Sprintf("m%d", r.Int32()), Rack: racks[r.IntN(4)], Topics: shared}
		if !homogeneous {
			m.Topics = randomSubs(r, nt)
		}
		if r.IntN(3) > 0 {
			m.Current = map[TopicID][]int32{}
			for range r.IntN(8) {
				id := tid(r.IntN(nt + 2))
				m.Current[id] = append(m.Current[id], int32(r.IntN(45))-2)
			}
		}
		ms[i] = m
	}
	slices.SortFunc(ms, func(a, b Member) int { return cmpString(a.ID, b.ID) })
	ms = slices.CompactFunc(ms, func(a, b Member) bool { return a.ID == b.ID })
	return Input{Members: ms, Topics: ts}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func randomSubs(r *rand.Rand, nt int) []string {
	var s []string
	for i := range nt + 1 { // t<nt> does not exist
		if r.IntN(2) == 0 {
			s = append(s, fmt.Sprintf("t%d", i))
		}
	}
	return s
}

func TestRandomProperty(t *testing.T) {
	for _, a := range builtins {
		t.Run(a.Name(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(42, uint64(len(a.Name()))))
			for i := range 1000 {
				in := randomInput(r)
				out, err := a.Assign(context.Background(), in)
				if err != nil {
					t.Fatalf("input %d: %v", i, err)
				}
				if err := Check(in, out); err != nil {
					t.Fatalf("input %d: %v", i, err)
				}
				if a.Name() == "uniform" {
					if spread, homo := Balance(in, out); homo && spread > 1 {
						t.Fatalf("input %d: homogeneous spread %d", i, spread)
					}
					locallyBalanced(t, in, out)
				}
			}
		})
	}
}

func TestInvalidInput(t *testing.T) {
	good := topics(3)
	bad := func(f func(*Topic)) map[TopicID]Topic {
		ts := topics(3, 2)
		tp := ts[tid(1)]
		f(&tp)
		ts[tid(1)] = tp
		return ts
	}
	cases := []struct {
		name string
		in   Input
	}{
		{"empty member id", Input{Topics: good, Members: []Member{{ID: ""}}}},
		{"duplicate member id", Input{Topics: good, Members: []Member{{ID: "a"}, {ID: "b"}, {ID: "a"}}}},
		{"key differs from id", Input{Topics: bad(func(tp *Topic) { tp.ID = tid(9) })}},
		{"negative partitions", Input{Topics: bad(func(tp *Topic) { tp.Partitions = -1 })}},
		{"rack list length", Input{Topics: bad(func(tp *Topic) { tp.PartitionRacks = [][]string{{"a"}} })}},
		{"duplicate topic name", Input{Topics: bad(func(tp *Topic) { tp.Name = "t0" })}},
	}
	for _, a := range builtins {
		for _, c := range cases {
			t.Run(a.Name()+"/"+c.name, func(t *testing.T) {
				if _, err := a.Assign(context.Background(), c.in); !errors.Is(err, ErrInvalidInput) {
					t.Fatalf("got %v", err)
				}
			})
		}
	}
}

func TestCheckRejects(t *testing.T) {
	in := Input{Topics: topics(2, 2), Members: []Member{
		{ID: "a", Topics: []string{"t0"}},
		{ID: "b", Topics: []string{"t0", "t1"}},
	}}
	cases := []struct {
		name string
		out  Assignment
	}{
		{"unknown member", Assignment{"a": {tid(0): {0, 1}}, "b": {tid(1): {0, 1}}, "c": {}}},
		{"unknown topic", Assignment{"a": {tid(0): {0, 1}}, "b": {tid(1): {0, 1}, tid(5): {0}}}},
		{"out of range", Assignment{"a": {tid(0): {0, 1, 2}}, "b": {tid(1): {0, 1}}}},
		{"negative", Assignment{"a": {tid(0): {-1, 0, 1}}, "b": {tid(1): {0, 1}}}},
		{"twice", Assignment{"a": {tid(0): {0, 1}}, "b": {tid(0): {1}, tid(1): {0, 1}}}},
		{"repeated in a list", Assignment{"a": {tid(0): {0, 0, 1}}, "b": {tid(1): {0, 1}}}},
		{"unsorted", Assignment{"a": {tid(0): {1, 0}}, "b": {tid(1): {0, 1}}}},
		{"unassigned", Assignment{"a": {tid(0): {0, 1}}, "b": {tid(1): {1}}}},
		{"not subscribed", Assignment{"a": {tid(0): {0, 1}, tid(1): {0}}, "b": {tid(1): {1}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Check(in, c.out); !errors.Is(err, ErrInvalidAssignment) {
				t.Fatalf("got %v", err)
			}
		})
	}
	ok := Assignment{"a": {tid(0): {0}}, "b": {tid(0): {1}, tid(1): {0, 1}}}
	if err := Check(in, ok); err != nil {
		t.Fatal(err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	ts := topics(3)
	tp := ts[tid(0)]
	tp.PartitionRacks = [][]string{{"a"}, {"b", "c"}, nil}
	ts[tid(0)] = tp
	in := Input{Topics: ts, Members: []Member{{ID: "a", InstanceID: "i", Rack: "r", Topics: []string{"t0"}, Current: map[TopicID][]int32{tid(0): {1}}}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back Input
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, back) {
		t.Fatalf("%s\n%+v", b, back)
	}
	if s := tid(0).String(); len(s) != 22 {
		t.Fatalf("topic id text %q", s)
	}
	var id TopicID
	if err := id.UnmarshalText([]byte("short")); err == nil {
		t.Fatal("accepted a short id")
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, a := range builtins {
		if _, err := a.Assign(ctx, Input{Topics: topics(3), Members: members(2, "t0")}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: got %v", a.Name(), err)
		}
	}
}

// Assignors are shared by all groups: hammer them from many goroutines with
// one shared Input (run with -race).
func TestConcurrent(t *testing.T) {
	in := Input{Topics: topics(50, 30), Members: members(7, "t0", "t1")}
	in.Members[0].Current = map[TopicID][]int32{tid(0): {1, 2, 3}}
	var wg sync.WaitGroup
	for _, a := range builtins {
		want := mustAssign(t, a, in)
		for range 8 {
			wg.Go(func() {
				for range 20 {
					out, err := a.Assign(context.Background(), in)
					if err != nil || !reflect.DeepEqual(out, want) {
						t.Errorf("%s: concurrent call differs (%v)", a.Name(), err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

// Random groups (heterogeneous, racks, junk in Current) through random joins
// and leaves: every assignment passes Check, which Scenario runs on each.
func TestRandomScenario(t *testing.T) {
	for _, a := range builtins {
		t.Run(a.Name(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, uint64(len(a.Name()))))
			for round := range 100 {
				in := randomInput(r)
				ids := make([]string, 0, len(in.Members))
				for _, m := range in.Members {
					ids = append(ids, m.ID)
				}
				steps := randomChurn(r, ids, 10, 0, func(i int) *Member {
					return &Member{ID: fmt.Sprintf("join%d", i), Topics: randomSubs(r, len(in.Topics))}
				})
				if _, err := Scenario(context.Background(), a, in.Topics, in.Members, steps); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
		})
	}
}

func TestBuiltin(t *testing.T) {
	for _, name := range []string{"uniform", "range"} {
		if a := Builtin(name); a == nil || a.Name() != name {
			t.Errorf("Builtin(%q) = %v", name, a)
		}
	}
	if a := Builtin("sticky"); a != nil {
		t.Errorf("Builtin(sticky) = %v", a)
	}
}
