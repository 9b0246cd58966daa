package classic

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testcheck"
)

func TestMemberIDRequired(t *testing.T) {
	for _, tc := range []struct {
		name     string
		version  int16
		required bool
	}{
		{"v3 joins directly", 3, false},
		{"v4 needs an id", 4, true},
		{"v9 needs an id", 9, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			ch := h.join("", jopt{version: tc.version})
			r := ready(t, "join", ch)
			if tc.required {
				testcheck.WantCode(t, "first join", r.ErrorCode, kerr.MemberIDRequired)
				if r.MemberID != "c-1" {
					t.Fatalf("member id %q", r.MemberID)
				}
				if h.g.State() != Empty || !strings.HasPrefix(r.MemberID, "c-") {
					t.Fatalf("state %v", h.g.State())
				}
				r = ready(t, "join", h.join(r.MemberID, jopt{version: tc.version}))
			}
			testcheck.WantCode(t, "join", r.ErrorCode, nil)
			if r.Generation != 1 || r.LeaderID != r.MemberID || len(r.Members) != 1 || *r.Protocol != "range" {
				t.Fatalf("join response %+v", r)
			}
			if h.g.State() != CompletingRebalance {
				t.Fatalf("state %v", h.g.State())
			}
		})
	}
}

func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t, Config{})
	r := ready(t, "join", h.join("", jopt{}))
	if _, p := h.g.Size(); p != 1 || h.g.IsEmpty() {
		t.Fatalf("pending %d", p)
	}
	h.advance(session + time.Millisecond)
	if _, p := h.g.Size(); p != 0 || !h.g.IsEmpty() {
		t.Fatalf("pending %d after session timeout", p)
	}
	testcheck.WantCode(t, "late rejoin", ready(t, "join", h.join(r.MemberID, jopt{})).ErrorCode, kerr.UnknownMemberID)
}

func TestThreeMemberEagerRebalance(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stable(3)
	if gen != 1 {
		t.Fatalf("gen %d", gen)
	}
	// A fourth member arrives: the others learn it from heartbeats.
	id4, ch4 := h.newMember(jopt{})
	notReady(t, "join", ch4)
	if h.g.State() != PreparingRebalance {
		t.Fatalf("state %v", h.g.State())
	}
	for _, id := range ids {
		testcheck.WantCode(t, "heartbeat", h.heartbeat(id, gen), kerr.RebalanceInProgress)
	}
	var chans []<-chan *kmsg.JoinGroupResponse
	for i, id := range ids {
		ch := h.join(id, jopt{})
		if i < len(ids)-1 {
			notReady(t, "join", ch)
		}
		chans = append(chans, ch)
	}
	all := append(append([]string{}, ids...), id4)
	_, gen = h.finishRebalance(all, append(chans, ch4))
	if gen != 2 {
		t.Fatalf("gen %d", gen)
	}
	for _, id := range all {
		testcheck.WantCode(t, "heartbeat", h.heartbeat(id, gen), nil)
	}
}

func TestCooperativeDoubleRebalance(t *testing.T) {
	t.Run("newcomer without a common protocol", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.stable(2)
		r := ready(t, "join", h.join("", jopt{protocols: []string{"cooperative-sticky"}}))
		testcheck.WantCode(t, "join", r.ErrorCode, kerr.InconsistentGroupProtocol)
	})
	cs := jopt{protocols: []string{"cooperative-sticky", "range"}}
	h2 := newHarness(t, Config{})
	var chans []<-chan *kmsg.JoinGroupResponse
	ids, gen := h2.stable(2, cs)
	for round := range 3 {
		// A member joins; cooperative clients rejoin, sync, then rejoin again
		// right away with the partitions they still own (new metadata).
		idN, chN := h2.newMember(cs)
		chans = nil
		for _, id := range ids {
			testcheck.WantCode(t, "heartbeat", h2.heartbeat(id, gen), kerr.RebalanceInProgress)
			chans = append(chans, h2.join(id, jopt{protocols: cs.protocols, meta: "owned1"}))
		}
		all := append(append([]string{}, ids...), idN)
		var g1 int32
		ids, g1 = h2.finishRebalance(all, append(chans, chN))
		if g1 != gen+1 {
			t.Fatalf("round %d: gen %d after %d", round, g1, gen)
		}
		chans = nil
		for _, id := range ids {
			chans = append(chans, h2.join(id, jopt{protocols: cs.protocols, meta: "owned2"}))
		}
		var g2 int32
		ids, g2 = h2.finishRebalance(ids, chans)
		if g2 != g1+1 {
			t.Fatalf("round %d: second rebalance gen %d after %d", round, g2, g1)
		}
		gen = g2
		r := ready(t, "join", h2.join(ids[1], jopt{protocols: cs.protocols, meta: "owned2"}))
		if r.Generation != gen || len(r.Members) != 0 || h2.g.State() != Stable {
			t.Fatalf("unchanged follower rejoin must not rebalance: %+v %v", r, h2.g.State())
		}
		if *r.Protocol != "cooperative-sticky" {
			t.Fatalf("protocol %q", *r.Protocol)
		}
	}
}

