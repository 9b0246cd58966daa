package classic

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type kmsgSync = kmsg.SyncGroupResponse

// fakeServer is a ServerAssigner that records the generations it was asked for.
type fakeServer struct {
	wants   bool
	started []int32
}

func (f *fakeServer) Wants(group, protocolType string) bool {
	return f.wants && protocolType == "consumer"
}
func (f *fakeServer) Start(_ *Group, gen int32) { f.started = append(f.started, gen) }

// A server-assigned generation: members without a protocol in common are admitted,
// each is told it is a follower with its own protocol, syncs wait for Assign, which
// answers them with their assignments and shows the assignor as the protocol.
func TestServerAssignedGeneration(t *testing.T) {
	srv := &fakeServer{wants: true}
	h := newHarness(t, Config{Server: srv, InitialRebalanceDelay: time.Second})
	a, ja := h.newMember(jopt{protocols: []string{"cooperative-sticky"}})
	b, jb := h.newMember(jopt{protocols: []string{"roundrobin", "range"}})
	h.advance(time.Second) // the initial delay, extended once: both joined in it
	h.advance(time.Second)
	ra, rb := ready(t, "join a", ja), ready(t, "join b", jb)
	for _, r := range []struct {
		name, proto string
		code        int16
		leader      string
		members     int
		gotProto    *string
	}{
		{a, "cooperative-sticky", ra.ErrorCode, ra.LeaderID, len(ra.Members), ra.Protocol},
		{b, "roundrobin", rb.ErrorCode, rb.LeaderID, len(rb.Members), rb.Protocol},
	} {
		if r.code != 0 || r.leader != "" || r.members != 0 || r.gotProto == nil || *r.gotProto != r.proto {
			t.Fatalf("join %s: code %d leader %q members %d protocol %v, want a follower told %s",
				r.name, r.code, r.leader, r.members, r.gotProto, r.proto)
		}
	}
	gen := ra.Generation
	if len(srv.started) != 1 || srv.started[0] != gen {
		t.Fatalf("Start calls %v, want [%d]", srv.started, gen)
	}
	ms, ok := h.g.ServerMembers(gen)
	if !ok || len(ms) != 2 || ms[0].Protocol != "cooperative-sticky" || string(ms[1].Metadata) != "roundrobin/" {
		t.Fatalf("ServerMembers: %+v %v", ms, ok)
	}
	// Every member syncs, the "leader" with assignments that must be ignored.
	sa := h.sync(a, gen, map[string]string{a: "leader's", b: "leader's"})
	sb := h.sync(b, gen, nil)
	notReady(t, "sync a", sa)
	notReady(t, "sync b", sb)
	if h.g.Assign(gen+1, "range", nil, false, h.now) {
		t.Fatal("Assign of a future generation accepted")
	}
	if !h.g.Assign(gen, "range", map[string][]byte{a: []byte("A"), b: []byte("B")}, false, h.now) {
		t.Fatal("Assign refused")
	}
	for _, x := range []struct {
		name, want, proto string
		ch                <-chan *kmsgSync
	}{{a, "A", "cooperative-sticky", sa}, {b, "B", "roundrobin", sb}} {
		r := ready(t, "sync "+x.name, x.ch)
		if r.ErrorCode != 0 || string(r.MemberAssignment) != x.want || r.Protocol == nil || *r.Protocol != x.proto {
			t.Errorf("sync %s: code %d assignment %q protocol %v, want %q under %s", x.name, r.ErrorCode, r.MemberAssignment, r.Protocol, x.want, x.proto)
		}
	}
	if h.g.Assign(gen, "range", nil, false, h.now) {
		t.Fatal("a second Assign of one generation accepted")
	}
	d := h.g.Describe(h.now)
	if d.State != "Stable" || d.Protocol != "range" || string(d.Members[0].ProtocolMetadata) != "cooperative-sticky/" {
		t.Fatalf("describe: %+v", d)
	}
	// A Stable member's late sync is answered with its own protocol.
	req := h.sync(b, gen, nil)
	if r := ready(t, "late sync", req); r.Protocol == nil || *r.Protocol != "roundrobin" || string(r.MemberAssignment) != "B" {
		t.Fatalf("late sync: %+v", r)
	}
}

// Assign asking for a follow-up starts the next rebalance once every member synced.
func TestServerAssignedFollowUp(t *testing.T) {
	srv := &fakeServer{wants: true}
	h := newHarness(t, Config{Server: srv})
	a, ja := h.newMember(jopt{protocols: []string{"cooperative-sticky"}})
	gen := ready(t, "join", ja).Generation
	if !h.g.Assign(gen, "uniform", map[string][]byte{a: []byte("A")}, true, h.now) {
		t.Fatal("Assign refused")
	}
	if h.g.State() != Stable {
		t.Fatalf("state %v before the member synced, want Stable", h.g.State())
	}
	if r := ready(t, "sync", h.sync(a, gen, nil)); r.ErrorCode != 0 || string(r.MemberAssignment) != "A" {
		t.Fatalf("sync: %+v", r)
	}
	if h.g.State() != PreparingRebalance {
		t.Fatalf("state %v after every member synced, want PreparingRebalance", h.g.State())
	}
	if code := h.heartbeat(a, gen); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat: code %d, want REBALANCE_IN_PROGRESS", code)
	}
}

// Without an Assign by the rebalance timeout, waiting syncs are told to rejoin.
func TestServerAssignedBackstop(t *testing.T) {
	srv := &fakeServer{wants: true}
	h := newHarness(t, Config{Server: srv})
	a, ja := h.newMember(jopt{})
	gen := ready(t, "join", ja).Generation
	s := h.sync(a, gen, nil)
	notReady(t, "sync", s)
	h.advance(rebalance + time.Millisecond)
	if r := ready(t, "sync", s); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync: code %d, want REBALANCE_IN_PROGRESS", r.ErrorCode)
	}
	if h.g.Assign(gen, "uniform", nil, false, h.now) {
		t.Fatal("Assign after the backstop accepted")
	}
}

// Without Wants, a member with no protocol in common is refused, as before.
func TestServerNotWantedRefusesMixedProtocols(t *testing.T) {
	srv := &fakeServer{}
	h := newHarness(t, Config{Server: srv})
	h.stable(1)
	r := ready(t, "join", h.join("", jopt{version: 3, protocols: []string{"roundrobin"}}))
	if r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("join: code %d, want INCONSISTENT_GROUP_PROTOCOL", r.ErrorCode)
	}
	if len(srv.started) != 0 {
		t.Fatalf("Start called: %v", srv.started)
	}
}
