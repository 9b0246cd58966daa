package consumer

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// rackTopics is a fakeTopics that is also a TopicRacks.
type rackTopics struct {
	*fakeTopics
	racks map[assignor.TopicID][][]string
	calls int
}

func (r *rackTopics) PartitionRacks(id assignor.TopicID, partitions int32) ([][]string, bool) {
	r.calls++
	rs, ok := r.racks[id]
	return rs, ok
}

// recordingAssignor is uniform, remembering the Input it was last given; with
// racks set it is a RackUser.
type recordingAssignor struct {
	name  string
	racks bool
	mu    sync.Mutex
	last  assignor.Input
}

func (a *recordingAssignor) Name() string             { return a.name }
func (a *recordingAssignor) UsesPartitionRacks() bool { return a.racks }

func (a *recordingAssignor) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	a.mu.Lock()
	a.last = in
	a.mu.Unlock()
	return assignor.Uniform{}.Assign(ctx, in)
}

func (a *recordingAssignor) input() assignor.Input {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

func TestPartitionRacksOnlyForRackUsers(t *testing.T) {
	withRacks := [][]string{{"r1", "r2"}, nil, {"r2"}}
	for _, tc := range []struct {
		name  string
		a     assignor.Assignor
		racks map[string][][]string // per topic name; absent: ok false
		want  map[string][][]string // PartitionRacks the assignor sees
		calls bool
	}{
		{name: "rack user", a: &recordingAssignor{name: "rr", racks: true},
			racks: map[string][][]string{"t": withRacks, "u": {{"r1"}}, "short": {{"r1"}, {"r2"}}},
			want:  map[string][][]string{"t": withRacks}, calls: true},
		{name: "rack user, no racks", a: &recordingAssignor{name: "rr", racks: true},
			racks: map[string][][]string{}, want: map[string][][]string{}, calls: true},
		{name: "declines racks", a: &recordingAssignor{name: "rr", racks: false},
			racks: map[string][][]string{"t": withRacks}, want: map[string][][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{Assignors: []assignor.Assignor{tc.a}})
			rt := &rackTopics{fakeTopics: h.topics, racks: map[assignor.TopicID][][]string{}}
			h.topics.add("t", 3)
			h.topics.add("u", 2)     // one rack list for two partitions: ignored
			h.topics.add("short", 1) // two rack lists for one partition: ignored
			for n, rs := range tc.racks {
				rt.racks[topicID(n)] = rs
			}
			h.mustOK(h.g.Heartbeat(context.Background(), joinReq("m1", "t", "u", "short"), 1, Client{}, rt, h.now))
			in := tc.a.(*recordingAssignor).input()
			if len(in.Topics) != 3 {
				t.Fatalf("assignor saw %d topics: %+v", len(in.Topics), in)
			}
			for _, n := range []string{"t", "u", "short"} {
				got := in.Topics[topicID(n)].PartitionRacks
				if want := tc.want[n]; !reflect.DeepEqual(got, want) {
					t.Errorf("topic %s: PartitionRacks %v, want %v", n, got, want)
				}
			}
			if (rt.calls > 0) != tc.calls {
				t.Errorf("TopicRacks asked %d times", rt.calls)
			}
		})
	}
}

func TestPartitionRacksNotForBuiltins(t *testing.T) {
	// Uniform and range are not RackUsers: racks would change uniform's answer.
	for _, a := range []assignor.Assignor{assignor.Uniform{}, assignor.Range{}} {
		if ru, ok := a.(RackUser); ok && ru.UsesPartitionRacks() {
			t.Errorf("%s asks for partition racks", a.Name())
		}
	}
}
