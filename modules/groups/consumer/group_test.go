package consumer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

func TestHeartbeatErrors(t *testing.T) {
	type setup func(h *harness)
	withMember := func(h *harness) {
		h.topics.add("t", 4)
		h.mustOK(h.hb(joinReq("m1", "t")))
	}
	withStatic := func(h *harness) {
		h.topics.add("t", 4)
		req := joinReq("m1", "t")
		req.InstanceID = strp("i1")
		h.mustOK(h.hb(req))
	}
	mod := func(req *kmsg.ConsumerGroupHeartbeatRequest, f func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatRequest {
		f(req)
		return req
	}
	tests := []struct {
		name  string
		cfg   Config
		setup setup
		req   *kmsg.ConsumerGroupHeartbeatRequest
		want  *kerr.Error
	}{
		{name: "v1 empty member id", req: joinReq("", "t"), want: kerr.InvalidRequest},
		{name: "v1 blank member id", req: joinReq("  ", "t"), want: kerr.InvalidRequest},
		{name: "v0 empty member id with positive epoch", req: mod(hbReq("", 3, nil), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version = 0 }), want: kerr.InvalidRequest},
		{name: "v0 empty member id leaving", req: mod(hbReq("", -1, nil), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version = 0 }), want: kerr.InvalidRequest},
		{name: "empty instance id", req: mod(joinReq("m1", "t"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("") }), want: kerr.InvalidRequest},
		{name: "empty rack", req: mod(joinReq("m1", "t"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = strp(" ") }), want: kerr.InvalidRequest},
		{name: "join without rebalance timeout", req: mod(joinReq("m1", "t"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }), want: kerr.InvalidRequest},
		{name: "join with negative rebalance timeout", req: mod(joinReq("m1", "t"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -7 }), want: kerr.InvalidRequest},
		{name: "join with null owned", req: mod(joinReq("m1", "t"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil }), want: kerr.InvalidRequest},
		{name: "join owning partitions", req: mod(joinReq("m1", "t"), func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = ownedTopics(tps{topicID("t"): {0}})
		}), want: kerr.InvalidRequest},
		{name: "join without subscription", req: mod(joinReq("m1"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }), want: kerr.InvalidRequest},
		{name: "v0 join with only a regex", req: mod(joinReq("m1"), func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Version = 0
			r.SubscribedTopicNames = nil
			r.SubscribedTopicRegex = strp("t.*")
		}), want: kerr.InvalidRequest},
		{name: "static leave without instance", req: hbReq("m1", -2, nil), want: kerr.InvalidRequest},
		{name: "epoch below -2", req: hbReq("m1", -3, nil), want: kerr.InvalidRequest},
		{name: "min epoch", req: hbReq("m1", -1<<31, nil), want: kerr.InvalidRequest},
		{name: "unknown assignor", req: mod(joinReq("m1", "t"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = strp("sticky") }), want: kerr.UnsupportedAssignor},
		{name: "too many topics", cfg: Config{MaxTopics: 2}, req: joinReq("m1", "a", "b", "c"), want: kerr.InvalidRequest},
		{name: "too many owned topics", cfg: Config{MaxTopics: 1}, setup: withMember, req: hbReq("m1", 1, tps{topicID("a"): {0}, topicID("b"): {0}}), want: kerr.InvalidRequest},
		{name: "invalid regex", req: mod(joinReq("m1"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = strp("a(b") }), want: kerr.InvalidRegularExpression},
		{name: "regex that anchoring would repair", req: mod(joinReq("m1"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = strp("a)|(b") }), want: kerr.InvalidRegularExpression},
		{name: "regex too long", cfg: Config{MaxRegexBytes: 8}, req: mod(joinReq("m1"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = strp("abcdefghij") }), want: kerr.InvalidRegularExpression},
		{name: "group full", cfg: Config{MaxSize: 1}, setup: withMember, req: joinReq("m2", "t"), want: kerr.GroupMaxSizeReached},
		{name: "unknown member", req: hbReq("nobody", 1, nil), want: kerr.UnknownMemberID},
		{name: "unknown member leaving", req: hbReq("nobody", -1, nil), want: kerr.UnknownMemberID},
		{name: "epoch ahead", setup: withMember, req: hbReq("m1", 2, nil), want: kerr.FencedMemberEpoch},
		{name: "epoch far ahead", setup: withMember, req: hbReq("m1", 1<<31-1, nil), want: kerr.FencedMemberEpoch},
		{name: "epoch behind, not previous", setup: func(h *harness) {
			withMember(h)
			h.g.mu.Lock()
			h.g.members["m1"].epoch, h.g.members["m1"].prevEpoch = 5, 4
			h.g.groupEpoch, h.g.targetEpoch = 5, 5
			h.g.mu.Unlock()
		}, req: hbReq("m1", 3, tps{}), want: kerr.FencedMemberEpoch},
		{name: "previous epoch without owned list", setup: previousEpoch, req: hbReq("a", 1, nil), want: kerr.FencedMemberEpoch},
		{name: "previous epoch owning more than assigned", setup: previousEpoch, req: hbReq("a", 1, tps{topicID("t"): {0, 1, 2, 3}}), want: kerr.FencedMemberEpoch},
		{name: "instance held by a live member", setup: withStatic, req: mod(joinReq("m2", "t"), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("i1") }), want: kerr.UnreleasedInstanceID},
		{name: "heartbeat with another member's instance", setup: func(h *harness) {
			withStatic(h)
			h.mustOK(h.hb(joinReq("m2", "t")))
		}, req: mod(hbReq("m2", 1, nil), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("i1") }), want: kerr.FencedInstanceID},
		{name: "static leave of another member's instance", setup: withStatic, req: mod(hbReq("m9", -2, nil), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("i1") }), want: kerr.FencedInstanceID},
		{name: "static leave of unknown instance", setup: withStatic, req: mod(hbReq("m1", -2, nil), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("i9") }), want: kerr.UnknownMemberID},
		{name: "heartbeat with unknown instance", setup: withStatic, req: mod(hbReq("m1", 1, nil), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strp("i9") }), want: kerr.UnknownMemberID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.cfg)
			if tt.setup != nil {
				tt.setup(h)
			}
			before := h.g.Members()
			epoch := h.g.GroupEpoch()
			resp := h.hb(tt.req)
			if got := kerr.ErrorForCode(resp.ErrorCode); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			if resp.ErrorMessage == nil || *resp.ErrorMessage == "" {
				t.Errorf("no error message")
			}
			if resp.Assignment != nil || resp.MemberID != nil {
				t.Errorf("error response carries member id or assignment")
			}
			if after := h.g.Members(); len(after) != len(before) || h.g.GroupEpoch() != epoch {
				t.Errorf("refused heartbeat changed the group: %d -> %d members, epoch %d -> %d", len(before), len(after), epoch, h.g.GroupEpoch())
			}
		})
	}
}

