package assignor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// withRacks returns ts with topic i's partition p on the racks racks(i, p)
// (nil: no rack known for it).
func withRacks(ts map[TopicID]Topic, racks func(i, p int) []string) map[TopicID]Topic {
	out := make(map[TopicID]Topic, len(ts))
	for id, tp := range ts {
		i := int(id[0])<<8 | int(id[15])
		tp.PartitionRacks = make([][]string, tp.Partitions)
		for p := range tp.PartitionRacks {
			tp.PartitionRacks[p] = racks(i, p)
		}
		out[id] = tp
	}
	return out
}

// racked builds members with the given ids and racks ("" for none), all
// subscribed to subs.
func racked(subs []string, idRack ...string) []Member {
	ms := make([]Member, 0, len(idRack)/2)
	for i := 0; i+1 < len(idRack); i += 2 {
		ms = append(ms, Member{ID: idRack[i], Rack: idRack[i+1], Topics: slices.Clone(subs)})
	}
	return ms
}

// locals counts, per member and in all, the partitions out gives a member in
// a rack that hosts one of their replicas.
func locals(in Input, out Assignment) (per map[string]int, total int) {
	per = map[string]int{}
	for _, m := range in.Members {
		for id, ps := range out[m.ID] {
			racks := in.Topics[id].PartitionRacks
			for _, p := range ps {
				if m.Rack != "" && len(racks) > 0 && slices.Contains(racks[p], m.Rack) {
					per[m.ID]++
					total++
				}
			}
		}
	}
	return per, total
}

// anyRackMatch reports whether some member's rack hosts a replica of a
// partition of a topic it subscribes to: whether racks may count at all.
func anyRackMatch(in Input) bool {
	byName := map[string]Topic{}
	for _, tp := range in.Topics {
		byName[tp.Name] = tp
	}
	for _, m := range in.Members {
		if m.Rack == "" {
			continue
		}
		for _, n := range m.Topics {
			for _, racks := range byName[n].PartitionRacks {
				if slices.Contains(racks, m.Rack) {
					return true
				}
			}
		}
	}
	return false
}