func TestStaticMemberRestart(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: time.Second})
	ids, gen := h.together([]string{"a", "b"}, 0, jopt{})
	follower := ids[1]
	inst := "b"
	if follower == "c-1" {
		inst = "a"
	}

	t.Run("restart with same protocols keeps generation", func(t *testing.T) {
		r := ready(t, "join", h.join("", jopt{instance: inst}))
		testcheck.WantCode(t, "rejoin", r.ErrorCode, nil)
		if r.Generation != gen || r.MemberID == follower || len(r.Members) != 0 || r.LeaderID != ids[0] {
			t.Fatalf("rejoin response %+v", r)
		}
		if h.g.State() != Stable {
			t.Fatalf("state %v", h.g.State())
		}
		testcheck.WantCode(t, "old id heartbeat", h.heartbeatStatic(follower, inst, gen), kerr.FencedInstanceID)
		s := ready(t, "sync", h.sync(follower, gen, nil))
		testcheck.WantCode(t, "old id sync", s.ErrorCode, kerr.UnknownMemberID)
		s = ready(t, "sync", h.sync(r.MemberID, gen, nil))
		testcheck.WantCode(t, "new id sync", s.ErrorCode, nil)
		if string(s.MemberAssignment) != "a-"+follower {
			t.Fatalf("assignment %q", s.MemberAssignment)
		}
		follower = r.MemberID
		checkInvariants(t, h.g)
	})
	t.Run("restart of the leader keeps generation, v9 leader skips assignment", func(t *testing.T) {
		leaderInst := "a"
		if inst == "a" {
			leaderInst = "b"
		}
		r := ready(t, "join", h.join("", jopt{instance: leaderInst}))
		testcheck.WantCode(t, "rejoin", r.ErrorCode, nil)
		if r.Generation != gen || r.LeaderID != r.MemberID || !r.SkipAssignment || len(r.Members) != 2 {
			t.Fatalf("leader rejoin %+v", r)
		}
		if h.g.State() != Stable {
			t.Fatalf("state %v", h.g.State())
		}
		ids[0] = r.MemberID
	})
	t.Run("restart with new protocols rebalances", func(t *testing.T) {
		r := h.join("", jopt{instance: inst, meta: "new"})
		notReady(t, "join", r)
		if h.g.State() != PreparingRebalance {
			t.Fatalf("state %v", h.g.State())
		}
		l := h.join(ids[0], jopt{})
		rr, lr := ready(t, "join", r), ready(t, "join", l)
		if rr.Generation != gen+1 || lr.Generation != gen+1 {
			t.Fatalf("gens %d %d", rr.Generation, lr.Generation)
		}
	})
}

func TestStaticFencing(t *testing.T) {
	h := newHarness(t, Config{})
	_, ch := h.newMember(jopt{instance: "s"})
	r := ready(t, "join", ch)
	id := r.MemberID
	h.sync(id, r.Generation, map[string]string{id: "x"})
	gen := r.Generation
	// Someone else claims the instance id while its join is in flight.
	r2 := ready(t, "join", h.join("", jopt{instance: "s"}))
	for _, tc := range []struct {
		name string
		code int16
		want *kerr.Error
	}{
		{"heartbeat with old id", h.heartbeatStatic(id, "s", gen), kerr.FencedInstanceID},
		{"join with old id", ready(t, "join", h.join(id, jopt{instance: "s"})).ErrorCode, kerr.FencedInstanceID},
		{"heartbeat with new id", h.heartbeatStatic(r2.MemberID, "s", gen), nil},
		{"heartbeat old id without instance", h.heartbeat(id, gen), kerr.UnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) { testcheck.WantCode(t, tc.name, tc.code, tc.want) })
	}
}