// previousEpoch leaves member "a" at epoch 2 with previous epoch 1.
func previousEpoch(h *harness) {
	h.topics.add("t", 4)
	a, b := &client{id: "a"}, &client{id: "b"}
	h.step(a, "t")
	h.step(b, "t")
	h.step(a)
	h.step(a)
	ms := h.g.Members()
	if ms[0].MemberEpoch != 2 || ms[0].PreviousEpoch != 1 {
		h.t.Fatalf("setup: %+v", ms[0])
	}
}

func TestPreviousEpochAccepted(t *testing.T) {
	h := newHarness(t, Config{})
	previousEpoch(h)
	owned := h.g.Members()[0].Assigned
	resp := h.mustOK(h.hb(hbReq("a", 1, owned)))
	if resp.MemberEpoch != 2 {
		t.Fatalf("epoch %d", resp.MemberEpoch)
	}
}

func TestJoinLeave(t *testing.T) {
	h := newHarness(t, Config{})
	tid := h.topics.add("t", 4)
	if h.g.State() != Empty || !h.g.IsEmpty() {
		t.Fatalf("new group: %v", h.g.State())
	}
	resp := h.mustOK(h.hb(joinReq("m1", "t")))
	if resp.MemberEpoch != 1 || *resp.MemberID != "m1" || resp.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("join: epoch %d id %q interval %d", resp.MemberEpoch, *resp.MemberID, resp.HeartbeatIntervalMillis)
	}
	if got := respAssignment(resp); !equalTPs(got, tps{tid: {0, 1, 2, 3}}) {
		t.Fatalf("assignment %v", got)
	}
	if h.g.State() != Stable || h.g.Size() != 1 || h.g.GroupEpoch() != 1 {
		t.Fatalf("state %v size %d epoch %d", h.g.State(), h.g.Size(), h.g.GroupEpoch())
	}
	// A light heartbeat: no assignment.
	resp = h.mustOK(h.hb(hbReq("m1", 1, nil)))
	if resp.Assignment != nil || resp.MemberEpoch != 1 {
		t.Fatalf("light heartbeat: %+v", resp)
	}
	// A full heartbeat: the assignment again.
	full := hbReq("m1", 1, tps{tid: {0, 1, 2, 3}})
	full.RebalanceTimeoutMillis = 1000
	full.SubscribedTopicNames = []string{"t"}
	if resp = h.mustOK(h.hb(full)); resp.Assignment == nil {
		t.Fatalf("full heartbeat without assignment")
	}
	// Rejoin with epoch 0 and the same id: same member, same assignment.
	resp = h.mustOK(h.hb(joinReq("m1", "t")))
	if resp.MemberEpoch != 1 || h.g.GroupEpoch() != 1 || !equalTPs(respAssignment(resp), tps{tid: {0, 1, 2, 3}}) {
		t.Fatalf("rejoin: epoch %d group epoch %d", resp.MemberEpoch, h.g.GroupEpoch())
	}
	// Leave.
	resp = h.mustOK(h.hb(hbReq("m1", -1, nil)))
	if resp.MemberEpoch != -1 || *resp.MemberID != "m1" {
		t.Fatalf("leave: %+v", resp)
	}
	if h.g.State() != Empty || h.g.GroupEpoch() != 2 {
		t.Fatalf("after leave: %v epoch %d", h.g.State(), h.g.GroupEpoch())
	}
	// Rejoin after leaving: a new member.
	resp = h.mustOK(h.hb(joinReq("m1", "t")))
	if resp.MemberEpoch != 3 {
		t.Fatalf("rejoin after leave: epoch %d", resp.MemberEpoch)
	}
}