func TestUniformRacks(t *testing.T) {
	ab := func(_, p int) []string { return []string{[]string{"a", "b"}[p%2]} }
	cases := []struct {
		name    string
		in      Input
		locals  int        // how many partitions must be rack-local
		want    Assignment // nil: any
		wantPer map[string]int
	}{
		{
			// Two racks, two members in each, partitions alternating between
			// them: all local, 3 each. Rack-blind it would be 0-2, 3-5, ...
			name:   "two racks, all local",
			in:     Input{Topics: withRacks(topics(8, 4), ab), Members: racked(names(2), "m0", "a", "m1", "b", "m2", "a", "m3", "b")},
			locals: 12,
		},
		{
			// p0 is on racks a and b, p1 on a only: a greedy pass giving p0
			// to m0 (a, first in id order) would leave p1 to m1 (b).
			name: "replicas in two racks",
			in: Input{Topics: withRacks(topics(2), func(_, p int) []string { return [][]string{{"a", "b"}, {"a"}}[p] }),
				Members: racked(names(1), "m0", "a", "m1", "b")},
			locals: 2,
			want:   Assignment{"m0": {tid(0): {1}}, "m1": {tid(0): {0}}},
		},
		{
			// Replication factor 2 over three racks, two members per rack.
			name: "rf 2 over three racks",
			in: Input{Topics: withRacks(topics(12, 6), func(_, p int) []string {
				return []string{fmt.Sprint("r", p%3), fmt.Sprint("r", (p+1)%3)}
			}), Members: racked(names(2), "m0", "r0", "m1", "r1", "m2", "r2", "m3", "r0", "m4", "r1", "m5", "r2")},
			locals: 18,
		},
		{
			// Three partitions for two members: m0 takes the extra partition of
			// its rack, m1 the one no member's rack hosts.
			name: "the extra partition goes where it is local",
			in: Input{Topics: withRacks(topics(3), func(_, p int) []string { return [][]string{{"a"}, {"a"}, {"z"}}[p] }),
				Members: racked(names(1), "m0", "a", "m1", "b")},
			locals: 2,
			want:   Assignment{"m0": {tid(0): {0, 1}}, "m1": {tid(0): {2}}},
		},
		{
			// Every replica in rack a: balance wins, m0 gets 3 of them, the
			// others 3 each off their rack.
			name:    "one rack hosts everything",
			in:      Input{Topics: withRacks(topics(9), func(_, _ int) []string { return []string{"a"} }), Members: racked(names(1), "m0", "b", "m1", "a", "m2", "b")},
			locals:  3,
			wantPer: map[string]int{"m1": 3},
		},
		{
			// Rack a hosts 8 of 12 partitions but has one member of four: it
			// gets its fair 3, all local; rack b's three members share rack
			// b's 4 and rack a's other 5.
			name: "a rack with more partitions than its members' share",
			in: Input{Topics: withRacks(topics(12), func(_, p int) []string { return []string{map[bool]string{true: "a", false: "b"}[p < 8]} }),
				Members: racked(names(1), "m0", "b", "m1", "b", "m2", "a", "m3", "b")},
			locals:  7,
			wantPer: map[string]int{"m2": 3},
		},
		{
			name:    "members without racks",
			in:      Input{Topics: withRacks(topics(8), ab), Members: racked(names(1), "m0", "", "m1", "a", "m2", "", "m3", "b")},
			locals:  4,
			wantPer: map[string]int{"m1": 2, "m3": 2},
		},
		{
			// t0 has racks (p5 none), t1 none at all.
			name: "partitions without racks",
			in: func() Input {
				ts := topics(6, 6)
				tp := ts[tid(0)]
				tp.PartitionRacks = [][]string{{"a"}, {"b"}, {"a"}, {"b"}, {"a"}, nil}
				ts[tid(0)] = tp
				return Input{Topics: ts, Members: racked(names(2), "m0", "b", "m1", "a", "m2", "a")}
			}(),
			locals: 5,
		},
		{
			// Stickiness beats racks: each member keeps what it has, although
			// all of it is on the other's rack.
			name: "current partitions stay off rack",
			in: Input{Topics: withRacks(topics(4), ab), Members: []Member{
				{ID: "m0", Rack: "a", Topics: []string{"t0"}, Current: map[TopicID][]int32{tid(0): {1, 3}}},
				{ID: "m1", Rack: "b", Topics: []string{"t0"}, Current: map[TopicID][]int32{tid(0): {0, 2}}},
			}},
			locals: 0,
			want:   Assignment{"m0": {tid(0): {1, 3}}, "m1": {tid(0): {0, 2}}},
		},
		{
			// Heterogeneous: m0 alone on t1, everyone on t0; m0 must not get
			// t0, even its own rack's.
			name: "heterogeneous",
			in: Input{Topics: withRacks(topics(6, 6), ab), Members: []Member{
				{ID: "m0", Rack: "a", Topics: []string{"t0", "t1"}},
				{ID: "m1", Rack: "a", Topics: []string{"t0"}},
				{ID: "m2", Rack: "b", Topics: []string{"t0"}},
			}},
			locals: 3 + 3 + 3, // m0 t1's rack-a ones and 3 off; m1, m2 3 each of t0
			want: Assignment{
				"m0": {tid(1): {0, 1, 2, 3, 4, 5}},
				"m1": {tid(0): {0, 2, 4}},
				"m2": {tid(0): {1, 3, 5}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := mustAssign(t, Uniform{}, c.in)
			locallyBalanced(t, c.in, out)
			if spread, homo := Balance(c.in, out); homo && spread > 1 {
				t.Fatalf("spread %d: %v", spread, out)
			}
			per, total := locals(c.in, out)
			if total != c.locals {
				t.Errorf("%d partitions local, want %d: %v", total, c.locals, out)
			}
			for id, n := range c.wantPer {
				if per[id] != n {
					t.Errorf("%s has %d local partitions, want %d: %v", id, per[id], n, out)
				}
			}
			if c.want != nil && !reflect.DeepEqual(out, c.want) {
				t.Errorf("got %v\nwant %v", out, c.want)
			}
			// A fixed point with racks too.
			again := c.in
			again.Members = slices.Clone(c.in.Members)
			for i := range again.Members {
				again.Members[i].Current = out[again.Members[i].ID]
			}
			if out2 := mustAssign(t, Uniform{}, again); !reflect.DeepEqual(out, out2) {
				t.Errorf("not a fixed point:\n%v\n%v", out, out2)
			}
		})
	}
}

// A group whose members all sit in the rack of their partitions stays so
// through joins and leaves, as far as balance lets it, and moves no more
// than rack-blind stickiness allows.
func TestUniformRacksStickyJoin(t *testing.T) {
	ts := withRacks(topics(12), func(_, p int) []string { return []string{[]string{"a", "b"}[p%2]} })
	subs := []string{"t0"}
	in := Input{Topics: ts, Members: racked(subs, "a1", "a", "a2", "a", "b1", "b", "b2", "b")}
	prev := mustAssign(t, Uniform{}, in)
	if _, n := locals(in, prev); n != 12 {
		t.Fatalf("initial: %d local: %v", n, prev)
	}
	steps := []struct {
		join         *Member
		leave        string
		locals       int
		joinerLocals int
	}{
		{join: &Member{ID: "a3", Rack: "a", Topics: subs}, locals: 12, joinerLocals: 2},
		{join: &Member{ID: "b3", Rack: "b", Topics: subs}, locals: 12, joinerLocals: 2},
		{leave: "a1", locals: 12},
		{join: &Member{ID: "c1", Rack: "c", Topics: subs}, locals: 10}, // no replica in c
		{leave: "b1", locals: 10},
	}
	for i, s := range steps {
		var ms []Member
		for _, m := range in.Members {
			if m.ID != s.leave {
				m.Current = prev[m.ID]
				ms = append(ms, m)
			}
		}
		if s.join != nil {
			ms = append(ms, *s.join)
		}
		in = Input{Topics: ts, Members: ms}
		out := mustAssign(t, Uniform{}, in)
		moved := 0
		for id, tps := range out {
			for _, p := range tps[tid(0)] {
				if was := ownerOf(prev, tid(0), p); was != "" && was != id && was != s.leave {
					moved++
				}
			}
		}
		if s.join != nil && moved > ceilDiv(12, len(ms)) || s.join == nil && moved != 0 {
			t.Errorf("step %d: moved %d", i, moved)
		}
		if spread, _ := Balance(in, out); spread > 1 {
			t.Errorf("step %d: spread %d", i, spread)
		}
		per, n := locals(in, out)
		if n != s.locals {
			t.Errorf("step %d: %d local, want %d: %v", i, n, s.locals, out)
		}
		if s.join != nil && s.joinerLocals > 0 && per[s.join.ID] != s.joinerLocals {
			t.Errorf("step %d: joiner has %d local, want %d: %v", i, per[s.join.ID], s.joinerLocals, out)
		}
		prev = out
	}
}

func ownerOf(a Assignment, id TopicID, p int32) string {
	for m, tps := range a {
		if slices.Contains(tps[id], p) {
			return m
		}
	}
	return ""
}

// rackedInput makes a random group where racks matter: most members and
// partitions have racks, replicas on one or two racks.
func rackedInput(r *rand.Rand) Input {
	pool := []string{"a", "b", "c", "d"}[:1+r.IntN(4)]
	nt := 1 + r.IntN(4)
	ts := make(map[TopicID]Topic, nt)
	for i := range nt {
		tp := Topic{ID: tid(i), Name: fmt.Sprintf("t%d", i), Partitions: int32(r.IntN(30))}
		if r.IntN(5) > 0 {
			tp.PartitionRacks = make([][]string, tp.Partitions)
			for p := range tp.PartitionRacks {
				switch r.IntN(6) {
				case 0: // unknown
				case 1, 2:
					tp.PartitionRacks[p] = []string{pool[r.IntN(len(pool))], pool[r.IntN(len(pool))]}
				default:
					tp.PartitionRacks[p] = []string{pool[r.IntN(len(pool))]}
				}
			}
		}
		ts[tp.ID] = tp
	}
	homogeneous := r.IntN(2) == 0
	shared := randomSubs(r, nt)
	ms := make([]Member, 1+r.IntN(12))
	for i := range ms {
		m := Member{ID: fmt.Sprintf("m%02d", i), Topics: shared}
		if r.IntN(5) > 0 {
			m.Rack = pool[r.IntN(len(pool))]
		}
		if !homogeneous {
			m.Topics = randomSubs(r, nt)
		}
		ms[i] = m
	}
	return Input{Members: ms, Topics: ts}
}

// withCurrent gives in's members random current partitions, overlapping and
// partly invalid.
func withCurrent(r *rand.Rand, in Input) Input {
	out := Input{Topics: in.Topics, Members: slices.Clone(in.Members)}
	for i := range out.Members {
		if r.IntN(2) == 0 {
			continue
		}
		cur := map[TopicID][]int32{}
		for range r.IntN(10) {
			id := tid(r.IntN(len(in.Topics) + 1))
			cur[id] = append(cur[id], int32(r.IntN(32))-1)
		}
		out.Members[i].Current = cur
	}
	return out
}

// Random racked groups: every answer is valid, balanced, deterministic and
// a fixed point; fresh homogeneous groups get as many rack-local partitions
// as any balanced assignment could give, and never fewer than the rack-blind
// placement did.
func TestUniformRacksRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 881))
	fresh, brute, better := 0, 0, 0
	for i := range 3000 {
		in := rackedInput(r)
		if i%2 == 1 {
			in = withCurrent(r, in)
		}
		out := mustAssign(t, Uniform{}, in)
		locallyBalanced(t, in, out)
		spread, homo := Balance(in, out)
		if homo && spread > 1 {
			t.Fatalf("input %d: homogeneous spread %d", i, spread)
		}
		sh := Input{Topics: in.Topics, Members: slices.Clone(in.Members)}
		r.Shuffle(len(sh.Members), func(i, j int) { sh.Members[i], sh.Members[j] = sh.Members[j], sh.Members[i] })
		if got := mustAssign(t, Uniform{}, sh); !reflect.DeepEqual(out, got) {
			t.Fatalf("input %d: member order changed the answer", i)
		}
		fp := Input{Topics: in.Topics, Members: slices.Clone(in.Members)}
		for k := range fp.Members {
			fp.Members[k].Current = out[fp.Members[k].ID]
		}
		if got := mustAssign(t, Uniform{}, fp); !reflect.DeepEqual(out, got) {
			t.Fatalf("input %d: not a fixed point", i)
		}
		if i%2 == 1 || !homo {
			continue
		}
		_, n := locals(in, out)
		old, err := legacyUniform(in)
		if err != nil {
			t.Fatal(err)
		}
		fresh++
		if _, o := locals(in, old); n < o {
			t.Fatalf("input %d: %d local, the rack-blind placement had %d\n%v\n%v", i, n, o, out, old)
		} else if n > o {
			better++
		}
		best, ok := bestLocals(in)
		if ok {
			brute++
		}
		if ok && n != best {
			t.Fatalf("input %d: %d local, a balanced assignment has %d: %v\n%+v", i, n, best, out, in)
		}
	}
	t.Logf("%d fresh homogeneous groups, %d with more local partitions than before, %d checked against every balanced assignment", fresh, better, brute)
}