func TestStaticReplacedWhileRebalancing(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: time.Second})
	h.together([]string{"a", "b", "c"}, 0, jopt{})
	byInst := map[string]string{}
	for _, d := range h.g.Describe(h.now).Members {
		byInst[*d.InstanceID] = d.MemberID
	}
	cb := h.join(byInst["b"], jopt{instance: "b", meta: "new"})
	old := h.join(byInst["a"], jopt{instance: "a"})
	notReady(t, "join", old)
	// a restarts while its join is still waiting for c.
	ca := h.join("", jopt{instance: "a"})
	testcheck.WantCode(t, "old join", ready(t, "join", old).ErrorCode, kerr.FencedInstanceID)
	testcheck.WantCode(t, "old id join", ready(t, "join", h.join(byInst["a"], jopt{instance: "a"})).ErrorCode, kerr.FencedInstanceID)
	notReady(t, "join", ca)
	cc := h.join(byInst["c"], jopt{instance: "c"})
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{ca, cb, cc} {
		r := ready(t, "join", ch)
		if r.Generation != 2 || r.MemberID == byInst["a"] {
			t.Fatalf("%+v", r)
		}
	}
	checkInvariants(t, h.g)
}

func TestSessionExpiry(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stable(3)
	h.advance(session / 2)
	testcheck.WantCode(t, "hb0", h.heartbeat(ids[0], gen), nil)
	testcheck.WantCode(t, "hb1", h.heartbeat(ids[1], gen), nil)
	h.advance(session/2 - time.Millisecond)
	if m, _ := h.g.Size(); m != 3 {
		t.Fatalf("%d members before the session timeout", m)
	}
	h.advance(time.Millisecond)
	// ids[2] never heartbeat: it is gone and a rebalance started.
	if m, _ := h.g.Size(); m != 2 {
		t.Fatalf("%d members", m)
	}
	testcheck.WantCode(t, "expired", h.heartbeat(ids[2], gen), kerr.UnknownMemberID)
	testcheck.WantCode(t, "hb", h.heartbeat(ids[0], gen), kerr.RebalanceInProgress)
	_, gen2 := h.finishRebalance(ids[:2], []<-chan *kmsg.JoinGroupResponse{h.join(ids[0], jopt{}), h.join(ids[1], jopt{})})
	if gen2 != gen+1 {
		t.Fatalf("gen %d", gen2)
	}
	// Everyone goes quiet: the group empties (through a rebalance) and stays usable.
	h.advance(session + time.Second)
	h.advance(rebalance + time.Second)
	if h.g.State() != Empty || !h.g.IsEmpty() {
		t.Fatalf("state %v", h.g.State())
	}
	checkInvariants(t, h.g)
	h.stable(1)
}

func TestMemberVanishesMidJoin(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stable(3)
	id4, ch4 := h.newMember(jopt{})
	c0, c1 := h.join(ids[0], jopt{}), h.join(ids[1], jopt{})
	// ids[2] keeps heartbeating but never rejoins.
	for range 4 {
		h.advance(rebalance/6 + time.Second)
		testcheck.WantCode(t, "hb", h.heartbeat(ids[2], gen), kerr.RebalanceInProgress)
	}
	notReady(t, "join", c0)
	h.advance(rebalance - 4*(rebalance/6+time.Second))
	testcheck.WantCode(t, "hb", h.heartbeat(ids[2], gen), kerr.UnknownMemberID)
	_, gen = h.finishRebalance([]string{ids[0], ids[1], id4}, []<-chan *kmsg.JoinGroupResponse{c0, c1, ch4})
	if gen != 2 {
		t.Fatalf("gen %d", gen)
	}
}

func TestMemberLeavesMidJoin(t *testing.T) {
	h := newHarness(t, Config{})
	ids, _ := h.stable(3)
	c0 := h.join(ids[0], jopt{})
	c1 := h.join(ids[1], jopt{})
	notReady(t, "join", c0)
	lr := h.g.Leave(&kmsg.LeaveGroupRequest{Version: 0, MemberID: ids[2]}, h.now)
	testcheck.WantCode(t, "leave", lr.ErrorCode, nil)
	h.finishRebalance(ids[:2], []<-chan *kmsg.JoinGroupResponse{c0, c1})
}

