package consumer

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

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
// racks set it is a RackUser (as uniform itself is).
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

func TestPartitionRacksForUniformNotRange(t *testing.T) {
	// Uniform is rack-aware and asks for partition racks; range ignores them.
	want := map[string]bool{"uniform": true, "range": false}
	for _, a := range []assignor.Assignor{assignor.Uniform{}, assignor.Range{}} {
		ru, ok := a.(RackUser)
		if got := ok && ru.UsesPartitionRacks(); got != want[a.Name()] {
			t.Errorf("%s: UsesPartitionRacks %v, want %v", a.Name(), got, want[a.Name()])
		}
	}
}

// A heartbeat-driven group with the default assignor (uniform): members that
// send a RackID end up owning partitions with a replica in their rack, as far
// as balance and stickiness allow; without RackIDs the same group gets the
// rack-blind assignment.
func TestUniformRackLocalHeartbeats(t *testing.T) {
	for _, withRacks := range []bool{true, false} {
		t.Run(fmt.Sprintf("rackIDs=%v", withRacks), func(t *testing.T) {
			h := newHarness(t, Config{})
			id := h.topics.add("t", 12)
			// Partition p's replicas are on r1 (p even) or r2 (p odd), and on
			// r9, where no member is.
			partRacks := make([][]string, 12)
			for p := range partRacks {
				partRacks[p] = []string{fmt.Sprint("r", 1+p%2), "r9"}
			}
			rt := &rackTopics{fakeTopics: h.topics, racks: map[assignor.TopicID][][]string{id: partRacks}}
			rackOf := map[string]string{"m1": "r1", "m2": "r2", "m3": "r1", "m4": "r2"}
			var clients []*client
			step := func(c *client) {
				t.Helper()
				req := hbReq(c.id, c.epoch, c.owned)
				if !c.joined {
					req = joinReq(c.id, "t")
					if withRacks {
						req.RackID = strp(rackOf[c.id])
					}
				}
				resp := h.mustOK(h.g.Heartbeat(context.Background(), req, req.Version, Client{}, rt, h.now))
				checkInvariants(t, h.g)
				c.joined, c.epoch = true, resp.MemberEpoch
				if a := respAssignment(resp); a != nil {
					c.owned = a
				}
			}
			// join adds members one at a time, each time heartbeating
			// everyone until the group is stable.
			join := func(ids ...string) {
				t.Helper()
				for _, m := range ids {
					clients = append(clients, &client{id: m})
					for round := 0; h.g.State() != Stable || round == 0; round++ {
						if round == 10 {
							t.Fatalf("not stable: %v", h.g.State())
						}
						h.now = h.now.Add(time.Second)
						for _, c := range clients {
							step(c)
						}
						checkOwned(t, clients)
					}
				}
				for _, c := range clients {
					if !reflect.DeepEqual(c.owned, h.target()[c.id]) {
						t.Fatalf("%s owns %v, target %v", c.id, c.owned, h.target()[c.id])
					}
				}
			}
			// local counts the partitions clients own on their rack.
			local := func() int {
				n := 0
				for _, c := range clients {
					for _, p := range c.owned[id] {
						if slices.Contains(partRacks[p], rackOf[c.id]) {
							n++
						}
					}
				}
				return n
			}

			join("m1", "m2")
			if rt.calls == 0 {
				t.Fatal("uniform did not ask for partition racks")
			}
			if withRacks {
				// m2 joining takes m1's partitions on r2: all are local.
				want := assignor.Assignment{"m1": {id: {0, 2, 4, 6, 8, 10}}, "m2": {id: {1, 3, 5, 7, 9, 11}}}
				if got := h.target(); !reflect.DeepEqual(got, want) {
					t.Errorf("2 members: target %v, want %v", got, want)
				}
			} else if n := local(); n != 6 { // m1 6-11, m2 0-5
				t.Errorf("2 members, rack-blind: %d local: %v", n, h.target())
			}

			// m3 (r1) takes two of m1's and, as balance needs, two of m2's
			// (off its rack); m4 (r2) then takes one of those from m3, one of
			// m2's and, as balance needs again, one of m1's (off its rack):
			// 10 local, with no more moves than balance needs. Rack-blind,
			// most land off rack.
			join("m3", "m4")
			want := map[bool]int{true: 10, false: 4}[withRacks]
			if n := local(); n != want {
				t.Errorf("4 members: %d of 12 partitions on their owner's rack, want %d: %v", n, want, h.target())
			}
			for _, c := range clients {
				if count(c.owned) != 3 {
					t.Errorf("%s owns %v", c.id, c.owned)
				}
			}
		})
	}
}
