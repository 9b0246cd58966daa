package classic

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testcheck"
)

// restart replaces the harness's group by Restore(Snapshot()) after d, as a
// coordinator restart that loaded the snapshot would.
func (h *harness) restart(s Snapshot, d time.Duration) {
	h.t.Helper()
	h.now = h.now.Add(d)
	h.g = Restore("g", h.cfg, s, h.now)
	checkInvariants(h.t, h.g)
}

func (h *harness) leave(ids ...string) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	for _, id := range ids {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = id
		req.Members = append(req.Members, lm)
	}
	h.g.Leave(req, h.now)
}

// Restore(Snapshot()) of a Stable group: the same members heartbeat, sync and
// commit with the same generation, with no rebalance.
func TestRestoreStable(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stable(3)
	h.advance(time.Second)
	snap := h.g.Snapshot()
	if snap.State != Stable || snap.Generation != gen || snap.Leader != ids[0] || snap.Protocol != "range" ||
		snap.ProtocolType != "consumer" || len(snap.Members) != 3 || !snap.StateTimestamp.Equal(t0) {
		t.Fatalf("snapshot %+v", snap)
	}
	for _, m := range snap.Members {
		if string(m.Assignment) != "a-"+m.ID || string(m.Metadata) != "range/" ||
			m.SessionTimeout != session || m.RebalanceTimeout != rebalance || m.ClientID != "c" {
			t.Fatalf("member snapshot %+v", m)
		}
	}
	before := h.g.Describe(h.now)
	h.restart(snap, 5*time.Second)
	if st, g := h.g.State(), h.g.Generation(); st != Stable || g != gen {
		t.Fatalf("restored %v gen %d, want Stable gen %d", st, g, gen)
	}
	after := h.g.Describe(h.now)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("describe differs:\n%v\n%v", before, after)
	}
	for _, id := range ids {
		testcheck.WantCode(t, "heartbeat "+id, h.heartbeat(id, gen), nil)
		r := ready(t, "sync", h.sync(id, gen, nil))
		testcheck.WantCode(t, "sync "+id, r.ErrorCode, nil)
		if string(r.MemberAssignment) != "a-"+id {
			t.Fatalf("%s got assignment %q", id, r.MemberAssignment)
		}
		if e := h.g.ValidateCommit(id, nil, gen, h.now); e != nil {
			t.Fatalf("commit %s: %v", id, e)
		}
	}
	testcheck.WantCode(t, "stale heartbeat", h.heartbeat(ids[1], gen-1), kerr.IllegalGeneration)
	// A follower rejoining with unchanged protocols gets the restored generation.
	r := ready(t, "join", h.join(ids[1], jopt{}))
	testcheck.WantCode(t, "follower rejoin", r.ErrorCode, nil)
	if r.Generation != gen || r.LeaderID != ids[0] || h.g.State() != Stable {
		t.Fatalf("rejoin: gen %d leader %s state %v", r.Generation, r.LeaderID, h.g.State())
	}
	// Snapshot of the restored group equals the original (apart from times).
	again := h.g.Snapshot()
	again.StateTimestamp = snap.StateTimestamp
	if fmt.Sprint(again) != fmt.Sprint(snap) {
		t.Fatalf("snapshot after restore differs:\n%+v\n%+v", again, snap)
	}
}

// Members that do not come back after a restore expire after their session
// timeout, counted from the restore, and the group rebalances without them.
func TestRestoreExpiresSilentMembers(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stable(3)
	snap := h.g.Snapshot()
	h.restart(snap, time.Minute) // long after the old deadlines
	if h.g.State() != Stable {
		t.Fatal("restored group not Stable")
	}
	h.advance(session / 2)
	testcheck.WantCode(t, "heartbeat 0", h.heartbeat(ids[0], gen), nil)
	testcheck.WantCode(t, "heartbeat 1", h.heartbeat(ids[1], gen), nil)
	h.advance(session/2 + time.Millisecond) // ids[2] expires
	if st := h.g.State(); st != PreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance", st)
	}
	testcheck.WantCode(t, "expired heartbeat", h.heartbeat(ids[2], gen), kerr.UnknownMemberID)
	testcheck.WantCode(t, "heartbeat 0", h.heartbeat(ids[0], gen), kerr.RebalanceInProgress)
	chans := []<-chan *kmsg.JoinGroupResponse{h.join(ids[0], jopt{}), h.join(ids[1], jopt{})}
	_, gen2 := h.finishRebalance(ids[:2], chans)
	if gen2 != gen+1 {
		t.Fatalf("generation %d, want %d", gen2, gen+1)
	}
	// Nobody comes back at all: everyone expires and the group empties.
	h.restart(h.g.Snapshot(), 0)
	h.advance(session + time.Millisecond)
	h.advance(rebalance)
	if st, g := h.g.State(), h.g.Generation(); st != Empty || g != gen2+1 {
		t.Fatalf("%v gen %d, want Empty gen %d", st, g, gen2+1)
	}
}

