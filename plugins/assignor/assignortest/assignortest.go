// Package assignortest helps authors of assignor plugins test their
// assignors in process, before building a plugin binary.
//
// Check runs an assignor on one Input and verifies the answer the way the
// broker does (assignor.Check); Suite runs a standard set of scenarios
// and fails the test on any broken invariant:
//
//	func TestMyAssignor(t *testing.T) {
//		assignortest.Suite(t, myAssignor{})
//
//		in := assignortest.Group(3, assignortest.Topics("orders", 12))
//		out := assignortest.Check(t, myAssignor{}, in)
//		// ... assertions specific to myAssignor on out
//	}
//
// The invariants are the contract of every assignor (see the assignor
// package): a valid Input gets an assignment that Check accepts (every
// partition of a subscribed topic owned by exactly one subscriber, nothing
// unknown, lists ascending); Assign does not modify its Input; it is safe to
// call concurrently; and an invalid Input (duplicate or empty member ids,
// inconsistent topic metadata) is an error, not a panic. Balance is not
// asserted, since assignors may trade it for something else (racks, lag);
// Suite logs the spread and the partitions moved at each membership change.
package assignortest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/plugins/assignor"
)

// Check runs a.Assign on in, fails t if it returns an error, modifies in, or
// returns an assignment assignor.Check rejects, and returns the
// assignment.
func Check(t testing.TB, a assignor.Assignor, in assignor.Input) assignor.Assignment {
	t.Helper()
	out, err := assign(context.Background(), a, in)
	if err != nil {
		t.Fatalf("%s: %v", a.Name(), err)
	}
	return out
}

