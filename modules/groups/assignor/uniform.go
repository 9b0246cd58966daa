package assignor

import (
	"cmp"
	"context"
	"slices"
)

// Uniform is the "uniform" assignor (the default of KIP-848 groups). It
// spreads partitions evenly over members and keeps current assignments where
// balance allows. When members send racks (Member.Rack) and the partitions'
// replica racks are known (Topic.PartitionRacks), it also gives members
// partitions with a replica in their own rack wherever balance and stickiness
// allow: KIP-881's rack awareness, on the server. Balance comes first, then
// stickiness, then racks.
//
// Algorithm:
//  1. Keep: every member keeps its valid current partitions, whatever their
//     racks (members in id order win a partition two of them claim).
//  2. Place the unowned partitions. First rack-locally, as many as can be:
//     each to a subscriber in one of its replicas' racks, none taking a
//     member above the even share floor(total/members), or share+1 for no
//     more members than an even spread has room for (a maximum flow from
//     partitions to members grouped by rack and subscriptions; within a
//     group, least loaded member first). Then the rest, topics with fewer
//     subscribers first, each to its least loaded subscriber (a rack-local
//     one among equally loaded).
//  3. Balance: while some member A owns a partition of a topic to which a
//     member B with count(B) <= count(A)-2 subscribes, one such partition
//     moves to such a B (rack-local first, then least loaded). A is one of
//     the most loaded members that can give one, all with the same count.
//     Partitions placed in step 2 leave before kept ones (stickiness beats
//     rack locality); then the move that gains a rack-local partition (off
//     A's rack, on B's) goes first, and one that loses one (on A's rack, off
//     B's) last; ties go to the member first in id order, then to its
//     partitions off its rack, then in partition order. Each move lowers
//     the sum of squared counts, so this ends.
//
// Racks count only when some member's rack hosts a replica of a partition of
// a topic it subscribes to. Otherwise (no member sends a rack, no partition
// has replica racks, or none match) the assignment is exactly the rack-blind
// one: step 2 places by load alone, and step 3 takes from the first member,
// in (count descending, id) order, that can give, its first partition in
// the order above.
//
// With homogeneous subscriptions step 3 leaves counts that differ by at most
// one, and only partitions above a member's share move. A fresh homogeneous
// group gets as many rack-local partitions as any such balanced assignment
// could have.
type Uniform struct{}

// Name implements Assignor.
func (Uniform) Name() string { return "uniform" }

// UsesPartitionRacks reports that Uniform reads Topic.PartitionRacks, so the
// group coordinator fills them in (consumer.RackUser).
func (Uniform) UsesPartitionRacks() bool { return true }

// Assign implements Assignor.
func (Uniform) Assign(ctx context.Context, in Input) (Assignment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g, err := newGroup(in)
	if err != nil {
		return nil, err
	}
	u := newUniform(g)
	u.keep()
	u.place()
	if err := u.balance(ctx); err != nil {
		return nil, err
	}
	return g.assignment(u.owner), nil
}

var _ Assignor = Uniform{}

// rackInfo is a group's rack metadata as small integers: the racks members
// are in, numbered in sorted order, and for each partition those of them that
// host one of its replicas (racks no member is in are dropped).
type rackInfo struct {
	n      int
	member []int   // member → its rack, -1 for none
	part   [][]int // global partition → racks of its replicas, ascending; nil without racks
	// on: some member's rack hosts a replica of a partition of a topic it
	// subscribes to. Without it, racks change nothing.
	on bool
}