func TestV0GeneratesMemberID(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 2)
	req := joinReq("", "t")
	req.Version = 0
	resp := h.mustOK(h.hb(req))
	if resp.MemberID == nil || *resp.MemberID != "gen-1" {
		t.Fatalf("member id %v", resp.MemberID)
	}
	// Default generator: Kafka's UUID text form.
	if id := randomMemberID(); len(id) != 22 || id == randomMemberID() {
		t.Fatalf("random id %q", id)
	}
}

func TestStaticLeaveRejoin(t *testing.T) {
	h := newHarness(t, Config{})
	tid := h.topics.add("t", 6)
	a := &client{id: "a1", instance: "A"}
	b := &client{id: "b1", instance: "B"}
	cs := []*client{a, b}
	for range 10 {
		for _, c := range cs {
			h.step(c, "t")
		}
		checkOwned(t, cs)
	}
	if h.g.State() != Stable {
		t.Fatalf("state %v", h.g.State())
	}
	had := a.owned
	epoch := h.g.GroupEpoch()
	// A leaves temporarily.
	req := hbReq("a1", -2, nil)
	req.InstanceID = strp("A")
	resp := h.mustOK(h.hb(req))
	if resp.MemberEpoch != -2 {
		t.Fatalf("static leave epoch %d", resp.MemberEpoch)
	}
	if h.g.GroupEpoch() != epoch || h.g.Size() != 2 || h.g.State() != Reconciling {
		t.Fatalf("after static leave: epoch %d size %d state %v", h.g.GroupEpoch(), h.g.Size(), h.g.State())
	}
	// B heartbeats: nothing moves to it.
	h.step(b)
	if count(b.owned) != 3 {
		t.Fatalf("b owns %v", b.owned)
	}
	// Another member id with instance B is refused while B is live.
	r := joinReq("b2", "t")
	r.InstanceID = strp("B")
	if resp := h.hb(r); resp.ErrorCode != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("got %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	// A comes back under a new member id, within the session timeout.
	h.advance(session / 2)
	a2 := &client{id: "a2", instance: "A"}
	if code := h.step(a2, "t"); code != 0 {
		t.Fatalf("rejoin: %v", kerr.ErrorForCode(code))
	}
	if !equalTPs(a2.owned, had) || a2.epoch != epoch {
		t.Fatalf("rejoined with %v at %d, had %v at %d", a2.owned, a2.epoch, had, epoch)
	}
	if h.g.GroupEpoch() != epoch || h.g.State() != Stable {
		t.Fatalf("after rejoin: epoch %d state %v", h.g.GroupEpoch(), h.g.State())
	}
	// The old member id is gone.
	old := hbReq("a1", a.epoch, nil)
	if resp := h.hb(old); resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("old id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	_ = tid

	// Static leave then session expiry: the assignment is released.
	r = hbReq("a2", a2.epoch, nil)
	r.MemberEpoch = -2
	r.InstanceID = strp("A")
	h.mustOK(h.hb(r))
	for range 10 {
		h.advance(5 * time.Second)
		h.step(b)
	}
	if h.g.Size() != 1 || h.g.GroupEpoch() != epoch+1 {
		t.Fatalf("after expiry: size %d epoch %d", h.g.Size(), h.g.GroupEpoch())
	}
	for range 3 {
		h.step(b)
	}
	if count(b.owned) != 6 {
		t.Fatalf("b owns %v", b.owned)
	}
}

func TestStaticSameIDRejoin(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 2)
	req := joinReq("m1", "t")
	req.InstanceID = strp("I")
	h.mustOK(h.hb(req))
	leave := hbReq("m1", -2, nil)
	leave.InstanceID = strp("I")
	h.mustOK(h.hb(leave))
	resp := h.mustOK(h.hb(req))
	if resp.MemberEpoch != 1 || count(respAssignment(resp)) != 2 {
		t.Fatalf("rejoin: %+v", resp)
	}
	// A static member leaving with -1 is removed.
	leave.MemberEpoch = -1
	h.mustOK(h.hb(leave))
	if h.g.Size() != 0 {
		t.Fatalf("size %d", h.g.Size())
	}
}

// TestReconcileThreeMembers joins three members one by one to a
// 12-partition topic and checks that no partition is ever owned twice.
func TestReconcileThreeMembers(t *testing.T) {
	for _, name := range []string{"uniform", "range"} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.topics.add("t", 12)
			var cs []*client
			for i, id := range []string{"m1", "m2", "m3"} {
				c := &client{id: id}
				cs = append(cs, c)
				for round := 0; round < 20; round++ {
					for _, x := range cs {
						if code := h.step(x, "t"); code != 0 {
							t.Fatalf("%s: %v", x.id, kerr.ErrorForCode(code))
						}
						checkOwned(t, cs)
					}
					if h.g.State() == Stable {
						break
					}
				}
				if h.g.State() != Stable {
					t.Fatalf("after %d members: %v", i+1, h.g.State())
				}
				// Stable: every client owns its target.
				tgt := h.target()
				total := 0
				for _, x := range cs {
					if !equalTPs(x.owned, tgt[x.id]) {
						t.Fatalf("%s owns %v, target %v", x.id, x.owned, tgt[x.id])
					}
					total += count(x.owned)
					if x.epoch != h.g.GroupEpoch() {
						t.Fatalf("%s at epoch %d, group %d", x.id, x.epoch, h.g.GroupEpoch())
					}
				}
				if total != 12 {
					t.Fatalf("%d partitions owned", total)
				}
			}
			in := h.input()
			out := h.target()
			if err := assignor.Check(in, out); err != nil {
				t.Fatal(err)
			}
			if spread, _ := assignor.Balance(in, out); spread > 0 {
				t.Fatalf("spread %d", spread)
			}
		})
	}
}