func TestMemberVanishesMidSync(t *testing.T) {
	for _, tc := range []struct {
		name       string
		heartbeats bool          // the member that never syncs still heartbeats
		after      time.Duration // when it is removed
	}{
		{"silent member expires by session", false, session},
		{"heartbeating member hits the sync deadline", true, rebalance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			ids, _ := h.stable(3)
			// All three rejoin, only two sync.
			var rs []*kmsg.JoinGroupResponse
			var cs []<-chan *kmsg.JoinGroupResponse
			for _, id := range ids {
				cs = append(cs, h.join(id, jopt{meta: "v2"}))
			}
			for _, c := range cs {
				rs = append(rs, ready(t, "join", c))
			}
			gen, leader := rs[0].Generation, rs[0].LeaderID
			others := without(ids, leader)
			follower, lazy := others[0], others[1]
			ready(t, "sync", h.sync(leader, gen, map[string]string{leader: "x", follower: "y", lazy: "z"}))
			ready(t, "sync", h.sync(follower, gen, nil))
			if h.g.State() != Stable {
				t.Fatalf("state %v", h.g.State())
			}
			checkInvariants(t, h.g)
			step := session / 2
			for h.now.Add(step).Sub(t0) < tc.after {
				h.advance(step)
				testcheck.WantCode(t, "hb", h.heartbeat(leader, gen), nil)
				testcheck.WantCode(t, "hb", h.heartbeat(follower, gen), nil)
				if tc.heartbeats {
					testcheck.WantCode(t, "hb", h.heartbeat(lazy, gen), nil)
				}
			}
			h.advance(tc.after - h.now.Sub(t0) - time.Millisecond)
			if h.g.State() != Stable {
				t.Fatalf("state %v before the deadline", h.g.State())
			}
			h.advance(time.Millisecond)
			if h.g.State() != PreparingRebalance {
				t.Fatalf("member that never synced must be removed: state %v", h.g.State())
			}
			if m, _ := h.g.Size(); m != 2 {
				t.Fatalf("%d members", m)
			}
			testcheck.WantCode(t, "hb", h.heartbeat(leader, gen), kerr.RebalanceInProgress)
			testcheck.WantCode(t, "hb", h.heartbeat(lazy, gen), kerr.UnknownMemberID)
			h.finishRebalance([]string{leader, follower}, []<-chan *kmsg.JoinGroupResponse{h.join(leader, jopt{}), h.join(follower, jopt{})})
		})
	}
}

func TestLeaderVanishesMidSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		how  string
	}{
		{"leader's session expires", "silent"},
		{"leader heartbeats but never syncs", "heartbeats"},
		{"leader leaves", "leaves"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			ids, _ := h.stable(3)
			var cs []<-chan *kmsg.JoinGroupResponse
			for _, id := range ids {
				cs = append(cs, h.join(id, jopt{meta: "v2"}))
			}
			var gen int32
			var leader string
			for _, c := range cs {
				r := ready(t, "join", c)
				gen, leader = r.Generation, r.LeaderID
			}
			followers := without(ids, leader)
			s1, s2 := h.sync(followers[0], gen, nil), h.sync(followers[1], gen, nil)
			notReady(t, "sync", s1)
			switch tc.how {
			case "leaves":
				testcheck.WantCode(t, "leave", h.g.Leave(&kmsg.LeaveGroupRequest{Version: 0, MemberID: leader}, h.now).ErrorCode, nil)
			case "silent":
				h.advance(session)
			case "heartbeats":
				for range 3 {
					h.advance(rebalance / 4)
					notReady(t, "sync", s1)
					testcheck.WantCode(t, "leader hb", h.heartbeat(leader, gen), nil)
				}
				h.advance(rebalance / 4)
			}
			testcheck.WantCode(t, "waiting sync", ready(t, "sync", s1).ErrorCode, kerr.RebalanceInProgress)
			testcheck.WantCode(t, "waiting sync", ready(t, "sync", s2).ErrorCode, kerr.RebalanceInProgress)
			_, g2 := h.finishRebalance(followers, []<-chan *kmsg.JoinGroupResponse{h.join(followers[0], jopt{}), h.join(followers[1], jopt{})})
			if g2 != gen+1 {
				t.Fatalf("gen %d", g2)
			}
		})
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
	step := func(d time.Duration) { h.advance(d) }
	_, a := h.newMember(jopt{})
	step(2 * time.Second)
	_, b := h.newMember(jopt{})
	step(time.Second) // t=3: a member arrived, so the delay is extended to t=6
	notReady(t, "join", a)
	step(2 * time.Second) // t=5
	_, c := h.newMember(jopt{})
	step(time.Second) // t=6: extended again to t=9
	notReady(t, "join", a)
	step(2 * time.Second) // t=8
	_, d := h.newMember(jopt{})
	step(time.Second) // t=9: only 1s of the 30s... remaining budget is 21s, extended to t=12
	notReady(t, "join", a)
	step(3 * time.Second) // t=12: nobody new: done
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{a, b, c, d} {
		r := ready(t, "join", ch)
		if r.Generation != 1 {
			t.Fatalf("gen %d", r.Generation)
		}
	}

	t.Run("capped by the rebalance timeout", func(t *testing.T) {
		h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
		_, first := h.newMember(jopt{})
		for i := 0; h.now.Sub(t0) < rebalance; i++ {
			h.advance(2 * time.Second)
			if h.now.Sub(t0) < rebalance {
				notReady(t, "join", first)
			}
			if i < 100 {
				h.newMember(jopt{})
			}
		}
		r := ready(t, "join", first)
		if r.Generation != 1 || h.now.Sub(t0) != rebalance {
			t.Fatalf("gen %d at %v", r.Generation, h.now.Sub(t0))
		}
	})
	t.Run("no delay outside Empty", func(t *testing.T) {
		h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
		_, a := h.newMember(jopt{})
		h.advance(3 * time.Second)
		ra := ready(t, "join", a)
		h.finishRebalance([]string{ra.MemberID}, []<-chan *kmsg.JoinGroupResponse{chanOf(ra)})
		c := h.join(ra.MemberID, jopt{meta: "changed"})
		if r := ready(t, "join", c); r.Generation != 2 {
			t.Fatalf("gen %d", r.Generation)
		}
	})
}