func newRackInfo(g *group) rackInfo {
	r := rackInfo{member: make([]int, len(g.members))}
	var names []string
	for _, m := range g.members {
		if m.Rack != "" {
			names = append(names, m.Rack)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	index := make(map[string]int, len(names))
	for i, n := range names {
		index[n] = i
	}
	r.n = len(names)
	for m, mem := range g.members {
		r.member[m] = -1
		if x, ok := index[mem.Rack]; ok {
			r.member[m] = x
		}
	}
	if r.n == 0 {
		return r
	}
	r.part = make([][]int, g.total())
	subRack := make([]bool, r.n) // subRack[x]: a subscriber of the topic is in rack x
	for t, tp := range g.topics {
		if len(tp.PartitionRacks) == 0 || len(g.subs[t]) == 0 {
			continue
		}
		clear(subRack)
		for _, m := range g.subs[t] {
			if x := r.member[m]; x >= 0 {
				subRack[x] = true
			}
		}
		for i, names := range tp.PartitionRacks {
			p := g.base[t] + i
			for _, name := range names {
				if x, ok := index[name]; ok && !slices.Contains(r.part[p], x) {
					r.part[p] = append(r.part[p], x)
					r.on = r.on || subRack[x]
				}
			}
			slices.Sort(r.part[p])
		}
	}
	return r
}

// match reports whether member m's rack hosts a replica of global partition p.
func (r *rackInfo) match(m, p int) bool {
	x := r.member[m]
	return x >= 0 && r.part != nil && slices.Contains(r.part[p], x)
}

// uniform is the state of one Uniform.Assign.
type uniform struct {
	g      *group
	r      rackInfo
	owner  []int  // global partition → member, -1 while unowned
	kept   []bool // the partition stayed with a member that had it in Current
	count  []int  // member → partitions owned
	active []bool // member subscribes to at least one existing topic
	nAct   int

	// Step 3.
	owned   [][]int    // member → its partitions, in the order they should leave it
	placed  []int      // member → how many of owned[m] are not kept
	members []int      // active members, by count descending then index
	pos     []int      // member → its index in members
	tally   [2][]tally // [kept] member → its partitions not kept / kept, by racks (if racks count)

	// Scratch of the rack-aware search of step 3: which receivers exist,
	// memoized per search (stamp) for a topic (any), a topic × rack (local)
	// and a rack (rack).
	stamp         int
	thr           int // receivers own at most thr partitions
	anyAt, rackAt []int
	anyOK, rackOK []bool
	local         map[int]memo // by topic × racks + rack: sized by the input, not topics × racks
}

type memo struct {
	stamp int
	ok    bool
}

// tally counts a member's partitions of one kind (kept or not) by where
// their replicas are, for the rack-aware search of step 3 to skip members
// and stop early: only an off-rack partition on some member's rack (offR)
// can gain a rack-local partition, and only an off-rack one, or an on-rack
// one whose receiver is in its rack or one of its other racks (on2), can
// move without losing one.
type tally struct{ n, off, offR, on2 int }

func (t *tally) add(p []int, onRack bool, d int) {
	t.n += d
	switch {
	case !onRack:
		t.off += d
		if len(p) > 0 {
			t.offR += d
		}
	case len(p) > 1:
		t.on2 += d
	}
}

// best is the best gain a move of one of the partitions t counts may have,
// -2 if t counts none; own says whether receivers exist in the member's rack.
func (t *tally) best(own bool) int {
	switch {
	case t.offR > 0:
		return 1
	case t.off > 0 || t.on2 > 0 || (t.n > 0 && own):
		return 0
	case t.n > 0:
		return -1
	}
	return -2
}

func newUniform(g *group) *uniform {
	n := g.total()
	u := &uniform{
		g:      g,
		r:      newRackInfo(g),
		owner:  make([]int, n),
		kept:   make([]bool, n),
		count:  make([]int, len(g.members)),
		active: make([]bool, len(g.members)),
	}
	for p := range u.owner {
		u.owner[p] = -1
	}
	for m := range g.members {
		if slices.Contains(g.subOf[m], true) {
			u.active[m] = true
			u.nAct++
		}
	}
	return u
}

// keep is step 1.
func (u *uniform) keep() {
	g := u.g
	for m := range g.members {
		for t := range g.topics {
			for _, p := range g.current(m, t) {
				if u.owner[p] < 0 {
					u.owner[p] = m
					u.kept[p] = true
					u.count[m]++
				}
			}
		}
	}
}

// place is step 2.
func (u *uniform) place() {
	g := u.g
	order := make([]int, 0, len(g.topics))
	assignable := 0
	for t := range g.topics {
		if len(g.subs[t]) > 0 {
			order = append(order, t)
			assignable += int(g.topics[t].Partitions)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(g.subs[a]), len(g.subs[b])) })
	if u.r.on && u.nAct > 0 {
		u.placeLocal(assignable)
	}
	for _, t := range order {
		for p := g.base[t]; p < g.base[t+1]; p++ {
			if u.owner[p] >= 0 {
				continue
			}
			best, bestRack := -1, false
			for _, m := range g.subs[t] {
				r := u.r.match(m, p)
				if best < 0 || u.count[m] < u.count[best] || (u.count[m] == u.count[best] && r && !bestRack) {
					best, bestRack = m, r
				}
			}
			u.owner[p] = best
			u.count[best]++
		}
	}
}

// placeLocal places as many unowned partitions as it can on subscribers in
// one of their replicas' racks, taking no member above share partitions but
// for extras: up to total-members×share (less what members already own above
// share) members may take share+1, as an even spread of total partitions
// needs.
//
// Members in the same rack with the same subscriptions are interchangeable
// here: they form a class, whose room is what its members lack to reach the
// share, plus one extra per member. Partitions that could go to the same
// classes form a kind. The largest number of partitions that can be placed is
// a maximum flow from kinds (as many units as partitions) to classes, and on
// to the sink: directly up to their room, through a common extras node up to
// one per member (that node passes on at most the extras allowed). Within a
// class, each partition then goes to its least loaded member.
func (u *uniform) placeLocal(assignable int) {
	g := u.g
	share := assignable / u.nAct
	extras := assignable
	for m := range g.members {
		if u.active[m] {
			extras -= max(u.count[m], share)
		}
	}
	type class struct {
		rack    int
		sub     []bool // sub[t]: subscribed to topic t
		members []int  // ascending
		room    int    // to reach share
	}
	var classes []class
	classOf := map[string]int{}
	key := make([]byte, 0, 8+len(g.topics))
	for m := range g.members {
		x := u.r.member[m]
		if !u.active[m] || x < 0 || u.count[m] > share || (u.count[m] == share && extras <= 0) {
			continue
		}
		key = key[:0]
		key = append(key, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
		for _, s := range g.subOf[m] {
			key = append(key, boolByte(s))
		}
		k, ok := classOf[string(key)]
		if !ok {
			k = len(classes)
			classOf[string(key)] = k
			classes = append(classes, class{rack: x, sub: g.subOf[m]})
		}
		classes[k].members = append(classes[k].members, m)
		classes[k].room += share - u.count[m]
	}
	if len(classes) == 0 {
		return
	}

	type kind struct {
		parts   []int // ascending
		classes []int // ascending
	}
	var kinds []kind
	kindOf := map[string]int{}
	var cands []int
	for t := range g.topics {
		if len(g.subs[t]) == 0 {
			continue
		}
		for p := g.base[t]; p < g.base[t+1]; p++ {
			if u.owner[p] >= 0 || len(u.r.part[p]) == 0 {
				continue
			}
			cands, key = cands[:0], key[:0]
			for k, c := range classes {
				if c.sub[t] && slices.Contains(u.r.part[p], c.rack) {
					cands = append(cands, k)
					key = append(key, byte(k>>24), byte(k>>16), byte(k>>8), byte(k))
				}
			}
			if len(cands) == 0 {
				continue
			}
			i, ok := kindOf[string(key)]
			if !ok {
				i = len(kinds)
				kindOf[string(key)] = i
				kinds = append(kinds, kind{classes: slices.Clone(cands)})
			}
			kinds[i].parts = append(kinds[i].parts, p)
		}
	}
	if len(kinds) == 0 {
		return
	}

	// Nodes: source, kinds, classes, extras, sink.
	src, firstClass := 0, 1+len(kinds)
	extra := firstClass + len(classes)
	sink := extra + 1
	f := newFlow(sink + 1)
	edges := make([][]int, len(kinds)) // kind i → its edges to kinds[i].classes
	for i, kd := range kinds {
		f.add(src, 1+i, len(kd.parts))
		for _, k := range kd.classes {
			edges[i] = append(edges[i], f.add(1+i, firstClass+k, len(kd.parts)))
		}
	}
	for k, c := range classes {
		if c.room > 0 {
			f.add(firstClass+k, sink, c.room)
		}
		if extras > 0 {
			f.add(firstClass+k, extra, len(c.members))
		}
	}
	if extras > 0 {
		f.add(extra, sink, extras)
	}
	f.maxFlow(src, sink)

	dest := make([]int, g.total()) // partition → class + 1, 0 for none
	for i, kd := range kinds {
		next := 0
		for j, e := range edges[i] {
			for n := f.flow(e); n > 0; n-- {
				dest[kd.parts[next]] = kd.classes[j] + 1
				next++
			}
		}
	}
	for p, k := range dest {
		if k == 0 {
			continue
		}
		// The least loaded member of the class: all reach share before one
		// takes an extra, and none takes two.
		best := -1
		for _, m := range classes[k-1].members {
			if best < 0 || u.count[m] < u.count[best] {
				best = m
			}
		}
		u.owner[p] = best
		u.count[best]++
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// balance is step 3.
func (u *uniform) balance(ctx context.Context) error {
	g := u.g
	// Each member's list of partitions, in the order they should leave it:
	// first those placed in step 2, then those it kept (stickiness beats rack
	// locality); within each, those off the member's rack first.
	u.owned = make([][]int, len(g.members))
	u.placed = make([]int, len(g.members))
	for _, keptPass := range []bool{false, true} {
		for _, rackPass := range []bool{false, true} {
			for p, m := range u.owner {
				if m >= 0 && u.kept[p] == keptPass && u.r.match(m, p) == rackPass {
					u.owned[m] = append(u.owned[m], p)
					if !keptPass {
						u.placed[m]++
					}
				}
			}
		}
	}
	u.members = make([]int, 0, u.nAct)
	for m := range g.members {
		if u.active[m] {
			u.members = append(u.members, m)
		}
	}
	// members stays sorted by (count descending, index ascending); a move
	// changes two counts by one, so two members bubble to their places.
	slices.SortFunc(u.members, func(a, b int) int {
		if c := cmp.Compare(u.count[b], u.count[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	u.pos = make([]int, len(g.members))
	for i, m := range u.members {
		u.pos[m] = i
	}
	if u.r.on {
		u.anyAt, u.anyOK = make([]int, len(g.topics)), make([]bool, len(g.topics))
		u.local = map[int]memo{}
		u.rackAt, u.rackOK = make([]int, u.r.n), make([]bool, u.r.n)
		u.tally = [2][]tally{make([]tally, len(g.members)), make([]tally, len(g.members))}
		for p, m := range u.owner {
			if m >= 0 {
				u.tally[b2i(u.kept[p])][m].add(u.r.part[p], u.r.match(m, p), 1)
			}
		}
	}
	for moves := 0; ; moves++ {
		if moves%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		var from, to int
		if u.r.on {
			from, to = u.moveOneRacked()
		} else {
			from, to = u.moveOne()
		}
		if from < 0 {
			return nil
		}
		u.fix(from)
		u.fix(to)
	}
}

// fix moves member m to its place in u.members after its count changed by one.
func (u *uniform) fix(m int) {
	before := func(a, b int) bool {
		return u.count[a] > u.count[b] || (u.count[a] == u.count[b] && a < b)
	}
	ms := u.members
	for i := u.pos[m]; i > 0 && before(ms[i], ms[i-1]); i-- {
		ms[i], ms[i-1] = ms[i-1], ms[i]
		u.pos[ms[i]], u.pos[ms[i-1]] = i, i-1
	}
	for i := u.pos[m]; i+1 < len(ms) && before(ms[i+1], ms[i]); i++ {
		ms[i], ms[i+1] = ms[i+1], ms[i]
		u.pos[ms[i]], u.pos[ms[i+1]] = i, i+1
	}
}

// receiver returns the member that should take partition p from a: a
// subscriber owning at most count(a)-2 partitions, rack-local first, then
// least loaded, then first in id order; -1 if there is none.
func (u *uniform) receiver(a, p int) int {
	best, bestRack := -1, false
	for _, b := range u.g.subs[u.g.topicOf[p]] {
		if u.count[b] > u.count[a]-2 {
			continue
		}
		r := u.r.match(b, p)
		if best < 0 || (r && !bestRack) || (r == bestRack && u.count[b] < u.count[best]) {
			best, bestRack = b, r
		}
	}
	return best
}

// move gives owned[a][i] to b.
func (u *uniform) move(a, i, b int) {
	p := u.owned[a][i]
	u.owner[p] = b
	u.owned[a] = slices.Delete(u.owned[a], i, i+1)
	u.owned[b] = append(u.owned[b], p)
	u.count[a]--
	u.count[b]++
	if !u.kept[p] {
		u.placed[a]--
		u.placed[b]++
	}
	if u.r.on {
		k := b2i(u.kept[p])
		u.tally[k][a].add(u.r.part[p], u.r.match(a, p), -1)
		u.tally[k][b].add(u.r.part[p], u.r.match(b, p), 1)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// moveOne moves one partition from the first member of u.members (sorted by
// count, descending) that owns a partition some subscriber with at least two
// fewer partitions could take: the first such partition in its list. It
// returns the two members, or -1, -1. This is the rack-blind step 3.
func (u *uniform) moveOne() (from, to int) {
	if len(u.members) == 0 {
		return -1, -1
	}
	low := u.count[u.members[len(u.members)-1]]
	for _, a := range u.members {
		if u.count[a]-low < 2 {
			return -1, -1
		}
		for i, p := range u.owned[a] {
			if b := u.receiver(a, p); b >= 0 {
				u.move(a, i, b)
				return a, b
			}
		}
	}
	return -1, -1
}

// moveOneRacked is moveOne when racks count: it looks at every member of the
// first tier (members with the same count, in u.members order) that can give
// a partition, and picks the move that keeps the most partitions rack-local
// (see Uniform's step 3).
func (u *uniform) moveOneRacked() (from, to int) {
	ms := u.members
	if len(ms) == 0 {
		return -1, -1
	}
	low := u.count[ms[len(ms)-1]]
	for i := 0; i < len(ms); {
		c := u.count[ms[i]]
		if c-low < 2 {
			return -1, -1
		}
		j := i + 1
		for j < len(ms) && u.count[ms[j]] == c {
			j++
		}
		u.stamp++
		u.thr = c - 2
		for _, keptPass := range []bool{false, true} {
			bestA, bestI, bestGain := -1, -1, -2
		tier:
			for _, a := range ms[i:j] {
				// left: a's partitions of this kind not looked at yet.
				left := u.tally[b2i(keptPass)][a]
				own := u.r.member[a] >= 0 && u.rackReceiver(u.r.member[a])
				if left.best(own) <= bestGain {
					continue
				}
				for k, p := range u.owned[a] {
					if u.kept[p] != keptPass {
						continue
					}
					onA := u.r.match(a, p)
					left.add(u.r.part[p], onA, -1)
					if u.anyReceiver(u.g.topicOf[p]) {
						gain := 0
						local := u.localReceiver(p)
						if local && !onA {
							gain = 1
						} else if !local && onA {
							gain = -1
						}
						if gain > bestGain {
							bestA, bestI, bestGain = a, k, gain
							if gain == 1 {
								break tier
							}
						}
					}
					if left.best(own) <= bestGain {
						break
					}
				}
			}
			if bestA >= 0 {
				b := u.receiver(bestA, u.owned[bestA][bestI])
				u.move(bestA, bestI, b)
				return bestA, b
			}
		}
		i = j
	}
	return -1, -1
}

// receivers calls f on each active member owning at most u.thr partitions
// until f returns true.
func (u *uniform) receivers(f func(b int) bool) bool {
	for i := len(u.members) - 1; i >= 0 && u.count[u.members[i]] <= u.thr; i-- {
		if f(u.members[i]) {
			return true
		}
	}
	return false
}

// anyReceiver reports whether a member owning at most u.thr partitions
// subscribes to topic t.
func (u *uniform) anyReceiver(t int) bool {
	if u.anyAt[t] != u.stamp {
		u.anyAt[t] = u.stamp
		u.anyOK[t] = u.receivers(func(b int) bool { return u.g.subOf[b][t] })
	}
	return u.anyOK[t]
}

// rackReceiver reports whether a member owning at most u.thr partitions is
// in rack x.
func (u *uniform) rackReceiver(x int) bool {
	if u.rackAt[x] != u.stamp {
		u.rackAt[x] = u.stamp
		u.rackOK[x] = u.receivers(func(b int) bool { return u.r.member[b] == x })
	}
	return u.rackOK[x]
}

// localReceiver reports whether a member owning at most u.thr partitions
// subscribes to p's topic and is in a rack hosting one of its replicas.
func (u *uniform) localReceiver(p int) bool {
	t := u.g.topicOf[p]
	for _, x := range u.r.part[p] {
		k := t*u.r.n + x
		v, ok := u.local[k]
		if !ok || v.stamp != u.stamp {
			v = memo{u.stamp, u.receivers(func(b int) bool { return u.r.member[b] == x && u.g.subOf[b][t] })}
			u.local[k] = v
		}
		if v.ok {
			return true
		}
	}
	return false
}

// flow is a small flow network for placeLocal: edges in pairs (forward,
// backward), adjacency lists in insertion order.
type flow struct {
	adj  [][]int // node → edge ids
	to   []int
	cap  []int
	orig []int
}

func newFlow(nodes int) *flow { return &flow{adj: make([][]int, nodes)} }

// add adds an edge a→b of capacity c and returns its id.
func (f *flow) add(a, b, c int) int {
	e := len(f.to)
	f.to = append(f.to, b, a)
	f.cap = append(f.cap, c, 0)
	f.orig = append(f.orig, c, 0)
	f.adj[a] = append(f.adj[a], e)
	f.adj[b] = append(f.adj[b], e+1)
	return e
}

// flow returns what flows through edge e.
func (f *flow) flow(e int) int { return f.orig[e] - f.cap[e] }

// maxFlow pushes as much as it can from s to t along shortest augmenting
// paths (Edmonds-Karp).
func (f *flow) maxFlow(s, t int) {
	via := make([]int, len(f.adj)) // node → edge it was reached by, -1 if not yet
	queue := make([]int, 0, len(f.adj))
	for {
		for i := range via {
			via[i] = -1
		}
		queue = append(queue[:0], s)
		for h := 0; h < len(queue) && via[t] < 0; h++ {
			n := queue[h]
			for _, e := range f.adj[n] {
				if b := f.to[e]; f.cap[e] > 0 && b != s && via[b] < 0 {
					via[b] = e
					queue = append(queue, b)
				}
			}
		}
		if via[t] < 0 {
			return
		}
		push := -1
		for n := t; n != s; n = f.to[via[n]^1] {
			if e := via[n]; push < 0 || f.cap[e] < push {
				push = f.cap[e]
			}
		}
		for n := t; n != s; n = f.to[via[n]^1] {
			f.cap[via[n]] -= push
			f.cap[via[n]^1] += push
		}
	}
}