// Members ask for "range"; the group uses it.
func TestServerAssignorChoice(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 3)
	if got := h.g.Describe(h.topics, h.now).AssignorName; got != "uniform" {
		t.Fatalf("default assignor %q", got)
	}
	req := joinReq("m1", "t")
	req.ServerAssignor = strp("range")
	h.mustOK(h.hb(req))
	h.mustOK(h.hb(joinReq("m2", "t")))
	if got := h.g.Describe(h.topics, h.now).AssignorName; got != "range" {
		t.Fatalf("assignor %q", got)
	}
	h.g.mu.Lock()
	by := h.g.targetBy
	h.g.mu.Unlock()
	if by != "range" {
		t.Fatalf("target computed by %q", by)
	}
}

func TestSessionTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 4)
	a, b := &client{id: "a"}, &client{id: "b"}
	h.step(a, "t")
	h.step(b, "t")
	if at, ok := h.g.NextDeadline(); !ok || !at.Equal(t0.Add(session)) {
		t.Fatalf("next deadline %v %v", at, ok)
	}
	for range 4 {
		h.advance(5 * time.Second)
		h.step(a)
		h.step(a)
	}
	epoch := h.g.GroupEpoch()
	h.advance(session - 20*time.Second - time.Nanosecond)
	if h.g.Size() != 2 {
		t.Fatalf("expired early")
	}
	h.advance(time.Nanosecond)
	if h.g.Size() != 1 || h.g.GroupEpoch() != epoch+1 || h.g.State() != Assigning {
		t.Fatalf("size %d epoch %d state %v", h.g.Size(), h.g.GroupEpoch(), h.g.State())
	}
	if code := h.step(b); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member: %v", kerr.ErrorForCode(code))
	}
	h.step(a)
	h.step(a)
	if count(a.owned) != 4 || h.g.State() != Stable {
		t.Fatalf("a owns %v, %v", a.owned, h.g.State())
	}
}

func TestRebalanceTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 4)
	a, b := &client{id: "a"}, &client{id: "b"}
	h.step(a, "t")
	h.step(b, "t") // b joins: a must revoke two partitions
	h.advance(time.Second)
	h.mustOK(h.hb(hbReq("a", a.epoch, nil))) // a heartbeats but does not say it revoked
	ms := h.g.Members()
	if ms[0].State != MemberUnrevokedPartitions {
		t.Fatalf("a is %v", ms[0].State)
	}
	if at, _ := h.g.NextDeadline(); !at.Equal(t0.Add(time.Second + rebalance)) {
		t.Fatalf("deadline %v", at.Sub(t0))
	}
	for range 6 { // keep the sessions alive, never revoke
		h.advance(4 * time.Second)
		h.mustOK(h.hb(hbReq("a", a.epoch, a.owned)))
		h.step(b)
		if count(b.owned) != 0 || h.g.Members()[1].State != MemberUnreleasedPartitions {
			t.Fatalf("b got partitions a has not released: %v", b.owned)
		}
	}
	h.advance(rebalance)
	if h.g.Size() != 1 {
		t.Fatalf("a was not fenced: %d members", h.g.Size())
	}
	h.step(b)
	if count(b.owned) != 4 {
		t.Fatalf("b owns %v", b.owned)
	}
}

func TestMetadataChange(t *testing.T) {
	h := newHarness(t, Config{})
	tid := h.topics.add("t", 4)
	a, b := &client{id: "a"}, &client{id: "b"}
	cs := []*client{a, b}
	for range 5 {
		h.step(a, "t")
		h.step(b, "t")
		checkOwned(t, cs)
	}
	epoch := h.g.GroupEpoch()
	h.topics.add("t", 8)
	for range 5 {
		h.step(a)
		h.step(b)
		checkOwned(t, cs)
	}
	if h.g.GroupEpoch() != epoch+1 || h.g.State() != Stable {
		t.Fatalf("epoch %d (was %d) state %v", h.g.GroupEpoch(), epoch, h.g.State())
	}
	if count(a.owned) != 4 || count(b.owned) != 4 || len(union(a.owned[tid], b.owned[tid])) != 8 {
		t.Fatalf("a %v b %v", a.owned, b.owned)
	}
	// Topic deleted: partitions revoked.
	delete(h.topics.byName, "t")
	for range 3 {
		h.step(a)
		h.step(b)
	}
	if count(a.owned)+count(b.owned) != 0 || h.g.GroupEpoch() != epoch+2 {
		t.Fatalf("after delete: a %v b %v epoch %d", a.owned, b.owned, h.g.GroupEpoch())
	}
}

