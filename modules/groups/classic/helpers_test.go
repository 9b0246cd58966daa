package classic

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testcheck"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	session   = 10 * time.Second
	rebalance = 30 * time.Second
)

// harness drives one group with a fake clock and deterministic member ids.
type harness struct {
	t   *testing.T
	g   *Group
	now time.Time
	cfg Config // as given to New (Restore takes it again)
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	n := 0
	if cfg.NewMemberID == nil {
		cfg.NewMemberID = func(client string) string { n++; return fmt.Sprintf("%s-%d", client, n) }
	}
	if cfg.InitialRebalanceDelay == 0 {
		cfg.InitialRebalanceDelay = -1
	}
	return &harness{t: t, g: New("g", cfg, t0), now: t0, cfg: cfg}
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.g.Tick(h.now)
}

type jopt struct {
	version   int16
	instance  string
	ptype     string
	protocols []string
	meta      string
}

func (h *harness) join(member string, o jopt) <-chan *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = o.version
	if req.Version == 0 {
		req.Version = 9
	}
	req.Group = "g"
	req.MemberID = member
	req.SessionTimeoutMillis = int32(session / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(rebalance / time.Millisecond)
	if o.instance != "" {
		inst := o.instance
		req.InstanceID = &inst
	}
	req.ProtocolType = o.ptype
	if req.ProtocolType == "" {
		req.ProtocolType = "consumer"
	}
	ps := o.protocols
	if ps == nil {
		ps = []string{"range"}
	}
	for _, p := range ps {
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name = p
		jp.Metadata = []byte(p + "/" + o.meta)
		req.Protocols = append(req.Protocols, jp)
	}
	return h.g.Join(req, Client{ID: "c", Host: "/127.0.0.1"}, h.now)
}

// newMember does the KIP-394 dance and returns the rejoin's channel and id.
func (h *harness) newMember(o jopt) (string, <-chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	if o.instance != "" {
		ch := h.join("", o)
		return "", ch
	}
	r := ready(h.t, "join", h.join("", o))
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first join: code %d, want MEMBER_ID_REQUIRED", r.ErrorCode)
	}
	return r.MemberID, h.join(r.MemberID, o)
}

func (h *harness) sync(member string, gen int32, assign map[string]string) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group = "g"
	req.MemberID = member
	req.Generation = gen
	for id, a := range assign {
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID = id
		sa.MemberAssignment = []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, sa)
	}
	return h.g.Sync(req, h.now)
}

func (h *harness) heartbeat(member string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.MemberID = member
	req.Generation = gen
	return h.g.Heartbeat(req, h.now).ErrorCode
}

func (h *harness) heartbeatStatic(member, instance string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.MemberID = member
	req.InstanceID = &instance
	req.Generation = gen
	return h.g.Heartbeat(req, h.now).ErrorCode
}

// ready returns the response waiting on ch, a what ("join") response channel; it
// fails the test when none is there yet.
func ready[R any](t *testing.T, what string, ch <-chan *R) *R {
	t.Helper()
	select {
	case r := <-ch:
		return r
	default:
		t.Fatal(what + " response not ready")
		return nil
	}
}

// notReady fails the test when a response is already waiting on ch.
func notReady[R any](t *testing.T, what string, ch <-chan *R) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s answered early: %+v", what, r)
	default:
	}
}

// stable forms a Stable group of n dynamic members; ids[0] is the leader.
func (h *harness) stable(n int, opts ...jopt) (ids []string, gen int32) {
	h.t.Helper()
	var o jopt
	if len(opts) > 0 {
		o = opts[0]
	}
	var chans []<-chan *kmsg.JoinGroupResponse
	var pend []string
	for range n {
		r := ready(h.t, "join", h.join("", o))
		testcheck.WantCode(h.t, "first join", r.ErrorCode, kerr.MemberIDRequired)
		pend = append(pend, r.MemberID)
	}
	for _, id := range pend {
		chans = append(chans, h.join(id, o))
	}
	return h.finishRebalance(pend, chans)
}

