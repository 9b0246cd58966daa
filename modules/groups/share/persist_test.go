package share

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// restoreFrom replaces h's group with one restored from p, as a coordinator
// does after a restart, and checks its invariants.
func (h *harness) restoreFrom(p Persisted) {
	h.t.Helper()
	h.g = Restore("g", h.g.cfg, p, h.topics, h.now)
	checkInvariants(h.t, h.g)
}

// settle heartbeats every member until all are at the group epoch.
func (h *harness) settle() {
	h.t.Helper()
	for range 3 {
		for _, m := range h.g.Members() {
			h.mustOK(h.hb(hbReq(m.ID, m.MemberEpoch)))
		}
	}
}

// A group restored from its snapshot is the same group: members, epochs,
// assignments and targets come back, and members heartbeat on without a new
// group epoch or assignment.
func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 5)
	h.topics.add("u", 1)
	for _, m := range []string{"a", "b", "c"} {
		req := joinReq(m, "t", "u")
		if m == "b" {
			req.RackID = strp("r1")
		}
		h.mustOK(h.hb(req))
	}
	h.settle()
	before, snap := h.g.Members(), h.g.Snapshot()
	h.advance(10 * time.Second)
	h.restoreFrom(snap)
	if got := h.g.Members(); !reflect.DeepEqual(got, before) {
		t.Fatalf("members after restore:\n%+v\nwant\n%+v", got, before)
	}
	if got := h.g.Snapshot(); !reflect.DeepEqual(got, snap) {
		t.Fatalf("snapshot after restore:\n%+v\nwant\n%+v", got, snap)
	}
	// Sessions restart at the restore.
	if at, _ := h.g.NextDeadline(); !at.Equal(h.now.Add(session)) {
		t.Fatalf("deadline %v, want %v", at, h.now.Add(session))
	}
	for _, m := range before {
		resp := h.mustOK(h.hb(hbReq(m.ID, m.MemberEpoch)))
		if resp.MemberEpoch != m.MemberEpoch || resp.Assignment != nil {
			t.Fatalf("%s after restore: %+v", m.ID, resp)
		}
	}
	if h.g.GroupEpoch() != snap.GroupEpoch {
		t.Fatalf("group epoch %d, was %d", h.g.GroupEpoch(), snap.GroupEpoch)
	}
	// The restored group is a working one: a new member splits the partitions.
	h.mustOK(h.hb(joinReq("d", "t")))
	h.settle()
}

// A group restored mid-change (a member behind the group epoch) keeps going.
func TestRestoreMidChange(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 4)
	h.mustOK(h.hb(joinReq("a", "t")))
	h.mustOK(h.hb(joinReq("b", "t"))) // a still at epoch 1 with all four
	h.restoreFrom(h.g.Snapshot())
	resp := h.mustOK(h.hb(hbReq("a", 1)))
	if resp.MemberEpoch != 2 || count(respAssignment(t, resp)) != 2 {
		t.Fatalf("a after restore: %+v", resp)
	}
}

// Topics changed while the coordinator was away bump the group epoch at the
// restore; the next heartbeat brings the new partitions.
func TestRestoreNoticesMetadataChange(t *testing.T) {
	h := newHarness(t, Config{})
	id := h.topics.add("t", 2)
	h.mustOK(h.hb(joinReq("a", "t")))
	snap := h.g.Snapshot()
	h.topics.add("t", 4)
	h.restoreFrom(snap)
	if h.g.GroupEpoch() != snap.GroupEpoch+1 {
		t.Fatalf("group epoch %d, persisted %d", h.g.GroupEpoch(), snap.GroupEpoch)
	}
	resp := h.mustOK(h.hb(hbReq("a", 1)))
	if resp.MemberEpoch != 2 || !reflect.DeepEqual(respAssignment(t, resp), tps{id: {0, 1, 2, 3}}) {
		t.Fatalf("after restore: %+v", resp)
	}

	// All subscribed topics deleted while away is a change too.
	snap = h.g.Snapshot()
	delete(h.topics.byName, "t")
	h.restoreFrom(snap)
	resp = h.mustOK(h.hb(hbReq("a", 2)))
	if resp.MemberEpoch != 3 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 0 {
		t.Fatalf("after delete: %+v", resp)
	}
}