func TestSubscribeToMissingTopic(t *testing.T) {
	h := newHarness(t, Config{})
	a := &client{id: "a"}
	h.step(a, "later")
	if count(a.owned) != 0 || h.g.State() != Stable {
		t.Fatalf("%v %v", a.owned, h.g.State())
	}
	h.topics.add("later", 3)
	h.step(a)
	if count(a.owned) != 3 || h.g.GroupEpoch() != 2 {
		t.Fatalf("%v epoch %d", a.owned, h.g.GroupEpoch())
	}
}

// An internal topic is matched like any other (Kafka 4's coordinator does; franz-go's
// Test848RegexBrokerResolves checks it with __consumer_offsets).
func TestRegexMatchesInternalTopics(t *testing.T) {
	h := newHarness(t, Config{})
	internal := h.topics.add("__consumer_offsets", 3)
	orders := h.topics.add("orders", 1)
	h.topics.add("orders-v2", 1)
	req := joinReq("m1")
	req.SubscribedTopicNames = nil
	req.SubscribedTopicRegex = strp("(?:orders)|(?:__consumer_offsets)")
	resp := h.mustOK(h.hb(req))
	if got := respAssignment(resp); !equalTPs(got, tps{internal: {0, 1, 2}, orders: {0}}) {
		t.Fatalf("assignment %v", got)
	}
}

func TestRegexSubscription(t *testing.T) {
	h := newHarness(t, Config{})
	foo := h.topics.add("foo-1", 2)
	h.topics.add("bar", 2)
	h.topics.add("__foo-1", 2) // must not match: whole-name match
	h.topics.add("xfoo-1", 2)  // nor this
	req := joinReq("m1")
	req.SubscribedTopicNames = nil
	req.SubscribedTopicRegex = strp("foo-.*")
	resp := h.mustOK(h.hb(req))
	if got := respAssignment(resp); !equalTPs(got, tps{foo: {0, 1}}) {
		t.Fatalf("assignment %v", got)
	}
	c := &client{id: "m1", joined: true, epoch: resp.MemberEpoch, owned: respAssignment(resp)}
	foo2 := h.topics.add("foo-2", 3)
	h.advance(5 * time.Second)
	h.step(c)
	if count(c.owned) != 2 {
		t.Fatalf("picked up before refresh: %v", c.owned)
	}
	h.advance(5 * time.Second)
	h.step(c)
	if !equalTPs(c.owned, tps{foo: {0, 1}, foo2: {0, 1, 2}}) {
		t.Fatalf("after refresh: %v", c.owned)
	}
	d := h.g.Describe(h.topics, h.now)
	if m := d.Members[0]; m.SubscribedTopicRegex == nil || *m.SubscribedTopicRegex != "foo-.*" || len(m.Assignment.TopicPartitions) != 2 {
		t.Fatalf("describe: %+v", m)
	}
	// Switching to an empty regex and names.
	r := hbReq("m1", c.epoch, c.owned)
	r.SubscribedTopicRegex = strp("")
	r.SubscribedTopicNames = []string{"bar"}
	if a := respAssignment(h.mustOK(h.hb(r))); a != nil {
		c.owned = a
	}
	for range 3 {
		h.step(c)
	}
	if !equalTPs(c.owned, tps{topicID("bar"): {0, 1}}) {
		t.Fatalf("after switch: %v", c.owned)
	}
}