func chanOf(r *kmsg.JoinGroupResponse) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	ch <- r
	return ch
}

func TestProtocolSelection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members [][]string
		want    string
	}{
		{"one member first choice", [][]string{{"a", "b"}}, "a"},
		{"majority first choice", [][]string{{"a", "b"}, {"b", "a"}, {"b", "a"}}, "b"},
		{"only common protocol", [][]string{{"a", "b"}, {"b", "c"}, {"c", "b"}}, "b"},
		{"tie goes to first member's preference", [][]string{{"a", "b"}, {"b", "a"}}, "a"},
		{"repeated names count once", [][]string{{"x", "x", "a"}, {"a"}}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			var cs []<-chan *kmsg.JoinGroupResponse
			var ids []string
			for _, ps := range tc.members {
				r := ready(t, "join", h.join("", jopt{protocols: ps}))
				ids = append(ids, r.MemberID)
			}
			for i, id := range ids {
				cs = append(cs, h.join(id, jopt{protocols: tc.members[i]}))
			}
			for _, c := range cs {
				r := ready(t, "join", c)
				testcheck.WantCode(t, "join", r.ErrorCode, nil)
				if *r.Protocol != tc.want || *r.ProtocolType != "consumer" {
					t.Fatalf("protocol %q", *r.Protocol)
				}
				if r.MemberID == r.LeaderID {
					for _, m := range r.Members {
						if !strings.HasPrefix(string(m.ProtocolMetadata), tc.want+"/") {
							t.Fatalf("leader got metadata %q", m.ProtocolMetadata)
						}
					}
				}
			}
		})
	}
}

func TestJoinErrors(t *testing.T) {
	h := newHarness(t, Config{MaxMetadataBytes: 100, MaxProtocols: 2})
	h.stable(1)
	big := strings.Repeat("x", 200)
	for _, tc := range []struct {
		name   string
		member string
		o      jopt
		mutate func(*kmsg.JoinGroupRequest)
		want   *kerr.Error
	}{
		{"other protocol type", "", jopt{ptype: "connect"}, nil, kerr.InconsistentGroupProtocol},
		{"no common protocol", "", jopt{protocols: []string{"sticky"}}, nil, kerr.InconsistentGroupProtocol},
		{"no protocols", "", jopt{}, func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }, kerr.InconsistentGroupProtocol},
		{"empty protocol type", "", jopt{}, func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "" }, kerr.InconsistentGroupProtocol},
		{"unknown member id", "nobody", jopt{}, nil, kerr.UnknownMemberID},
		{"session too short", "", jopt{}, func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 10 }, kerr.InvalidSessionTimeout},
		{"session too long", "", jopt{}, func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1 << 30 }, kerr.InvalidSessionTimeout},
		{"metadata too big", "", jopt{meta: big}, nil, kerr.InvalidRequest},
		{"too many protocols", "", jopt{protocols: []string{"range", "b", "c"}}, nil, kerr.InvalidRequest},
		{"fenced instance", "someone", jopt{instance: "i"}, func(r *kmsg.JoinGroupRequest) {}, kerr.UnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version = 9
			req.MemberID = tc.member
			req.SessionTimeoutMillis = 10000
			req.RebalanceTimeoutMillis = 30000
			req.ProtocolType = "consumer"
			if tc.o.ptype != "" {
				req.ProtocolType = tc.o.ptype
			}
			if tc.o.instance != "" {
				req.InstanceID = &tc.o.instance
			}
			ps := tc.o.protocols
			if ps == nil {
				ps = []string{"range"}
			}
			for _, p := range ps {
				req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(tc.o.meta)})
			}
			if tc.mutate != nil {
				tc.mutate(req)
			}
			r := ready(t, "join", h.g.Join(req, Client{ID: "c"}, h.now))
			testcheck.WantCode(t, tc.name, r.ErrorCode, tc.want)
			if h.g.State() != Stable {
				t.Fatalf("state %v", h.g.State())
			}
		})
	}
	t.Run("dead group", func(t *testing.T) {
		h := newHarness(t, Config{})
		ids, gen := h.stable(2)
		c := h.join(ids[1], jopt{meta: "new"})
		h.g.MarkDead(kerr.NotCoordinator)
		testcheck.WantCode(t, "waiting join", ready(t, "join", c).ErrorCode, kerr.NotCoordinator)
		testcheck.WantCode(t, "join", ready(t, "join", h.join("", jopt{})).ErrorCode, kerr.CoordinatorNotAvailable)
		testcheck.WantCode(t, "sync", ready(t, "sync", h.sync(ids[0], gen, nil)).ErrorCode, kerr.CoordinatorNotAvailable)
		testcheck.WantCode(t, "heartbeat", h.heartbeat(ids[0], gen), kerr.CoordinatorNotAvailable)
		testcheck.WantCode(t, "leave", h.g.Leave(&kmsg.LeaveGroupRequest{MemberID: ids[0]}, h.now).ErrorCode, kerr.CoordinatorNotAvailable)
		if h.g.State() != Dead || h.g.Describe(h.now).State != "Dead" {
			t.Fatal("not dead")
		}
	})
}