// Corrupt input is repaired: bad ids, duplicates, bad partitions, epochs out
// of range, stray or missing targets.
func TestRestoreRepairs(t *testing.T) {
	h := newHarness(t, Config{})
	id := h.topics.add("t", 4)
	p := Persisted{
		GroupEpoch: 3, TargetEpoch: 5, // group epoch below target epoch
		Targets: map[string]map[assignor.TopicID][]int32{
			"a":     {id: {0, 1}},
			"ghost": {id: {2, 3}},
		},
		Members: []MemberRecord{
			{ID: "b", Epoch: 9, SubscribedTopicNames: []string{"t", "t"}, Assigned: map[assignor.TopicID][]int32{id: {3, 2, 2, -1}}},
			{ID: "a", Epoch: 5, SubscribedTopicNames: []string{"t"}, Assigned: map[assignor.TopicID][]int32{id: {0, 1}, topicID("x"): {}}},
			{ID: "a", Epoch: 1},
			{ID: " "},
		},
	}
	h.restoreFrom(p)
	ms := h.g.Members()
	if len(ms) != 2 || ms[0].ID != "a" || ms[1].ID != "b" {
		t.Fatalf("members %+v", ms)
	}
	if ms[1].MemberEpoch != 5 || !reflect.DeepEqual(ms[1].Assignment, tps{id: {2, 3}}) || len(ms[1].SubscribedTopicNames) != 1 {
		t.Fatalf("b repaired to %+v", ms[1])
	}
	if !reflect.DeepEqual(ms[0].Assignment, tps{id: {0, 1}}) {
		t.Fatalf("a repaired to %+v", ms[0])
	}
	// b has no target: the group epoch is bumped past the target's.
	if h.g.GroupEpoch() != 6 {
		t.Fatalf("group epoch %d", h.g.GroupEpoch())
	}
	h.settle()
	if h.g.Subscribers(id, 2) != 1 || h.g.Subscribers(id, 0) != 1 {
		t.Fatalf("after settling: %+v", h.g.Members())
	}
}

// An empty group comes back empty with its epoch.
func TestRestoreEmpty(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 4)
	h.mustOK(h.hb(joinReq("a", "t")))
	h.mustOK(h.hb(hbReq("a", -1)))
	h.restoreFrom(h.g.Snapshot())
	if !h.g.IsEmpty() || h.g.GroupEpoch() != 2 || h.g.State() != Empty {
		t.Fatalf("restored empty group: epoch %d, state %v", h.g.GroupEpoch(), h.g.State())
	}
	h.restoreFrom(Persisted{})
	if !h.g.IsEmpty() || h.g.GroupEpoch() != 0 {
		t.Fatal("zero Persisted")
	}
	g := Restore("g", Config{}, Persisted{}, nil, t0)
	if g.Size() != 0 {
		t.Fatal("nil topics")
	}
}

// A target that is not what Assign would compute (a partition given to
// nobody) bumps the group epoch at the restore.
func TestRestoreRecomputesABadTarget(t *testing.T) {
	h := newHarness(t, Config{})
	id := h.topics.add("t", 4)
	h.restoreFrom(Persisted{
		GroupEpoch: 2, TargetEpoch: 2,
		Targets: map[string]map[assignor.TopicID][]int32{"a": {id: {0}}, "b": {id: {1, 2}}},
		Members: []MemberRecord{
			{ID: "a", Epoch: 2, SubscribedTopicNames: []string{"t"}, Assigned: map[assignor.TopicID][]int32{id: {0}}},
			{ID: "b", Epoch: 2, SubscribedTopicNames: []string{"t"}, Assigned: map[assignor.TopicID][]int32{id: {1, 2}}},
		},
	})
	if h.g.GroupEpoch() != 3 {
		t.Fatalf("group epoch %d", h.g.GroupEpoch())
	}
	h.settle()
	if h.g.Subscribers(id, 3) != 1 {
		t.Fatalf("partition 3 still unassigned: %+v", h.g.Members())
	}
}