// bestLocals returns the most rack-local partitions a balanced assignment of
// a fresh homogeneous group can have, by trying them all; ok false when
// there are too many.
func bestLocals(in Input) (best int, ok bool) {
	exists := map[string]Topic{}
	for _, tp := range in.Topics {
		exists[tp.Name] = tp
	}
	var ms []Member // members subscribed to an existing topic
	var subs []string
	for _, m := range in.Members {
		var s []string
		for _, n := range m.Topics {
			if _, ok := exists[n]; ok {
				s = append(s, n)
			}
		}
		slices.Sort(s)
		s = slices.Compact(s)
		if len(s) == 0 {
			continue
		}
		if len(ms) > 0 && !slices.Equal(s, subs) {
			return 0, false // heterogeneous
		}
		ms, subs = append(ms, m), s
	}
	var parts [][]string // each partition's replica racks
	for _, n := range subs {
		tp := exists[n]
		for p := range tp.Partitions {
			var racks []string
			if len(tp.PartitionRacks) > 0 {
				racks = tp.PartitionRacks[p]
			}
			parts = append(parts, racks)
		}
	}
	n := len(ms)
	if n == 0 {
		return 0, true
	}
	combos := 1
	for range parts {
		if combos *= n; combos > 200000 {
			return 0, false
		}
	}
	count := make([]int, n)
	best = -1
	var try func(i, local int)
	try = func(i, local int) {
		if i == len(parts) {
			lo, hi := slices.Min(count), slices.Max(count)
			if hi-lo <= 1 && local > best {
				best = local
			}
			return
		}
		for m := range n {
			count[m]++
			l := local
			if ms[m].Rack != "" && slices.Contains(parts[i], ms[m].Rack) {
				l++
			}
			try(i+1, l)
			count[m]--
		}
	}
	try(0, 0)
	return best, true
}