// finishRebalance collects join responses for ids, has followers then the
// leader sync, and checks everyone got "a-<id>".
func (h *harness) finishRebalance(ids []string, chans []<-chan *kmsg.JoinGroupResponse) ([]string, int32) {
	h.t.Helper()
	var leader string
	var gen int32
	resps := make([]*kmsg.JoinGroupResponse, len(ids))
	for i, ch := range chans {
		r := ready(h.t, "join", ch)
		testcheck.WantCode(h.t, "join", r.ErrorCode, nil)
		resps[i] = r
		leader, gen = r.LeaderID, r.Generation
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	var order []string
	for _, r := range resps {
		if r.MemberID != leader {
			if len(r.Members) != 0 {
				h.t.Fatalf("follower got %d members", len(r.Members))
			}
			syncs = append(syncs, h.sync(r.MemberID, gen, nil))
			order = append(order, r.MemberID)
		}
	}
	for _, s := range syncs {
		notReady(h.t, "sync", s)
	}
	assign := map[string]string{}
	for _, r := range resps {
		if r.MemberID == leader {
			if len(r.Members) != len(ids) {
				h.t.Fatalf("leader got %d members, want %d", len(r.Members), len(ids))
			}
			for _, m := range r.Members {
				assign[m.MemberID] = "a-" + m.MemberID
			}
		}
	}
	ls := h.sync(leader, gen, assign)
	syncs = append(syncs, ls)
	order = append(order, leader)
	for i, s := range syncs {
		r := ready(h.t, "sync", s)
		testcheck.WantCode(h.t, "sync", r.ErrorCode, nil)
		if string(r.MemberAssignment) != "a-"+order[i] {
			h.t.Fatalf("%s got assignment %q", order[i], r.MemberAssignment)
		}
	}
	if s := h.g.State(); s != Stable {
		h.t.Fatalf("state %v, want Stable", s)
	}
	checkInvariants(h.t, h.g)
	return append([]string{leader}, without(order, leader)...), gen
}

func without(ids []string, x string) []string {
	var out []string
	for _, id := range ids {
		if id != x {
			out = append(out, id)
		}
	}
	return out
}

// checkInvariants checks what doc.go promises about a group's state.
func checkInvariants(t *testing.T, g *Group) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.members)+len(g.pending) > g.cfg.MaxSize {
		t.Fatalf("size %d+%d > max %d", len(g.members), len(g.pending), g.cfg.MaxSize)
	}
	if len(g.byID) != len(g.members) {
		t.Fatalf("byID %d, members %d", len(g.byID), len(g.members))
	}
	statics := 0
	for _, m := range g.members {
		if g.byID[m.id] != m {
			t.Fatalf("member %s not indexed", m.id)
		}
		if m.instanceID != nil {
			statics++
			if g.static[*m.instanceID] != m.id {
				t.Fatalf("static %s -> %s, want %s", *m.instanceID, g.static[*m.instanceID], m.id)
			}
		}
		if g.state != PreparingRebalance && m.join != nil {
			t.Fatalf("member %s awaits join in %v", m.id, g.state)
		}
		if g.state != CompletingRebalance && m.sync != nil {
			t.Fatalf("member %s awaits sync in %v", m.id, g.state)
		}
	}
	if statics != len(g.static) {
		t.Fatalf("%d static members, %d instance ids", statics, len(g.static))
	}
	switch g.state {
	case Empty:
		if len(g.members) != 0 {
			t.Fatalf("Empty group has %d members", len(g.members))
		}
	case Stable, CompletingRebalance:
		if g.byID[g.leader] == nil {
			t.Fatalf("%v group's leader %q is not a member", g.state, g.leader)
		}
		if g.protocol == "" {
			t.Fatalf("%v group without protocol", g.state)
		}
	}
	if g.state == Stable {
		for _, m := range g.members {
			if m.assignGen != g.generation {
				t.Fatalf("Stable member %s has assignment from gen %d, group at %d", m.id, m.assignGen, g.generation)
			}
		}
	}
}

// together forms a Stable group whose members all join within one initial
// rebalance delay of 1s (needs a harness built with that delay); statics
// lists instance ids, dynamic adds that many dynamic members.
func (h *harness) together(statics []string, dynamic int, o jopt) ([]string, int32) {
	h.t.Helper()
	var chans []<-chan *kmsg.JoinGroupResponse
	var rs []*kmsg.JoinGroupResponse
	for _, inst := range statics {
		o := o
		o.instance = inst
		_, ch := h.newMember(o)
		chans = append(chans, ch)
	}
	for range dynamic {
		_, ch := h.newMember(o)
		chans = append(chans, ch)
	}
	h.advance(2 * time.Second) // the delay is extended once: members arrived during it
	var ids []string
	for _, ch := range chans {
		r := ready(h.t, "join", ch)
		rs = append(rs, r)
		ids = append(ids, r.MemberID)
	}
	chans = nil
	for _, r := range rs {
		chans = append(chans, chanOf(r))
	}
	return h.finishRebalance(ids, chans)
}