func TestDescribe(t *testing.T) {
	h := newHarness(t, Config{})
	tid := h.topics.add("t", 4)
	req := joinReq("m1", "t")
	req.InstanceID = strp("I")
	req.RackID = strp("r1")
	h.mustOK(h.hb(req))
	h.mustOK(h.hb(joinReq("m2", "t")))
	d := h.g.Describe(h.topics, h.now)
	if d.Group != "g" || d.State != "Reconciling" || d.Epoch != 2 || d.AssignmentEpoch != 2 || d.AssignorName != "uniform" || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	m1 := d.Members[0]
	if m1.MemberID != "m1" || *m1.InstanceID != "I" || *m1.RackID != "r1" || m1.MemberEpoch != 1 || m1.ClientID != "client" ||
		m1.ClientHost != "/127.0.0.1" || !slices.Equal(m1.SubscribedTopics, []string{"t"}) || m1.MemberType != 1 {
		t.Fatalf("member: %+v", m1)
	}
	if len(m1.Assignment.TopicPartitions) != 1 || m1.Assignment.TopicPartitions[0].Topic != "t" || len(m1.Assignment.TopicPartitions[0].Partitions) != 4 {
		t.Fatalf("current: %+v", m1.Assignment)
	}
	if len(m1.TargetAssignment.TopicPartitions) != 1 || m1.TargetAssignment.TopicPartitions[0].TopicID != tid || len(m1.TargetAssignment.TopicPartitions[0].Partitions) != 2 {
		t.Fatalf("target: %+v", m1.TargetAssignment)
	}
	ms := h.g.Members()
	if len(ms) != 2 || ms[0].InstanceID != "I" || ms[1].MemberEpoch != 2 {
		t.Fatalf("members: %+v", ms)
	}
	h.g.MarkDead(kerr.NotCoordinator)
	if d := h.g.Describe(nil, h.now); d.State != "Dead" || len(d.Members) != 0 {
		t.Fatalf("dead: %+v", d)
	}
}

func TestValidateCommitFetch(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 4)
	if err := h.g.ValidateCommit("", -1); err != nil {
		t.Fatalf("simple commit on empty group: %v", err)
	}
	if err := h.g.ValidateCommit("x", 3); err != kerr.UnknownMemberID {
		t.Fatalf("got %v", err)
	}
	h.mustOK(h.hb(joinReq("m1", "t")))
	tests := []struct {
		name         string
		id           string
		epoch        int32
		commit, fetc *kerr.Error
	}{
		{"member at its epoch", "m1", 1, nil, nil},
		{"stale epoch", "m1", 0, kerr.StaleMemberEpoch, kerr.StaleMemberEpoch},
		{"epoch ahead", "m1", 2, kerr.StaleMemberEpoch, kerr.StaleMemberEpoch},
		{"unknown member", "m9", 1, kerr.UnknownMemberID, kerr.UnknownMemberID},
		{"simple commit to a non-empty group", "", -1, kerr.UnknownMemberID, nil},
		{"member id with -1", "m1", -1, kerr.StaleMemberEpoch, kerr.StaleMemberEpoch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.g.ValidateCommit(tt.id, tt.epoch); got != tt.commit {
				t.Errorf("commit: got %v, want %v", got, tt.commit)
			}
			if got := h.g.ValidateFetch(tt.id, tt.epoch); got != tt.fetc {
				t.Errorf("fetch: got %v, want %v", got, tt.fetc)
			}
		})
	}
	h.g.MarkDead(nil)
	if err := h.g.ValidateCommit("m1", 1); err != kerr.CoordinatorNotAvailable {
		t.Fatalf("dead: %v", err)
	}
	if resp := h.hb(hbReq("m1", 1, nil)); resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("dead heartbeat: %v", resp.ErrorCode)
	}
	if h.g.IsEmpty() || h.g.State() != Dead {
		t.Fatalf("dead group empty or not dead")
	}
}

// badAssignor fails, panics or answers nonsense.
type badAssignor struct{ mode string }

func (b badAssignor) Name() string { return "bad-" + b.mode }

func (b badAssignor) Assign(_ context.Context, in assignor.Input) (assignor.Assignment, error) {
	switch b.mode {
	case "error":
		return nil, errors.New("boom")
	case "panic":
		panic("boom")
	}
	out := assignor.Assignment{}
	for _, m := range in.Members {
		out[m.ID] = map[assignor.TopicID][]int32{topicID("t"): {0}} // everyone gets partition 0
	}
	return out, nil
}

