package consumer

import (
	"slices"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// reconcile moves m towards its target assignment, as Kafka's
// CurrentAssignmentBuilder does. owned is what the member reports owning,
// nil when the heartbeat did not say (then revocations are not
// acknowledged).
func (g *Group) reconcile(m *member, owned tps) {
	switch m.state {
	case MemberStable:
		if m.epoch != g.targetEpoch {
			g.computeNext(m, m.epoch, owned)
		}
	case MemberUnrevokedPartitions:
		if ownsAny(owned, m.pending) {
			return // still waiting for the revocation
		}
		g.computeNext(m, m.epoch, owned)
	case MemberUnreleasedPartitions:
		g.computeNext(m, m.epoch, owned)
	}
}

// computeNext computes m's next assignment from its assigned partitions and
// its target. Partitions to revoke come first: while any remain (and the
// member may still own them) the member stays at epoch, in
// MemberUnrevokedPartitions. Otherwise it moves to the target epoch and
// gets the target's partitions nobody else holds; those still held by
// another member leave it in MemberUnreleasedPartitions.
func (g *Group) computeNext(m *member, epoch int32, owned tps) {
	target := g.target[m.id]
	keep, revoke, add := tps{}, tps{}, tps{}
	unreleased := false
	for _, t := range topicUnion(m.assigned, target) {
		cur, want := m.assigned[t], target[t]
		putNonEmpty(keep, t, intersect(cur, want))
		putNonEmpty(revoke, t, difference(cur, want))
		var free []int32
		for _, p := range difference(want, cur) {
			if o, held := g.owner[tp{t, p}]; held && o != m.id {
				unreleased = true
				continue
			}
			free = append(free, p)
		}
		putNonEmpty(add, t, free)
	}
	switch {
	case len(revoke) > 0 && ownsAny(owned, revoke):
		m.state = MemberUnrevokedPartitions
		m.setEpoch(epoch)
		g.setOwnership(m, keep, revoke)
	case len(add) > 0:
		for t, ps := range add {
			keep[t] = union(keep[t], ps)
		}
		m.state = MemberStable
		if unreleased {
			m.state = MemberUnreleasedPartitions
		}
		m.setEpoch(g.targetEpoch)
		g.setOwnership(m, keep, nil)
	default:
		m.state = MemberStable
		if unreleased {
			m.state = MemberUnreleasedPartitions
		}
		m.setEpoch(g.targetEpoch)
		g.setOwnership(m, keep, nil)
	}
}

func (m *member) setEpoch(e int32) {
	if e != m.epoch {
		m.prevEpoch, m.epoch = m.epoch, e
	}
}

// setOwnership replaces m's assigned and pending partitions, keeping the
// owner index in step.
func (g *Group) setOwnership(m *member, assigned, pending tps) {
	for _, set := range []tps{m.assigned, m.pending} {
		for t, ps := range set {
			for _, p := range ps {
				if g.owner[tp{t, p}] == m.id {
					delete(g.owner, tp{t, p})
				}
			}
		}
	}
	m.assigned, m.pending = assigned, pending
	for _, set := range []tps{assigned, pending} {
		for t, ps := range set {
			for _, p := range ps {
				g.owner[tp{t, p}] = m.id
			}
		}
	}
}

// ownsAny reports whether owned may contain a partition of set; a nil
// owned (not reported) may contain anything.
func ownsAny(owned, set tps) bool {
	if owned == nil {
		return true
	}
	for t, ps := range set {
		if len(intersect(owned[t], ps)) > 0 {
			return true
		}
	}
	return false
}

// isSubset reports whether owned (non-nil) is within assigned.
func isSubset(owned, assigned tps) bool {
	if owned == nil {
		return false
	}
	for t, ps := range owned {
		if len(difference(ps, assigned[t])) > 0 {
			return false
		}
	}
	return true
}

// normalize turns partitions as a client sends them into a set: negative
// ids dropped, sorted, unique.
func normalize(ps []int32) []int32 {
	out := make([]int32, 0, len(ps))
	for _, p := range ps {
		if p >= 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func putNonEmpty(set tps, t assignor.TopicID, ps []int32) {
	if len(ps) > 0 {
		set[t] = ps
	}
}

func topicUnion(a, b tps) []assignor.TopicID {
	out := make([]assignor.TopicID, 0, len(a)+len(b))
	for t := range a {
		out = append(out, t)
	}
	for t := range b {
		if _, ok := a[t]; !ok {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, assignor.TopicID.Compare)
	return out
}

// intersect, difference and union work on ascending unique lists.
func intersect(a, b []int32) []int32 {
	var out []int32
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func difference(a, b []int32) []int32 {
	var out []int32
	j := 0
	for _, p := range a {
		for j < len(b) && b[j] < p {
			j++
		}
		if j < len(b) && b[j] == p {
			continue
		}
		out = append(out, p)
	}
	return out
}

func union(a, b []int32) []int32 {
	out := make([]int32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func equalTPs(a, b tps) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func cloneTPs(a tps) tps {
	out := make(tps, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			out[t] = slices.Clone(ps)
		}
	}
	return out
}