func TestSyncAndHeartbeatErrors(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stable(2)
	str := func(s string) *string { return &s }
	syncReq := func(member string, g int32, pt, p *string) int16 {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = 5
		req.MemberID, req.Generation, req.ProtocolType, req.Protocol = member, g, pt, p
		return ready(t, "sync", h.g.Sync(req, h.now)).ErrorCode
	}
	for _, tc := range []struct {
		name string
		code int16
		want *kerr.Error
	}{
		{"sync ok", syncReq(ids[1], gen, str("consumer"), str("range")), nil},
		{"sync unknown member", syncReq("x", gen, nil, nil), kerr.UnknownMemberID},
		{"sync old generation", syncReq(ids[1], gen-1, nil, nil), kerr.IllegalGeneration},
		{"sync wrong protocol type", syncReq(ids[1], gen, str("connect"), nil), kerr.InconsistentGroupProtocol},
		{"sync wrong protocol", syncReq(ids[1], gen, nil, str("sticky")), kerr.InconsistentGroupProtocol},
		{"heartbeat ok", h.heartbeat(ids[1], gen), nil},
		{"heartbeat unknown member", h.heartbeat("x", gen), kerr.UnknownMemberID},
		{"heartbeat old generation", h.heartbeat(ids[1], gen+1), kerr.IllegalGeneration},
		{"heartbeat unknown instance", h.heartbeatStatic(ids[1], "i", gen), nil},
	} {
		t.Run(tc.name, func(t *testing.T) { testcheck.WantCode(t, tc.name, tc.code, tc.want) })
	}
	t.Run("rebalance in progress", func(t *testing.T) {
		h.newMember(jopt{})
		testcheck.WantCode(t, "sync", syncReq(ids[1], gen, nil, nil), kerr.RebalanceInProgress)
		testcheck.WantCode(t, "heartbeat", h.heartbeat(ids[1], gen), kerr.RebalanceInProgress)
	})
	t.Run("missing from assignment gets empty", func(t *testing.T) {
		h := newHarness(t, Config{InitialRebalanceDelay: time.Second})
		var cs []<-chan *kmsg.JoinGroupResponse
		var rs []*kmsg.JoinGroupResponse
		for range 2 {
			_, c := h.newMember(jopt{})
			cs = append(cs, c)
		}
		h.advance(2 * time.Second)
		for _, c := range cs {
			rs = append(rs, ready(t, "join", c))
		}
		leader := rs[0].LeaderID
		follower := without([]string{rs[0].MemberID, rs[1].MemberID}, leader)[0]
		fs := h.sync(follower, rs[0].Generation, nil)
		ls := ready(t, "sync", h.sync(leader, rs[0].Generation, map[string]string{leader: "all", "ghost": "x"}))
		if string(ls.MemberAssignment) != "all" || len(ready(t, "sync", fs).MemberAssignment) != 0 {
			t.Fatal("wrong assignments")
		}
		checkInvariants(t, h.g)
	})
	t.Run("empty group", func(t *testing.T) {
		h := newHarness(t, Config{})
		testcheck.WantCode(t, "hb", h.heartbeat("x", 0), kerr.UnknownMemberID)
		testcheck.WantCode(t, "sync", ready(t, "sync", h.sync("x", 0, nil)).ErrorCode, kerr.UnknownMemberID)
	})
	t.Run("oversized assignment", func(t *testing.T) {
		h := newHarness(t, Config{MaxAssignmentBytes: 10})
		_, c := h.newMember(jopt{})
		r := ready(t, "join", c)
		s := ready(t, "sync", h.sync(r.MemberID, r.Generation, map[string]string{r.MemberID: strings.Repeat("x", 11)}))
		testcheck.WantCode(t, "sync", s.ErrorCode, kerr.InvalidRequest)
		checkInvariants(t, h.g)
	})
}

