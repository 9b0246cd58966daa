package assignor

import (
	"context"
	"fmt"
	"slices"
)

// Check reports whether out is a valid assignment for in: every member and
// topic it names exists, every partition is in range and listed once, in
// ascending order; every partition of every subscribed topic is assigned to
// exactly one member, and only to a member subscribed to its topic. Partitions
// of topics nobody subscribes to must be unassigned. Members may be missing
// from out (they get nothing). The error wraps ErrInvalidAssignment, or
// ErrInvalidInput when in itself is invalid.
func Check(in Input, out Assignment) error {
	g, err := newGroup(in)
	if err != nil {
		return err
	}
	byID := make(map[string]int, len(g.members))
	for m, mem := range g.members {
		byID[mem.ID] = m
	}
	owner := make([]int, g.total())
	for p := range owner {
		owner[p] = -1
	}
	ids := make([]string, 0, len(out))
	for id := range out {
		ids = append(ids, id)
	}
	slices.Sort(ids) // report the same error each time
	for _, id := range ids {
		m, ok := byID[id]
		if !ok {
			return fmt.Errorf("%w: unknown member %q", ErrInvalidAssignment, id)
		}
		tids := make([]TopicID, 0, len(out[id]))
		for tid := range out[id] {
			tids = append(tids, tid)
		}
		slices.SortFunc(tids, TopicID.Compare)
		for _, tid := range tids {
			ps := out[id][tid]
			t, ok := g.index[tid]
			if !ok {
				return fmt.Errorf("%w: member %q: unknown topic %v", ErrInvalidAssignment, id, tid)
			}
			name := g.topics[t].Name
			if len(ps) > 0 && !g.subOf[m][t] {
				return fmt.Errorf("%w: member %q is assigned topic %q it does not subscribe to", ErrInvalidAssignment, id, name)
			}
			for i, p := range ps {
				if p < 0 || p >= g.topics[t].Partitions {
					return fmt.Errorf("%w: member %q: topic %q has no partition %d", ErrInvalidAssignment, id, name, p)
				}
				if i > 0 && ps[i-1] >= p {
					return fmt.Errorf("%w: member %q: topic %q: partitions not strictly ascending at %d", ErrInvalidAssignment, id, name, p)
				}
				gp := g.base[t] + int(p)
				if owner[gp] >= 0 {
					return fmt.Errorf("%w: topic %q partition %d assigned to both %q and %q", ErrInvalidAssignment, name, p, g.members[owner[gp]].ID, id)
				}
				owner[gp] = m
			}
		}
	}
	for t := range g.topics {
		if len(g.subs[t]) == 0 {
			continue
		}
		for p := g.base[t]; p < g.base[t+1]; p++ {
			if owner[p] < 0 {
				return fmt.Errorf("%w: topic %q partition %d is unassigned", ErrInvalidAssignment, g.topics[t].Name, p-g.base[t])
			}
		}
	}
	return nil
}

// Balance returns the difference between the largest and the smallest number
// of partitions assigned to a member, over the members that subscribe to at
// least one topic of in, and whether those members' subscriptions are
// homogeneous (all the same set of existing topics). For a homogeneous group
// the uniform assignor keeps spread <= 1. Members without subscriptions are
// left out; spread is 0 when no member subscribes. out is assumed valid
// (see Check).
func Balance(in Input, out Assignment) (spread int, homogeneous bool) {
	g, err := newGroup(in)
	if err != nil {
		return 0, false
	}
	homogeneous = true
	lo, hi := -1, -1
	var first []bool
	for m, mem := range g.members {
		if !slices.Contains(g.subOf[m], true) {
			continue
		}
		if first == nil {
			first = g.subOf[m]
		} else if !slices.Equal(first, g.subOf[m]) {
			homogeneous = false
		}
		n := 0
		for _, ps := range out[mem.ID] {
			n += len(ps)
		}
		if lo < 0 || n < lo {
			lo = n
		}
		if n > hi {
			hi = n
		}
	}
	return hi - lo, homogeneous
}

// Step is one membership change in a Scenario: a join, a leave, or both (a
// member replaced). A Step with neither just runs the assignor again.
type Step struct {
	Join  *Member // a member joining; its Current is ignored
	Leave string  // id of a member leaving
}

// StepResult describes the assignment after one Step.
type StepResult struct {
	Members int // group size after the step
	// Moved counts partitions taken from a member that is still in the group
	// and given to another: the price of rebalancing.
	Moved int
	// Released counts partitions the leaving member owned; they must move.
	Released    int
	Spread      int // see Balance
	Homogeneous bool
}

// Scenario runs a through a group's life: an initial assignment for initial
// members (their Current as given), then one assignment per step, each
// member's Current being its previous target. Every assignment is verified
// with Check. It returns one result per step, and the first error met.
func Scenario(ctx context.Context, a Assignor, topics map[TopicID]Topic, initial []Member, steps []Step) ([]StepResult, error) {
	in := Input{Members: slices.Clone(initial), Topics: topics}
	prev, err := assignChecked(ctx, a, in)
	if err != nil {
		return nil, fmt.Errorf("initial assignment: %w", err)
	}
	results := make([]StepResult, 0, len(steps))
	for i, s := range steps {
		var r StepResult
		members := make([]Member, 0, len(in.Members)+1)
		for _, m := range in.Members {
			if m.ID == s.Leave {
				for _, ps := range prev[m.ID] {
					r.Released += len(ps)
				}
				continue
			}
			m.Current = prev[m.ID]
			members = append(members, m)
		}
		if s.Join != nil {
			j := *s.Join
			j.Current = nil
			members = append(members, j)
		}
		in = Input{Members: members, Topics: topics}
		next, err := assignChecked(ctx, a, in)
		if err != nil {
			return results, fmt.Errorf("step %d: %w", i, err)
		}
		owners := owners(prev)
		for id, tps := range next {
			for tid, ps := range tps {
				for _, p := range ps {
					was, ok := owners[tp{tid, p}]
					if ok && was != id && was != s.Leave {
						r.Moved++
					}
				}
			}
		}
		r.Members = len(members)
		r.Spread, r.Homogeneous = Balance(in, next)
		results = append(results, r)
		prev = next
	}
	return results, nil
}

type tp struct {
	topic     TopicID
	partition int32
}

func owners(a Assignment) map[tp]string {
	o := make(map[tp]string)
	for id, tps := range a {
		for tid, ps := range tps {
			for _, p := range ps {
				o[tp{tid, p}] = id
			}
		}
	}
	return o
}

func assignChecked(ctx context.Context, a Assignor, in Input) (Assignment, error) {
	out, err := a.Assign(ctx, in)
	if err != nil {
		return nil, err
	}
	if err := Check(in, out); err != nil {
		return nil, err
	}
	return out, nil
}