// stripped variants of an input in which racks cannot count.
func rackBlindVariants(r *rand.Rand, in Input) map[string]Input {
	clone := func(f func(m *Member), g func(tp *Topic)) Input {
		out := Input{Topics: make(map[TopicID]Topic, len(in.Topics)), Members: slices.Clone(in.Members)}
		for i := range out.Members {
			f(&out.Members[i])
		}
		for id, tp := range in.Topics {
			if tp.PartitionRacks != nil {
				tp.PartitionRacks = slices.Clone(tp.PartitionRacks)
			}
			g(&tp)
			out.Topics[id] = tp
		}
		return out
	}
	nop := func(*Member) {}
	subRacks := map[string]map[string]bool{} // topic name → racks of its subscribers
	for _, m := range in.Members {
		for _, n := range m.Topics {
			if subRacks[n] == nil {
				subRacks[n] = map[string]bool{}
			}
			subRacks[n][m.Rack] = true
		}
	}
	return map[string]Input{
		"no member racks":    clone(func(m *Member) { m.Rack = "" }, func(*Topic) {}),
		"no partition racks": clone(nop, func(tp *Topic) { tp.PartitionRacks = nil }),
		"racks nobody is in": clone(nop, func(tp *Topic) {
			for p, racks := range tp.PartitionRacks {
				tp.PartitionRacks[p] = nil
				for _, x := range racks {
					tp.PartitionRacks[p] = append(tp.PartitionRacks[p], "x-"+x)
				}
			}
		}),
		// Replicas only on racks of members that do not subscribe to the topic.
		"racks of other members": clone(nop, func(tp *Topic) {
			var other []string
			for _, x := range []string{"a", "b", "c", "d"} {
				if !subRacks[tp.Name][x] {
					other = append(other, x)
				}
			}
			for p := range tp.PartitionRacks {
				tp.PartitionRacks[p] = nil
				if len(other) > 0 && r.IntN(4) > 0 {
					tp.PartitionRacks[p] = []string{other[r.IntN(len(other))]}
				}
			}
		}),
	}
}

