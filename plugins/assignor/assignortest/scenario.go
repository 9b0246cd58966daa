package assignortest

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/plugins/assignor"
)

// step is one membership change of a scenario: a join, a leave, or both (a
// member replaced). A step with neither just runs the assignor again.
type step struct {
	Join  *assignor.Member // a member joining; its Current is ignored
	Leave string           // id of a member leaving
}

// stepResult describes the assignment after one step.
type stepResult struct {
	Members  int // group size after the step
	Moved    int // partitions taken from a member still in the group and given to another
	Released int // partitions the leaving member owned
	Spread   int // see balance
}

// scenario runs a through a group's life: an assignment for initial (their
// Current as given), then one per step, each member's Current being its
// previous target. Every answer goes through assign (checked, input
// unchanged). It returns one result per step done, and the first error met.
func scenario(ctx context.Context, a assignor.Assignor, topics map[assignor.TopicID]assignor.Topic, initial []assignor.Member, steps []step) ([]stepResult, error) {
	members := slices.Clone(initial)
	prev, err := assign(ctx, a, assignor.Input{Members: members, Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("initial assignment: %w", err)
	}
	var results []stepResult
	for i, s := range steps {
		var r stepResult
		for _, ps := range prev[s.Leave] {
			r.Released += len(ps)
		}
		members = slices.DeleteFunc(members, func(m assignor.Member) bool { return m.ID == s.Leave })
		for j := range members {
			members[j].Current = prev[members[j].ID]
		}
		if s.Join != nil {
			joined := *s.Join
			joined.Current = nil
			members = append(members, joined)
		}
		in := assignor.Input{Members: slices.Clone(members), Topics: topics}
		next, err := assign(ctx, a, in)
		if err != nil {
			return results, fmt.Errorf("step %d: %w", i, err)
		}
		r.Moved = moved(prev, next, s.Leave)
		r.Members = len(members)
		r.Spread, _ = balance(in, next)
		results = append(results, r)
		prev = next
	}
	return results, nil
}

// moved counts the partitions next gives to another member than prev did,
// leaving out those of the member that left.
func moved(prev, next assignor.Assignment, left string) int {
	type partition struct {
		topic assignor.TopicID
		p     int32
	}
	was := make(map[partition]string)
	for id, tps := range prev {
		for topic, ps := range tps {
			for _, p := range ps {
				was[partition{topic, p}] = id
			}
		}
	}
	n := 0
	for id, tps := range next {
		for topic, ps := range tps {
			for _, p := range ps {
				if owner, ok := was[partition{topic, p}]; ok && owner != id && owner != left {
					n++
				}
			}
		}
	}
	return n
}

// balance returns the difference between the largest and the smallest number
// of partitions given to a member, over the members subscribing to at least
// one topic of in, and whether those members subscribe to the same topics.
// out is assumed valid.
func balance(in assignor.Input, out assignor.Assignment) (spread int, homogeneous bool) {
	homogeneous = true
	var first []string
	counts := []int{}
	for _, m := range in.Members {
		var subs []string
		for _, t := range in.Topics {
			if slices.Contains(m.Topics, t.Name) {
				subs = append(subs, t.Name)
			}
		}
		if len(subs) == 0 {
			continue
		}
		slices.Sort(subs)
		if first == nil {
			first = subs
		} else if !slices.Equal(first, subs) {
			homogeneous = false
		}
		n := 0
		for _, ps := range out[m.ID] {
			n += len(ps)
		}
		counts = append(counts, n)
	}
	if len(counts) == 0 {
		return 0, true
	}
	return slices.Max(counts) - slices.Min(counts), homogeneous
}
