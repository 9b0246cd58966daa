package consumer

import (
	"reflect"
	"testing"
	"time"
)

// restoreFrom replaces h's group with one restored from p, as a coordinator does after
// a restart, and checks its invariants.
func (h *harness) restoreFrom(p Persisted) {
	h.t.Helper()
	h.g = Restore("g", h.g.cfg, p, h.topics, h.now)
	checkInvariants(h.t, h.g)
}

// A group restored from its persisted state keeps member epochs, assignments and
// targets: members heartbeat on without rejoining or a new group epoch.
func TestRestoreKeepsEpochsAndAssignments(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 6)
	cs := []*client{{id: "a"}, {id: "b"}, {id: "c"}}
	for range 5 {
		for _, c := range cs {
			h.step(c, "t")
		}
	}
	if h.g.State() != Stable {
		t.Fatalf("state %v", h.g.State())
	}
	before, epoch := h.g.Members(), h.g.GroupEpoch()
	snap := h.g.Snapshot()
	h.restoreFrom(snap)
	if got := h.g.Members(); !reflect.DeepEqual(got, before) {
		t.Fatalf("members after restore:\n%+v\nwant\n%+v", got, before)
	}
	for _, c := range cs {
		resp := h.mustOK(h.hb(hbReq(c.id, c.epoch, c.owned)))
		if resp.MemberEpoch != c.epoch || resp.Assignment != nil {
			t.Errorf("%s: epoch %d (was %d), assignment %v after restore", c.id, resp.MemberEpoch, c.epoch, resp.Assignment)
		}
	}
	if h.g.GroupEpoch() != epoch || h.g.State() != Stable {
		t.Errorf("group epoch %d (was %d), state %v", h.g.GroupEpoch(), epoch, h.g.State())
	}
}

// A topic that changed while the coordinator was away (partitions added) bumps the
// group epoch at the first heartbeat after the restore, and the new partitions are
// assigned.
func TestRestoreNoticesMetadataChange(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 2)
	c := &client{id: "a"}
	for range 3 {
		h.step(c, "t")
	}
	snap := h.g.Snapshot()
	h.topics.add("t", 4)
	h.restoreFrom(snap)
	for range 3 {
		h.step(c)
	}
	if count(c.owned) != 4 || c.epoch <= snap.GroupEpoch {
		t.Fatalf("owned %v at epoch %d (persisted group epoch %d)", c.owned, c.epoch, snap.GroupEpoch)
	}
}

// TakeChanges reports what changed since the last take: the heartbeating members,
// the recomputed target, and members that left.
func TestTakeChanges(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 4)
	a, b := &client{id: "a"}, &client{id: "b"}
	h.step(a, "t")
	p := h.g.TakeChanges()
	if !p.Target || len(p.Members) != 1 || p.Members[0].ID != "a" || p.GroupEpoch != 1 || p.TargetEpoch != 1 {
		t.Fatalf("after a joined: %+v", p)
	}
	if h.g.HasChanges() {
		t.Fatal("changes left after TakeChanges")
	}
	h.step(b, "t")
	p = h.g.TakeChanges()
	if !p.Target || len(p.Targets) != 2 || len(p.Members) != 1 || p.Members[0].ID != "b" {
		t.Fatalf("after b joined: %+v", p)
	}
	h.advance(session + time.Second) // both expire
	p = h.g.TakeChanges()
	if len(p.Removed) != 2 || len(p.Members) != 0 || p.GroupEpoch != 4 {
		t.Fatalf("after expiry: %+v", p)
	}
	// An empty group restored from its records keeps its epoch.
	h.restoreFrom(h.g.Snapshot())
	if h.g.GroupEpoch() != 4 || h.g.State() != Empty {
		t.Fatalf("restored empty group: epoch %d state %v", h.g.GroupEpoch(), h.g.State())
	}
}

// A member restored mid-revocation still has to revoke, within a rebalance timeout
// that starts at the restore; conflicting claims in corrupt input are repaired.
func TestRestoreRevokingAndConflicts(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 4)
	a, b := &client{id: "a"}, &client{id: "b"}
	for range 2 {
		h.step(a, "t")
	}
	h.step(b, "t")
	h.step(a) // a must revoke two partitions for b
	snap := h.g.Snapshot()
	var revoking bool
	for _, m := range snap.Members {
		revoking = revoking || m.ID == "a" && m.State == MemberUnrevokedPartitions
	}
	if !revoking {
		t.Fatalf("a is not revoking: %+v", snap.Members)
	}
	h.restoreFrom(snap)
	h.advance(rebalance + time.Second)
	if ms := h.g.Members(); len(ms) != 1 || ms[0].ID != "b" {
		t.Fatalf("a did not revoke in time and stayed: %+v", ms)
	}

	// Two members claiming one partition: the first by id keeps it.
	bad := snap
	bad.Members = append([]MemberRecord(nil), snap.Members...)
	for i := range bad.Members {
		bad.Members[i].Assigned = tps{topicID("t"): {0}}
		bad.Members[i].Pending = nil
	}
	h.restoreFrom(bad)
	if ms := h.g.Members(); len(ms) != 2 || len(ms[0].Assigned) != 1 || len(ms[1].Assigned) != 0 {
		t.Fatalf("conflicting claims: %+v", ms)
	}
}