// Where racks cannot count, the answer is exactly the rack-blind uniform's,
// including through joins and leaves.
func TestUniformWithoutRacksUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(848, 21))
	inputs := 0
	for round := range 400 {
		var base Input
		if round%2 == 0 {
			base = randomInput(r)
		} else {
			base = withCurrent(r, rackedInput(r))
		}
		for name, in := range rackBlindVariants(r, base) {
			if anyRackMatch(in) {
				t.Fatalf("%s: racks match", name)
			}
			for step := range 4 {
				want, err := legacyUniform(in)
				if err != nil {
					t.Fatal(err)
				}
				got := mustAssign(t, Uniform{}, in)
				inputs++
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d, %s, step %d: differs from the rack-blind uniform\ngot  %v\nwant %v\ninput %+v", round, name, step, got, want, in)
				}
				// Next step: one member leaves, one joins, the rest keep.
				next := Input{Topics: in.Topics}
				for _, m := range in.Members {
					m.Current = got[m.ID]
					next.Members = append(next.Members, m)
				}
				if len(next.Members) > 0 && r.IntN(2) == 0 {
					k := r.IntN(len(next.Members))
					next.Members = slices.Delete(next.Members, k, k+1)
				}
				j := Member{ID: fmt.Sprintf("j%d", step), Topics: randomSubs(r, len(in.Topics))}
				if len(next.Members) > 0 {
					j.Topics, j.Rack = next.Members[0].Topics, next.Members[0].Rack
				}
				next.Members = append(next.Members, j)
				in = next
			}
		}
	}
	t.Logf("%d inputs compared", inputs)
}