// assign runs a.Assign and checks the answer and that in is unchanged.
func assign(ctx context.Context, a assignor.Assignor, in assignor.Input) (assignor.Assignment, error) {
	before := clone(in)
	out, err := a.Assign(ctx, in)
	if !reflect.DeepEqual(before, in) {
		return nil, fmt.Errorf("assign modified its input")
	}
	if err != nil {
		return nil, fmt.Errorf("assign: %w", err)
	}
	if err := assignor.Check(in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ID returns a topic id derived from name, for tests.
func ID(name string) assignor.TopicID {
	var id assignor.TopicID
	for i := range id {
		id[i] = byte(i)
	}
	for i, c := range []byte(name) {
		id[i%len(id)] = id[i%len(id)]*31 + c
	}
	id[15] ^= byte(len(name))
	return id
}

// Topics builds a topics map from name, partitions pairs:
// Topics("a", 3, "b", 6). Ids come from ID.
func Topics(namesAndPartitions ...any) map[assignor.TopicID]assignor.Topic {
	out := make(map[assignor.TopicID]assignor.Topic)
	for i := 0; i+1 < len(namesAndPartitions); i += 2 {
		name := namesAndPartitions[i].(string)
		id := ID(name)
		out[id] = assignor.Topic{ID: id, Name: name, Partitions: int32(namesAndPartitions[i+1].(int))}
	}
	return out
}

// Group builds an Input of n members m000, m001, ... each subscribed to every
// topic of topics, with no current assignment.
func Group(n int, topics map[assignor.TopicID]assignor.Topic) assignor.Input {
	names := make([]string, 0, len(topics))
	for _, t := range topics {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	in := assignor.Input{Topics: topics}
	for i := range n {
		in.Members = append(in.Members, assignor.Member{ID: fmt.Sprintf("m%03d", i), Topics: names})
	}
	return in
}

// Suite runs the standard scenarios on a, each as a subtest, and fails on any
// broken invariant (see the package documentation).
func Suite(t *testing.T, a assignor.Assignor) {
	t.Helper()
	if a.Name() == "" {
		t.Errorf("empty Name")
	}
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			out := Check(t, a, c.in)
			spread, homogeneous := balance(c.in, out)
			t.Logf("spread %d (homogeneous %v)", spread, homogeneous)
		})
	}
	t.Run("invalid input", func(t *testing.T) {
		for name, in := range invalidInputs() {
			out, err := func() (out assignor.Assignment, err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
						t.Errorf("%s: Assign panicked: %v", name, r)
					}
				}()
				return a.Assign(context.Background(), in)
			}()
			if err == nil {
				t.Errorf("%s: no error (assignment %v); want one wrapping assignor.ErrInvalidInput (see assignor.Validate)", name, out)
			}
		}
	})
	t.Run("membership changes", func(t *testing.T) {
		topics := Topics("a", 12, "b", 7, "c", 1)
		initial := Group(3, topics).Members
		join := func(id string) *assignor.Member {
			return &assignor.Member{ID: id, Topics: []string{"a", "b", "c"}}
		}
		steps := []step{
			{},                                  // nothing changes
			{Join: join("m100")},                // one joins
			{Join: join("m101")},                // another
			{Leave: "m001"},                     // one leaves
			{Join: join("m102"), Leave: "m000"}, // one replaced
			{Join: &assignor.Member{ID: "m103", Topics: []string{"b"}}}, // heterogeneous
			{Leave: "m002"},
			{Leave: "m100"},
			{Leave: "m101"},
			{Leave: "m102"}, // only m103 is left
		}
		results, err := scenario(context.Background(), a, topics, initial, steps)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range results {
			t.Logf("step %d: %d members, moved %d, released %d, spread %d", i, r.Members, r.Moved, r.Released, r.Spread)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		in := Group(7, Topics("a", 50, "b", 13))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				if _, err := assign(context.Background(), a, in); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

type testCase struct {
	name string
	in   assignor.Input
}

func cases() []testCase {
	var cs []testCase
	add := func(name string, in assignor.Input) { cs = append(cs, testCase{name, in}) }

	add("empty group", assignor.Input{Topics: Topics("a", 3)})
	add("nothing at all", assignor.Input{})
	add("no topics", assignor.Input{Members: []assignor.Member{{ID: "m1"}, {ID: "m2", Topics: []string{"missing"}}}})
	add("one member", Group(1, Topics("a", 5, "b", 3)))
	add("homogeneous", Group(4, Topics("a", 10, "b", 3, "c", 1)))
	add("more members than partitions", Group(9, Topics("a", 4)))
	add("topic with 0 partitions", Group(3, Topics("empty", 0, "a", 2)))

	// Heterogeneous subscriptions, including an unsubscribed topic, a missing
	// one, duplicates and a member subscribing to nothing.
	topics := Topics("a", 6, "b", 4, "c", 9, "unsubscribed", 5)
	add("heterogeneous", assignor.Input{Topics: topics, Members: []assignor.Member{
		{ID: "m1", Topics: []string{"a"}},
		{ID: "m2", Topics: []string{"a", "b", "b"}},
		{ID: "m3", Topics: []string{"c", "not-yet-created"}},
		{ID: "m4", Topics: []string{"b", "c"}},
		{ID: "m5"},
	}})

	// Stale and conflicting current assignments, as the coordinator may pass.
	add("stale current", assignor.Input{Topics: topics, Members: []assignor.Member{
		{ID: "m1", Topics: []string{"a", "b"}, Current: map[assignor.TopicID][]int32{
			ID("a"): {0, 1, 2, 2, 99, -1}, ID("c"): {0}, ID("gone"): {1}}},
		{ID: "m2", Topics: []string{"a"}, Current: map[assignor.TopicID][]int32{ID("a"): {2, 3}}},
		{ID: "m3", InstanceID: "static-3", Topics: []string{"b", "c"}, Current: map[assignor.TopicID][]int32{ID("b"): {3, 1}}},
	}})

	// Racks: full, partial and absent metadata; members with and without a rack.
	racked := Topics("r", 8, "partial", 4, "none", 3)
	r := racked[ID("r")]
	for p := range r.Partitions {
		r.PartitionRacks = append(r.PartitionRacks, []string{fmt.Sprintf("rack-%d", p%3), fmt.Sprintf("rack-%d", (p+1)%3)})
	}
	racked[r.ID] = r
	partial := racked[ID("partial")]
	partial.PartitionRacks = [][]string{{"rack-0"}, nil, {"rack-9"}, {}}
	racked[partial.ID] = partial
	add("racks", assignor.Input{Topics: racked, Members: []assignor.Member{
		{ID: "m1", Rack: "rack-0", Topics: []string{"r", "partial", "none"}},
		{ID: "m2", Rack: "rack-1", Topics: []string{"r", "partial", "none"}},
		{ID: "m3", Rack: "rack-7", Topics: []string{"r", "none"}},
		{ID: "m4", Topics: []string{"r", "partial"}},
	}})

	// Offsets and lag, some unknown (-1).
	lagged := Topics("l", 6, "nolag", 2)
	l := lagged[ID("l")]
	l.PartitionEndOffsets = []int64{100, 0, 5000, 7, 1 << 40, 3}
	l.PartitionLag = []int64{100, 0, 4000, -1, 1 << 40, 3}
	lagged[l.ID] = l
	in := Group(3, lagged)
	in.Members[0].Current = map[assignor.TopicID][]int32{l.ID: {0, 1, 2, 3, 4, 5}}
	add("lag", in)

	// A large group: 100 members, 1000 partitions over 4 topics, half the
	// members also owning what they had in a previous (fake) assignment.
	big := Group(100, Topics("big-a", 400, "big-b", 300, "big-c", 200, "big-d", 100))
	for i := range big.Members[:50] {
		big.Members[i].Current = map[assignor.TopicID][]int32{ID("big-a"): {int32(i * 8), int32(i*8 + 1)}}
	}
	add("large group 100x1000", big)
	return cs
}

func invalidInputs() map[string]assignor.Input {
	topics := Topics("a", 3)
	bad := func(f func(t *assignor.Topic)) map[assignor.TopicID]assignor.Topic {
		t := topics[ID("a")]
		f(&t)
		return map[assignor.TopicID]assignor.Topic{ID("a"): t}
	}
	sub := []string{"a"}
	return map[string]assignor.Input{
		"duplicate member id": {Topics: topics, Members: []assignor.Member{{ID: "m", Topics: sub}, {ID: "m", Topics: sub}}},
		"empty member id":     {Topics: topics, Members: []assignor.Member{{ID: "", Topics: sub}}},
		"key differs from id": {Topics: map[assignor.TopicID]assignor.Topic{ID("x"): topics[ID("a")]}, Members: []assignor.Member{{ID: "m", Topics: sub}}},
		"negative partitions": {Topics: bad(func(t *assignor.Topic) { t.Partitions = -1 }), Members: []assignor.Member{{ID: "m", Topics: sub}}},
		"short rack list":     {Topics: bad(func(t *assignor.Topic) { t.PartitionRacks = [][]string{{"r"}} }), Members: []assignor.Member{{ID: "m", Topics: sub}}},
		"long lag list":       {Topics: bad(func(t *assignor.Topic) { t.PartitionLag = []int64{1, 2, 3, 4} }), Members: []assignor.Member{{ID: "m", Topics: sub}}},
	}
}

// clone deep-copies in, keeping nil and empty apart, to detect modification.
func clone(in assignor.Input) assignor.Input {
	out := assignor.Input{Members: slices.Clone(in.Members)}
	for i, m := range out.Members {
		out.Members[i].Topics = slices.Clone(m.Topics)
		if m.Current != nil {
			out.Members[i].Current = make(map[assignor.TopicID][]int32, len(m.Current))
			for id, ps := range m.Current {
				out.Members[i].Current[id] = slices.Clone(ps)
			}
		}
	}
	if in.Topics != nil {
		out.Topics = make(map[assignor.TopicID]assignor.Topic, len(in.Topics))
		for id, t := range in.Topics {
			t.PartitionRacks = slices.Clone(t.PartitionRacks)
			for p, r := range t.PartitionRacks {
				t.PartitionRacks[p] = slices.Clone(r)
			}
			t.PartitionEndOffsets = slices.Clone(t.PartitionEndOffsets)
			t.PartitionLag = slices.Clone(t.PartitionLag)
			out.Topics[id] = t
		}
	}
	return out
}
