package assignortest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/plugins/assignor"
	"github.com/sluicehq/sluice/plugins/assignor/assignortest"
)

// broken gives every partition to the first member, whatever it subscribes to.
type broken struct{}

func (broken) Name() string { return "broken" }
func (broken) Assign(_ context.Context, in assignor.Input) (assignor.Assignment, error) {
	out := assignor.Assignment{}
	if len(in.Members) == 0 {
		return out, nil
	}
	m := map[assignor.TopicID][]int32{}
	for id, t := range in.Topics {
		for p := range t.Partitions {
			m[id] = append(m[id], p)
		}
	}
	out[in.Members[0].ID] = m
	return out, nil
}

// mutating modifies its input, and answers validly otherwise: each topic goes
// whole to its first subscriber.
type mutating struct{}

func (mutating) Name() string { return "mutating" }
func (mutating) Assign(_ context.Context, in assignor.Input) (assignor.Assignment, error) {
	out := assignor.Assignment{}
	for id, t := range in.Topics {
		for _, m := range in.Members {
			if slices.Contains(m.Topics, t.Name) {
				if out[m.ID] == nil {
					out[m.ID] = map[assignor.TopicID][]int32{}
				}
				for p := range t.Partitions {
					out[m.ID][id] = append(out[m.ID][id], p)
				}
				break
			}
		}
	}
	if err := assignor.Check(in, out); err != nil {
		panic(err) // not returned: the test would pass without showing that the change is caught
	}
	if len(in.Members) > 0 {
		in.Members[0].Rack = "changed"
	}
	return out, nil
}

func TestCheckCatches(t *testing.T) {
	for name, a := range map[string]assignor.Assignor{"broken": broken{}, "mutating": mutating{}} {
		ft := &fakeT{TB: t}
		func() {
			defer func() { _ = recover() }() // fakeT.Fatalf panics to stop like FailNow
			in := assignortest.Group(2, assignortest.Topics("a", 4, "b", 2))
			in.Members[0].Topics = []string{"a"} // broken gives m000 topic b too
			assignortest.Check(ft, a, in)
		}()
		if !ft.failed {
			t.Errorf("%s: Check did not fail", name)
		}
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = true
	panic("fatal")
}

func TestHelpers(t *testing.T) {
	if assignortest.ID("a") == assignortest.ID("b") || assignortest.ID("ab") == assignortest.ID("ba") {
		t.Error("ID collides")
	}
	in := assignortest.Group(3, assignortest.Topics("a", 2, "b", 5))
	if len(in.Members) != 3 || len(in.Topics) != 2 || in.Topics[assignortest.ID("b")].Partitions != 5 {
		t.Fatalf("Group: %+v", in)
	}
	if err := assignor.Validate(in); err != nil {
		t.Fatal(err)
	}
}
