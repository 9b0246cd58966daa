package main

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/plugins/assignor"
	"github.com/sluicehq/sluice/plugins/assignor/assignortest"
)

func TestSuite(t *testing.T) { assignortest.Suite(t, LagBalanced{}) }

// loads returns each member's total weight (1 + lag) in out.
func loads(in assignor.Input, out assignor.Assignment) map[string]int64 {
	l := map[string]int64{}
	for _, m := range in.Members {
		l[m.ID] = 0
		for id, ps := range out[m.ID] {
			for _, p := range ps {
				l[m.ID] += 1 + in.Topics[id].PartitionLag[p]
			}
		}
	}
	return l
}

func spread(l map[string]int64) int64 {
	lo, hi := int64(1<<62), int64(0)
	for _, v := range l {
		lo, hi = min(lo, v), max(hi, v)
	}
	return hi - lo
}

func withLag(rng *rand.Rand, topics map[assignor.TopicID]assignor.Topic, maxLag int64) (heaviest int64) {
	for id, t := range topics {
		t.PartitionLag = make([]int64, t.Partitions)
		for p := range t.PartitionLag {
			t.PartitionLag[p] = rng.Int64N(maxLag)
			heaviest = max(heaviest, 1+t.PartitionLag[p])
		}
		topics[id] = t
	}
	return heaviest
}

func TestLagSpreadBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 20 {
		members := 2 + rng.IntN(10)
		topics := assignortest.Topics("a", 1+rng.IntN(40), "b", 1+rng.IntN(40))
		heaviest := withLag(rng, topics, 1+rng.Int64N(100000))
		in := assignortest.Group(members, topics)
		out := assignortest.Check(t, LagBalanced{}, in)
		l := loads(in, out)
		if s := spread(l); s > heaviest {
			t.Errorf("run %d: %d members: lag spread %d > heaviest partition %d: %v", run, members, s, heaviest, l)
		}
	}
}

func TestHotPartitionsSpread(t *testing.T) {
	// Four hot partitions among many idle ones: each of four members gets one.
	topics := assignortest.Topics("a", 16)
	a := topics[assignortest.ID("a")]
	a.PartitionLag = make([]int64, 16)
	for _, p := range []int{0, 1, 2, 3} {
		a.PartitionLag[p] = 1_000_000
	}
	topics[a.ID] = a
	in := assignortest.Group(4, topics)
	// Everything currently on m000: the hot partitions must move.
	in.Members[0].Current = map[assignor.TopicID][]int32{a.ID: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}
	out := assignortest.Check(t, LagBalanced{}, in)
	for _, m := range in.Members {
		hot := 0
		for _, p := range out[m.ID][a.ID] {
			if p < 4 {
				hot++
			}
		}
		if hot != 1 {
			t.Errorf("%s has %d hot partitions: %v", m.ID, hot, out)
		}
	}
	if s := spread(loads(in, out)); s > 1_000_001 {
		t.Errorf("spread %d", s)
	}
}

func TestBalancedCurrentKept(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	topics := assignortest.Topics("a", 30, "b", 12)
	withLag(rng, topics, 1000)
	in := assignortest.Group(5, topics)
	out := assignortest.Check(t, LagBalanced{}, in)
	for i := range in.Members {
		in.Members[i].Current = out[in.Members[i].ID]
	}
	again := assignortest.Check(t, LagBalanced{}, in)
	if fmt.Sprint(again) != fmt.Sprint(out) {
		t.Errorf("a balanced assignment was changed:\n%v\n%v", out, again)
	}

	// A member joining takes load; most partitions stay where they were (the
	// rebalancing moves some among the others too, to even out the lag).
	in.Members = append(in.Members, assignor.Member{ID: "new", Topics: []string{"a", "b"}})
	joined := assignortest.Check(t, LagBalanced{}, in)
	moved := 0
	for _, m := range in.Members[:5] {
		for id, ps := range out[m.ID] {
			for _, p := range ps {
				found := false
				for _, q := range joined[m.ID][id] {
					found = found || q == p
				}
				if !found {
					moved++
				}
			}
		}
	}
	n := len(joined["new"][assignortest.ID("a")]) + len(joined["new"][assignortest.ID("b")])
	if n == 0 || moved > 42/2 {
		t.Errorf("new member got %d partitions, %d of 42 moved", n, moved)
	}
	t.Logf("new member got %d partitions, %d of 42 moved", n, moved)
}

func TestNoLagBalancesCounts(t *testing.T) {
	in := assignortest.Group(6, assignortest.Topics("a", 25, "b", 4))
	out := assignortest.Check(t, LagBalanced{}, in)
	lo, hi := 1<<30, 0
	for _, m := range in.Members {
		n := len(out[m.ID][assignortest.ID("a")]) + len(out[m.ID][assignortest.ID("b")])
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		t.Errorf("members own %d to %d partitions", lo, hi)
	}
}