func TestLeave(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: time.Second})
	h.together([]string{"a", "b", "c"}, 0, jopt{})
	pending := ready(t, "join", h.join("", jopt{})).MemberID
	str := func(s string) *string { return &s }
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Members = []kmsg.LeaveGroupRequestMember{
		{InstanceID: str("a")},                    // by instance only
		{MemberID: "wrong", InstanceID: str("b")}, // fenced
		{InstanceID: str("zzz")},                  // unknown instance
		{MemberID: "nobody"},                      // unknown member
		{MemberID: pending},                       // a KIP-394 pending member
		{MemberID: "c-3", InstanceID: str("c")},   // both match
	}
	r := h.g.Leave(req, h.now)
	want := []*kerr.Error{nil, kerr.FencedInstanceID, kerr.UnknownMemberID, kerr.UnknownMemberID, nil, nil}
	if len(r.Members) != len(want) {
		t.Fatalf("%d members", len(r.Members))
	}
	for i, w := range want {
		testcheck.WantCode(t, "leave member", r.Members[i].ErrorCode, w)
	}
	if m, p := h.g.Size(); m != 1 || p != 0 {
		t.Fatalf("members %d pending %d", m, p)
	}
	if h.g.State() != PreparingRebalance {
		t.Fatalf("state %v", h.g.State())
	}
	// The remaining member rejoins alone.
	r2 := ready(t, "join", h.join("c-2", jopt{instance: "b"}))
	if r2.LeaderID != "c-2" || r2.Generation != 2 {
		t.Fatalf("%+v", r2)
	}
	checkInvariants(t, h.g)
}

func TestBoundedJoins(t *testing.T) {
	h := newHarness(t, Config{})
	maxed := 0
	for range 10000 {
		r := ready(t, "join", h.join("", jopt{}))
		if r.ErrorCode == kerr.GroupMaxSizeReached.Code {
			maxed++
		}
	}
	if _, p := h.g.Size(); p != 1000 || maxed != 9000 {
		t.Fatalf("pending %d, refused %d", p, maxed)
	}
	checkInvariants(t, h.g)
	h.advance(session + time.Millisecond)
	if _, p := h.g.Size(); p != 0 {
		t.Fatalf("pending %d after expiry", p)
	}
	h.stable(3)

	t.Run("members capped", func(t *testing.T) {
		h := newHarness(t, Config{MaxSize: 3})
		h.stable(3)
		testcheck.WantCode(t, "4th", ready(t, "join", h.join("", jopt{})).ErrorCode, kerr.GroupMaxSizeReached)
		testcheck.WantCode(t, "4th static", ready(t, "join", h.join("", jopt{instance: "x"})).ErrorCode, kerr.GroupMaxSizeReached)
	})
}

func TestDescribe(t *testing.T) {
	h := newHarness(t, Config{})
	ids, _ := h.stable(2)
	d := h.g.Describe(h.now)
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 2 {
		t.Fatalf("%+v", d)
	}
	for _, m := range d.Members {
		if m.ClientID != "c" || m.ClientHost != "/127.0.0.1" || string(m.MemberAssignment) != "a-"+m.MemberID || string(m.ProtocolMetadata) != "range/" {
			t.Fatalf("%+v", m)
		}
	}
	h.join(ids[1], jopt{meta: "new"})
	d = h.g.Describe(h.now)
	if d.State != "PreparingRebalance" || d.Protocol != "" || len(d.Members) != 2 || d.Members[0].MemberAssignment != nil {
		t.Fatalf("%+v", d)
	}
	if h.g.IsEmpty() {
		t.Fatal("not empty")
	}
}