// FuzzUniform builds a group from the fuzzer's bytes and checks what
// Uniform promises: a valid, balanced, deterministic answer that is a fixed
// point, and the rack-blind answer where racks cannot count.
func FuzzUniform(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{2, 12, 1, 0x35, 0x9c, 9, 4, 12, 0, 3, 1, 2, 2, 7, 1, 3, 0, 5})
	f.Add([]byte("rack-aware uniform assignment when members send racks"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		out, err := Uniform{}.Assign(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(in, out); err != nil {
			t.Fatalf("%v\n%+v\n%v", err, in, out)
		}
		locallyBalanced(t, in, out)
		if spread, homo := Balance(in, out); homo && spread > 1 {
			t.Fatalf("homogeneous spread %d", spread)
		}
		fp := Input{Topics: in.Topics, Members: slices.Clone(in.Members)}
		for k := range fp.Members {
			fp.Members[k].Current = out[fp.Members[k].ID]
		}
		if got, _ := (Uniform{}).Assign(context.Background(), fp); !reflect.DeepEqual(out, got) {
			t.Fatalf("not a fixed point:\n%v\n%v", out, got)
		}
		if !anyRackMatch(in) {
			if want, _ := legacyUniform(in); !reflect.DeepEqual(out, want) {
				t.Fatalf("racks cannot count, yet differs from the rack-blind uniform\ngot  %v\nwant %v", out, want)
			}
		}
	})
}

// fuzzInput reads a group from data: 1-4 topics of 0-23 partitions, their
// replicas' racks among a-d (or none), 0-11 members with a rack (or none),
// subscriptions and current partitions. Missing bytes read as 0.
func fuzzInput(data []byte) Input {
	next := func(n int) int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[0])
		data = data[1:]
		return b % n
	}
	racks := []string{"", "a", "b", "c", "d"}
	nt := 1 + next(4)
	ts := make(map[TopicID]Topic, nt)
	for i := range nt {
		tp := Topic{ID: tid(i), Name: fmt.Sprintf("t%d", i), Partitions: int32(next(24))}
		if next(3) > 0 {
			tp.PartitionRacks = make([][]string, tp.Partitions)
			for p := range tp.PartitionRacks {
				bits := next(16)
				for x := range 4 {
					if bits&(1<<x) != 0 {
						tp.PartitionRacks[p] = append(tp.PartitionRacks[p], racks[1+x])
					}
				}
			}
		}
		ts[tp.ID] = tp
	}
	ms := make([]Member, next(12))
	for i := range ms {
		m := Member{ID: fmt.Sprintf("m%02d", i), Rack: racks[next(5)]}
		subs := next(1 << (nt + 1)) // bit nt: a topic that does not exist
		for k := range nt + 1 {
			if subs&(1<<k) != 0 {
				m.Topics = append(m.Topics, fmt.Sprintf("t%d", k))
			}
		}
		for range next(6) {
			if m.Current == nil {
				m.Current = map[TopicID][]int32{}
			}
			id := tid(next(nt + 1))
			m.Current[id] = append(m.Current[id], int32(next(26))-1)
		}
		ms[i] = m
	}
	return Input{Members: ms, Topics: ts}
}