// A snapshot of an Empty group comes back Empty with its generation and protocol
// type; the next generation follows it.
func TestRestoreEmpty(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stable(2)
	h.leave(ids...)
	h.advance(time.Second) // the join phase ends with nobody
	if st := h.g.State(); st != Empty {
		t.Fatalf("state %v", st)
	}
	snap := h.g.Snapshot()
	if snap.State != Empty || snap.Generation != gen+1 || len(snap.Members) != 0 || snap.ProtocolType != "consumer" {
		t.Fatalf("snapshot %+v", snap)
	}
	h.restart(snap, time.Hour)
	if st, g, pt := h.g.State(), h.g.Generation(), h.g.ProtocolType(); st != Empty || g != gen+1 || pt != "consumer" {
		t.Fatalf("restored %v gen %d %q", st, g, pt)
	}
	if !h.g.IsEmpty() {
		t.Fatal("restored empty group not IsEmpty")
	}
	if e := h.g.ValidateCommit("", nil, -1, h.now); e != nil {
		t.Fatalf("simple commit: %v", e)
	}
	testcheck.WantCode(t, "old member", h.heartbeat(ids[0], gen), kerr.UnknownMemberID)
	_, gen2 := h.stable(1)
	if gen2 != gen+2 {
		t.Fatalf("generation %d, want %d", gen2, gen+2)
	}
	// The zero snapshot is a new group.
	h.restart(Snapshot{}, 0)
	if st, g := h.g.State(), h.g.Generation(); st != Empty || g != 0 {
		t.Fatalf("zero snapshot: %v gen %d", st, g)
	}
}

// Static members come back registered: a restarted static member (no member id)
// takes over its assignment without a rebalance, and the old id is fenced.
func TestRestoreStatic(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: time.Second})
	ids, gen := h.together([]string{"i1", "i2"}, 1, jopt{})
	snap := h.g.Snapshot()
	statics := 0
	for _, m := range snap.Members {
		if m.InstanceID != nil {
			statics++
		}
	}
	if statics != 2 {
		t.Fatalf("snapshot has %d static members", statics)
	}
	h.restart(snap, time.Second)
	var old string
	for _, m := range snap.Members {
		if m.InstanceID != nil && *m.InstanceID == "i2" {
			old = m.ID
		}
	}
	testcheck.WantCode(t, "static heartbeat", h.heartbeatStatic(old, "i2", gen), nil)
	rev := h.g.Revision()
	r := ready(t, "join", h.join("", jopt{instance: "i2"}))
	testcheck.WantCode(t, "static rejoin", r.ErrorCode, nil)
	if r.Generation != gen || h.g.State() != Stable || r.MemberID == old {
		t.Fatalf("static rejoin: gen %d member %s state %v", r.Generation, r.MemberID, h.g.State())
	}
	if h.g.Revision() == rev {
		t.Fatal("a static replacement did not change the revision")
	}
	testcheck.WantCode(t, "fenced", h.heartbeatStatic(old, "i2", gen), kerr.FencedInstanceID)
	testcheck.WantCode(t, "new id", h.heartbeatStatic(r.MemberID, "i2", gen), nil)
	for _, id := range ids {
		if id != old {
			testcheck.WantCode(t, "heartbeat "+id, h.heartbeat(id, gen), nil)
		}
	}
	checkInvariants(t, h.g)
}