func TestClockAndAccessors(t *testing.T) {
	h := newHarness(t, Config{})
	if _, ok := h.g.NextDeadline(); ok {
		t.Fatal("an idle group has no deadline")
	}
	r := ready(t, "join", h.join("", jopt{}))
	if d, ok := h.g.NextDeadline(); !ok || !d.Equal(t0.Add(session)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	// Time going back (callers racing) is ignored.
	h.g.Tick(t0.Add(-time.Hour))
	ready(t, "join", h.g.Join(&kmsg.JoinGroupRequest{Version: 9, MemberID: r.MemberID, SessionTimeoutMillis: 10000,
		ProtocolType: "consumer", Protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range"}}}, Client{}, t0.Add(-time.Hour)))
	if h.g.ID() != "g" || h.g.ProtocolType() != "consumer" || h.g.Generation() != 1 {
		t.Fatal("accessors")
	}
	id := randomMemberID("client")
	if !strings.HasPrefix(id, "client-") || len(id) != len("client-")+32 || id == randomMemberID("client") {
		t.Fatalf("random id %q", id)
	}
}

func TestLeaderMemberListByVersion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		version   int16
		instances bool
	}{
		{"v4 leader sees no instance ids", 4, false},
		{"v5 leader sees instance ids", 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			// The dynamic member joins first and leads; a static member follows.
			r := ready(t, "join", h.join("", jopt{version: tc.version}))
			lead := h.join(r.MemberID, jopt{version: tc.version})
			lr := ready(t, "join", lead)
			st := h.join("", jopt{version: 5, instance: "s"})
			notReady(t, "join", st)
			lr = ready(t, "join", h.join(lr.MemberID, jopt{version: tc.version}))
			sr := ready(t, "join", st)
			if lr.LeaderID != lr.MemberID || len(lr.Members) != 2 || len(sr.Members) != 0 {
				t.Fatalf("leader %+v static %+v", lr, sr)
			}
			for _, m := range lr.Members {
				if m.MemberID == sr.MemberID && (m.InstanceID != nil) != tc.instances {
					t.Fatalf("instance id %v", m.InstanceID)
				}
			}
		})
	}
}

// validator is Group.ValidateCommit or Group.ValidateTxnCommit.
type validator func(memberID string, instanceID *string, generation int32, now time.Time) *kerr.Error

// checkCommitters runs the checks both validators share on h's new group: a commit
// without a member (simple, as empty calls it) to the empty group passes, an unknown
// member fails, then with two Stable members a member's commit passes and one of an
// older generation fails. It returns the members and the generation.
func checkCommitters(t *testing.T, h *harness, validate validator, empty string) ([]string, int32) {
	t.Helper()
	if e := validate("", nil, -1, h.now); e != nil {
		t.Fatalf("%s to an empty group: %v", empty, e)
	}
	if e := validate("nobody", nil, 1, h.now); e != kerr.UnknownMemberID {
		t.Fatalf("unknown member: %v", e)
	}
	ids, gen := h.stable(2)
	if e := validate(ids[0], nil, gen, h.now); e != nil {
		t.Fatalf("member commit: %v", e)
	}
	if e := validate(ids[0], nil, gen-1, h.now); e != kerr.IllegalGeneration {
		t.Fatalf("stale generation: %v", e)
	}
	return ids, gen
}

func TestValidateCommit(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: -1})
	g := h.g
	ids, gen := checkCommitters(t, h, g.ValidateCommit, "simple commit")
	if e := g.ValidateCommit("", nil, -1, h.now); e != kerr.UnknownMemberID {
		t.Fatalf("simple commit to a live group: %v", e)
	}
	g.MarkDead(kerr.NotCoordinator)
	if e := g.ValidateCommit(ids[0], nil, gen, h.now); e != kerr.CoordinatorNotAvailable {
		t.Fatalf("dead group: %v", e)
	}
}

func TestValidateTxnCommit(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: -1})
	g := h.g
	ids, gen := checkCommitters(t, h, g.ValidateTxnCommit, "commit without a member")
	// v0-v2 carry no member: allowed even with members (unlike OffsetCommit).
	if e := g.ValidateTxnCommit("", nil, -1, h.now); e != nil {
		t.Fatalf("commit without a member to a live group: %v", e)
	}
	inst := "i1"
	if e := g.ValidateTxnCommit(ids[0], &inst, gen, h.now); e != nil {
		t.Fatalf("dynamic member naming an unknown instance: %v", e)
	}
	// A rebalance does not refuse transactional commits of the current generation.
	r := ready(t, "join", h.join("", jopt{}))
	h.join(r.MemberID, jopt{})
	if st := g.State(); st != PreparingRebalance {
		t.Fatalf("state %v after a new join, want PreparingRebalance", st)
	}
	if e := g.ValidateTxnCommit(ids[1], nil, gen, h.now); e != nil {
		t.Fatalf("member commit during a rebalance: %v", e)
	}
	g.MarkDead(kerr.NotCoordinator)
	if e := g.ValidateTxnCommit(ids[0], nil, gen, h.now); e != kerr.CoordinatorNotAvailable {
		t.Fatalf("dead group: %v", e)
	}
}
