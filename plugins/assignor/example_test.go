package assignor_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/plugins/assignor"
	"github.com/sluicehq/sluice/plugins/assignor/assignortest"
)

// roundRobin is the complete plugin of plugins/README.md: it deals each
// topic's partitions to its subscribers in turn.
type roundRobin struct{}

func (roundRobin) Name() string { return "round-robin" }

func (roundRobin) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	if err := assignor.Validate(in); err != nil {
		return nil, err // wraps assignor.ErrInvalidInput
	}
	members := slices.SortedFunc(slices.Values(in.Members), func(a, b assignor.Member) int { return cmp.Compare(a.ID, b.ID) })
	out := assignor.Assignment{}
	for _, m := range members {
		out[m.ID] = map[assignor.TopicID][]int32{}
	}
	next := 0
	for _, t := range in.Topics {
		var subs []string
		for _, m := range members {
			if slices.Contains(m.Topics, t.Name) {
				subs = append(subs, m.ID)
			}
		}
		for p := int32(0); p < t.Partitions && len(subs) > 0; p++ {
			id := subs[next%len(subs)]
			out[id][t.ID] = append(out[id][t.ID], p) // ascending per topic
			next++
		}
	}
	return out, nil
}

// The README's example passes the standard suite.
func TestRoundRobinPassesSuite(t *testing.T) {
	assignortest.Suite(t, roundRobin{})
}

func ExampleCheck() {
	in := assignortest.Group(2, assignortest.Topics("orders", 3))
	out, err := roundRobin{}.Assign(context.Background(), in)
	if err == nil {
		err = assignor.Check(in, out) // what the broker does with every answer
	}
	fmt.Println(len(out), err)

	out["m000"][assignortest.ID("orders")] = []int32{0, 1, 2} // m001 has 1 too now
	fmt.Println(assignor.Check(in, out) != nil)
	// Output:
	// 2 <nil>
	// true
}