func TestAssignorFailure(t *testing.T) {
	for _, mode := range []string{"error", "panic", "invalid"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, Config{Assignors: []assignor.Assignor{assignor.Uniform{}, badAssignor{mode}}})
			h.topics.add("t", 4)
			a := &client{id: "a"}
			h.step(a, "t")
			if count(a.owned) != 4 || h.g.LastAssignorError() != nil {
				t.Fatalf("a owns %v", a.owned)
			}
			req := joinReq("b", "t")
			req.ServerAssignor = strp("bad-" + mode)
			resp := h.mustOK(h.hb(req))
			err := h.g.LastAssignorError()
			if err == nil || !strings.Contains(err.Error(), "bad-"+mode) {
				t.Fatalf("assignor error %v", err)
			}
			if h.g.State() != Assigning || resp.MemberEpoch != 1 || count(respAssignment(resp)) != 0 {
				t.Fatalf("state %v epoch %d", h.g.State(), resp.MemberEpoch)
			}
			h.step(a) // the old target stays in force
			if count(a.owned) != 4 || a.epoch != 1 {
				t.Fatalf("a: %v at %d", a.owned, a.epoch)
			}
			// b switches to uniform: the next heartbeat succeeds.
			r := hbReq("b", 0, nil)
			r.MemberEpoch = 0
			r.RebalanceTimeoutMillis = 1000
			r.SubscribedTopicNames = []string{"t"}
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			r.ServerAssignor = strp("uniform")
			h.mustOK(h.hb(r))
			if h.g.LastAssignorError() != nil || h.g.State() == Assigning {
				t.Fatalf("still failing: %v %v", h.g.LastAssignorError(), h.g.State())
			}
		})
	}
}

func TestCancelledContext(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("t", 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp := h.g.Heartbeat(ctx, joinReq("m1", "t"), 1, Client{}, h.topics, h.now)
	if resp.ErrorCode != 0 || h.g.LastAssignorError() == nil || h.g.State() != Assigning {
		t.Fatalf("resp %v, err %v, state %v", resp.ErrorCode, h.g.LastAssignorError(), h.g.State())
	}
	// nil context, nil topics, nil request: no panic.
	//lint:ignore SA1012 a nil context must not panic
	h.g.Heartbeat(nil, hbReq("m1", 0, nil), 1, Client{}, nil, h.now)
	if resp := h.g.Heartbeat(context.Background(), nil, 1, Client{}, nil, h.now); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("nil request: %v", resp.ErrorCode)
	}
}

func TestBadOwnedPartitions(t *testing.T) {
	h := newHarness(t, Config{})
	tid := h.topics.add("t", 4)
	a := &client{id: "a"}
	h.step(a, "t")
	resp := h.mustOK(h.hb(hbReq("a", a.epoch, tps{tid: {-1, 3, 3, 99}, topicID("nope"): {0}})))
	if resp.MemberEpoch != 1 {
		t.Fatalf("epoch %d", resp.MemberEpoch)
	}
	r := hbReq("a", a.epoch, nil)
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: tid, Partitions: nil}, {TopicID: tid, Partitions: []int32{-5}}}
	h.mustOK(h.hb(r))
}

// A fenced client rejoins with epoch 0 under the same member id and is
// re-admitted in place with its assignment.
func TestRejoinAfterFence(t *testing.T) {
	h := newHarness(t, Config{})
	tid := h.topics.add("t", 3)
	a := &client{id: "a"}
	h.step(a, "t")
	if resp := h.hb(hbReq("a", 7, a.owned)); resp.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("got %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	resp := h.mustOK(h.hb(joinReq("a", "t")))
	if resp.MemberEpoch != 1 || !equalTPs(respAssignment(resp), tps{tid: {0, 1, 2}}) || h.g.GroupEpoch() != 1 {
		t.Fatalf("rejoin: epoch %d assignment %v group epoch %d", resp.MemberEpoch, respAssignment(resp), h.g.GroupEpoch())
	}
}