// Snapshots taken mid-rebalance: the state says so and there are no assignments,
// which is why only Stable and Empty snapshots are persisted. Restoring one anyway
// gives a Stable group without assignments (documented, not relied on).
func TestSnapshotMidRebalance(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stable(2)
	rev := h.g.Revision()
	ch := h.join(ids[0], jopt{meta: "new"}) // the leader rejoins: rebalance
	notReady(t, "join", ch)
	if h.g.Revision() == rev {
		t.Fatal("a state change did not change the revision")
	}
	snap := h.g.Snapshot()
	if snap.State != PreparingRebalance || snap.Generation != gen {
		t.Fatalf("snapshot %+v", snap)
	}
	for _, m := range snap.Members {
		if m.Assignment != nil {
			t.Fatalf("mid-rebalance snapshot has assignment %q", m.Assignment)
		}
	}
	h.restart(snap, 0)
	if st := h.g.State(); st != Stable {
		t.Fatalf("state %v", st)
	}
	r := ready(t, "sync", h.sync(ids[1], gen, nil))
	if r.ErrorCode != 0 || len(r.MemberAssignment) != 0 {
		t.Fatalf("sync after mid-rebalance restore: %+v", r)
	}
}

// A corrupt snapshot (duplicate member ids or instance ids, leader not a member)
// still restores a group that keeps the invariants.
func TestRestoreCorruptSnapshot(t *testing.T) {
	inst := "i"
	s := Snapshot{ProtocolType: "consumer", Generation: 4, Protocol: "range", Leader: "nobody", Members: []MemberSnapshot{
		{ID: "a", SessionTimeout: session}, {ID: "a", SessionTimeout: session}, {ID: ""},
		{ID: "b", InstanceID: &inst, SessionTimeout: session}, {ID: "c", InstanceID: &inst, SessionTimeout: session},
	}}
	g := Restore("g", Config{}, s, t0)
	checkInvariants(t, g)
	if d := g.Describe(t0); len(d.Members) != 2 || g.State() != Stable {
		t.Fatalf("restored %v with %d members", g.State(), len(d.Members))
	}
	s.Protocol = ""
	g = Restore("g", Config{}, s, t0)
	checkInvariants(t, g)
	if g.State() != Empty || g.Generation() != 4 {
		t.Fatalf("members without protocol: %v gen %d", g.State(), g.Generation())
	}
}

// TestRandomRestarts runs the random schedules with coordinator restarts: at random
// steps the group is replaced by Restore of the last Stable or Empty snapshot (as the
// coordinator persists them); in-flight joins and syncs are lost. The invariants
// hold throughout and the group still settles with every client.
func TestRandomRestarts(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			s := newSim(t, seed, 7, 8)
			var persisted Snapshot
			restores, stableRestores := 0, 0
			persist := func() {
				if st := s.h.g.State(); st == Stable || st == Empty {
					persisted = s.h.g.Snapshot()
				}
			}
			restart := func() {
				s.h.g = Restore("g", s.h.cfg, persisted, s.h.now)
				restores++
				if persisted.State == Stable {
					stableRestores++
				}
				// The generation may go back to the persisted one; generations
				// after it are formed anew (as in Kafka after a crash mid-rebalance).
				s.lastGen = persisted.Generation
				for gen := range s.leaders {
					if gen > persisted.Generation {
						delete(s.leaders, gen)
					}
				}
				for _, c := range s.clients {
					if c.join != nil || c.sync != nil {
						c.join, c.sync, c.rejoin = nil, nil, true // NOT_COORDINATOR: retry
					}
				}
			}
			for step := range 3000 {
				var what string
				if r := s.rng.IntN(100); r >= 10 && r < 12 {
					restart()
					what = "coordinator restart"
				} else {
					what = s.step(r)
				}
				s.check(step, what)
				persist()
			}
			if stableRestores == 0 {
				t.Fatalf("no restore of a Stable snapshot in %d restores", restores)
			}
			s.settle()
			// A restart of the settled group changes nothing for its members.
			persist()
			restart()
			for _, c := range s.clients {
				s.behave(c) // heartbeats
				if c.rejoin || c.member == "" {
					t.Fatalf("%s must rejoin after restoring a Stable group", c.name)
				}
			}
			if s.h.g.State() != Stable {
				t.Fatalf("state %v after restore", s.h.g.State())
			}
		})
	}
}
