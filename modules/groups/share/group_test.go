package share

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// Refused heartbeats: the error, a message, and no change to the group.
func TestHeartbeatErrors(t *testing.T) {
	withMember := func(h *harness) {
		h.topics.add("t", 4)
		h.mustOK(h.hb(joinReq("m1", "t")))
	}
	mod := func(req *kmsg.ShareGroupHeartbeatRequest, f func(*kmsg.ShareGroupHeartbeatRequest)) *kmsg.ShareGroupHeartbeatRequest {
		f(req)
		return req
	}
	tests := []struct {
		name  string
		cfg   Config
		setup func(h *harness)
		req   *kmsg.ShareGroupHeartbeatRequest
		want  *kerr.Error
		msg   string // a part of the message
	}{
		{name: "empty member id", req: joinReq("", "t"), want: kerr.InvalidRequest, msg: "MemberId"},
		{name: "blank member id", req: joinReq(" \t", "t"), want: kerr.InvalidRequest, msg: "MemberId"},
		{name: "empty member id leaving", req: hbReq("", -1), want: kerr.InvalidRequest, msg: "MemberId"},
		{name: "join with null subscription", req: hbReq("m1", 0), want: kerr.InvalidRequest, msg: "SubscribedTopicNames"},
		{name: "blank rack", req: mod(joinReq("m1", "t"), func(r *kmsg.ShareGroupHeartbeatRequest) { r.RackID = strp(" ") }), want: kerr.InvalidRequest, msg: "RackId"},
		{name: "epoch -2", setup: withMember, req: hbReq("m1", -2), want: kerr.InvalidRequest, msg: "MemberEpoch"},
		{name: "min epoch", req: hbReq("m1", -1<<31), want: kerr.InvalidRequest, msg: "MemberEpoch"},
		{name: "too many topics", cfg: Config{MaxTopics: 2}, req: joinReq("m1", "a", "b", "c"), want: kerr.InvalidRequest, msg: "too many"},
		{name: "too many topics later", cfg: Config{MaxTopics: 1}, setup: withMember, req: mod(hbReq("m1", 1), func(r *kmsg.ShareGroupHeartbeatRequest) {
			r.SubscribedTopicNames = []string{"t", "u"}
		}), want: kerr.InvalidRequest},
		{name: "group full", cfg: Config{MaxSize: 1}, setup: withMember, req: joinReq("m2", "t"), want: kerr.GroupMaxSizeReached, msg: "maximum size"},
		{name: "unknown member", req: hbReq("nobody", 1), want: kerr.UnknownMemberID, msg: "nobody"},
		{name: "unknown member leaving", setup: withMember, req: hbReq("nobody", -1), want: kerr.UnknownMemberID},
		{name: "epoch ahead", setup: withMember, req: hbReq("m1", 2), want: kerr.FencedMemberEpoch, msg: "rejoin"},
		{name: "epoch far ahead", setup: withMember, req: hbReq("m1", 1<<31-1), want: kerr.FencedMemberEpoch},
		{name: "epoch behind", setup: func(h *harness) {
			withMember(h)
			h.mustOK(h.hb(joinReq("m2", "t"))) // group epoch 2; m1 still at 1
			h.mustOK(h.hb(hbReq("m1", 1)))     // m1 at 2
		}, req: hbReq("m1", 1), want: kerr.FencedMemberEpoch},
		{name: "dead group", setup: func(h *harness) {
			withMember(h)
			h.g.MarkDead(nil)
		}, req: hbReq("m1", 1), want: kerr.CoordinatorNotAvailable},
		{name: "dead group, coordinator moved", setup: func(h *harness) {
			withMember(h)
			h.g.MarkDead(kerr.NotCoordinator)
		}, req: joinReq("m1", "t"), want: kerr.NotCoordinator},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			if tc.setup != nil {
				tc.setup(h)
			}
			before := h.g.Snapshot()
			state := h.g.State()
			resp := h.hb(tc.req)
			if resp.ErrorCode != tc.want.Code {
				t.Fatalf("error %v (%s), want %v", kerr.ErrorForCode(resp.ErrorCode), msgOf(resp), tc.want)
			}
			if !strings.Contains(msgOf(resp), tc.msg) {
				t.Errorf("message %q does not mention %q", msgOf(resp), tc.msg)
			}
			if resp.Assignment != nil || resp.MemberEpoch != 0 {
				t.Errorf("refused heartbeat answered epoch %d, assignment %v", resp.MemberEpoch, resp.Assignment)
			}
			if after := h.g.Snapshot(); !reflect.DeepEqual(after, before) || h.g.State() != state {
				t.Errorf("refused heartbeat changed the group:\n%+v\nwas\n%+v", after, before)
			}
		})
	}
}

func TestNilRequest(t *testing.T) {
	g := New("g", Config{}, t0)
	if resp := g.Heartbeat(nil, 1, Client{}, nil, t0); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("nil request: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// The membership rules, one scenario each.
func TestHeartbeatRules(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"join", func(t *testing.T, h *harness) {
			id := h.topics.add("t", 3)
			resp := h.mustOK(h.hb(joinReq("m1", "t")))
			if *resp.MemberID != "m1" || resp.MemberEpoch != 1 || resp.HeartbeatIntervalMillis != 5000 {
				t.Fatalf("join: %+v", resp)
			}
			if got := respAssignment(t, resp); !reflect.DeepEqual(got, tps{id: {0, 1, 2}}) {
				t.Fatalf("assignment %v", got)
			}
			if h.g.State() != Stable || h.g.GroupEpoch() != 1 || h.g.Size() != 1 || h.g.IsEmpty() {
				t.Fatalf("state %v epoch %d size %d", h.g.State(), h.g.GroupEpoch(), h.g.Size())
			}
		}},
		{"join subscribed to nothing", func(t *testing.T, h *harness) {
			h.topics.add("t", 3)
			resp := h.mustOK(h.hb(joinReq("m1")))
			if resp.MemberEpoch != 1 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 0 {
				t.Fatalf("join: %+v", resp)
			}
		}},
		{"heartbeat without change carries no assignment", func(t *testing.T, h *harness) {
			h.topics.add("t", 3)
			h.mustOK(h.hb(joinReq("m1", "t")))
			resp := h.mustOK(h.hb(hbReq("m1", 1)))
			if resp.MemberEpoch != 1 || resp.Assignment != nil || h.g.GroupEpoch() != 1 {
				t.Fatalf("heartbeat: %+v, group epoch %d", resp, h.g.GroupEpoch())
			}
			// The same subscription sent again changes nothing either.
			req := hbReq("m1", 1)
			req.SubscribedTopicNames = []string{"t", "t"}
			req.RackID = nil
			if resp := h.mustOK(h.hb(req)); resp.Assignment != nil || h.g.GroupEpoch() != 1 {
				t.Fatalf("same subscription: %+v, group epoch %d", resp, h.g.GroupEpoch())
			}
		}},
		{"rejoin of a known member keeps it", func(t *testing.T, h *harness) {
			id := h.topics.add("t", 4)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.mustOK(h.hb(joinReq("b", "t")))
			h.mustOK(h.hb(hbReq("a", 1)))
			before := h.g.Members()
			resp := h.mustOK(h.hb(joinReq("a", "t")))
			if resp.MemberEpoch != 2 || h.g.GroupEpoch() != 2 || h.g.Size() != 2 {
				t.Fatalf("rejoin: epoch %d, group epoch %d, size %d", resp.MemberEpoch, h.g.GroupEpoch(), h.g.Size())
			}
			if got := respAssignment(t, resp); !reflect.DeepEqual(got, tps{id: {0, 1}}) {
				t.Fatalf("rejoin re-delivered %v", got)
			}
			if after := h.g.Members(); !reflect.DeepEqual(after, before) {
				t.Fatalf("rejoin changed members:\n%+v\nwas\n%+v", after, before)
			}
		}},
		{"rejoin of a known member is allowed in a full group", func(t *testing.T, h *harness) {
			h.g = New("g", Config{MaxSize: 1}, t0)
			h.topics.add("t", 4)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.mustOK(h.hb(joinReq("a", "t")))
		}},
		{"rejoin with another subscription bumps", func(t *testing.T, h *harness) {
			h.topics.add("t", 4)
			u := h.topics.add("u", 2)
			h.mustOK(h.hb(joinReq("a", "t")))
			resp := h.mustOK(h.hb(joinReq("a", "u")))
			if resp.MemberEpoch != 2 || !reflect.DeepEqual(respAssignment(t, resp), tps{u: {0, 1}}) {
				t.Fatalf("rejoin: %+v", resp)
			}
		}},
		{"leave", func(t *testing.T, h *harness) {
			id := h.topics.add("t", 4)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.mustOK(h.hb(joinReq("b", "t")))
			h.mustOK(h.hb(hbReq("a", 1))) // a at epoch 2 with two partitions
			resp := h.mustOK(h.hb(hbReq("b", -1)))
			if *resp.MemberID != "b" || resp.MemberEpoch != -1 || resp.Assignment != nil {
				t.Fatalf("leave: %+v", resp)
			}
			if h.g.Size() != 1 || h.g.GroupEpoch() != 3 || h.g.IsMember("b") {
				t.Fatalf("after leave: size %d, epoch %d", h.g.Size(), h.g.GroupEpoch())
			}
			// a gets all partitions back at its next heartbeat.
			resp = h.mustOK(h.hb(hbReq("a", 2)))
			if resp.MemberEpoch != 3 || !reflect.DeepEqual(respAssignment(t, resp), tps{id: {0, 1, 2, 3}}) {
				t.Fatalf("after b left, a: %+v", resp)
			}
			h.mustOK(h.hb(hbReq("a", -1)))
			if h.g.State() != Empty || !h.g.IsEmpty() || h.g.GroupEpoch() != 4 {
				t.Fatalf("state %v, epoch %d", h.g.State(), h.g.GroupEpoch())
			}
		}},
		{"leave right after joining", func(t *testing.T, h *harness) {
			h.topics.add("t", 4)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.mustOK(h.hb(hbReq("a", -1)))
			if h.g.Size() != 0 {
				t.Fatal("not removed")
			}
		}},
		{"second member splits the partitions", func(t *testing.T, h *harness) {
			id := h.topics.add("t", 4)
			h.mustOK(h.hb(joinReq("a", "t")))
			resp := h.mustOK(h.hb(joinReq("b", "t")))
			if resp.MemberEpoch != 2 || count(respAssignment(t, resp)) != 2 {
				t.Fatalf("b: %+v", resp)
			}
			// a keeps its epoch and partitions until its heartbeat.
			if got := h.g.AssignedTo("a"); !reflect.DeepEqual(got, tps{id: {0, 1, 2, 3}}) {
				t.Fatalf("a before its heartbeat: %v", got)
			}
			// b got a's highest partitions; until a's heartbeat both have them.
			if got := h.g.AssignedTo("b"); !reflect.DeepEqual(got, tps{id: {2, 3}}) {
				t.Fatalf("b: %v", got)
			}
			if h.g.Subscribers(id, 0) != 1 || h.g.Subscribers(id, 2) != 2 {
				t.Fatalf("partitions 0 and 2 held by %d and %d", h.g.Subscribers(id, 0), h.g.Subscribers(id, 2))
			}
			resp = h.mustOK(h.hb(hbReq("a", 1)))
			if resp.MemberEpoch != 2 || count(respAssignment(t, resp)) != 2 {
				t.Fatalf("a: %+v", resp)
			}
			for p := range int32(4) {
				if n := h.g.Subscribers(id, p); n != 1 {
					t.Fatalf("partition %d held by %d", p, n)
				}
			}
		}},
		{"session expiry", func(t *testing.T, h *harness) {
			h.topics.add("t", 4)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.advance(10 * time.Second)
			h.mustOK(h.hb(joinReq("b", "t")))
			if at, ok := h.g.NextDeadline(); !ok || !at.Equal(t0.Add(session)) {
				t.Fatalf("next deadline %v %v", at, ok)
			}
			h.advance(session - 10*time.Second - time.Millisecond)
			if h.g.Size() != 2 {
				t.Fatal("expired early")
			}
			h.mustOK(h.hb(hbReq("b", 2))) // b keeps its session alive
			h.advance(time.Millisecond)
			if h.g.IsMember("a") || !h.g.IsMember("b") || h.g.GroupEpoch() != 3 {
				t.Fatalf("after a's session: members %+v, epoch %d", h.g.Members(), h.g.GroupEpoch())
			}
			if at, ok := h.g.NextDeadline(); !ok || !at.Equal(h.now.Add(session-time.Millisecond)) {
				t.Fatalf("next deadline %v %v", at, ok)
			}
			h.advance(time.Hour)
			if !h.g.IsEmpty() || h.g.GroupEpoch() != 4 {
				t.Fatalf("after b's session: size %d, epoch %d", h.g.Size(), h.g.GroupEpoch())
			}
			if _, ok := h.g.NextDeadline(); ok {
				t.Fatal("deadline without members")
			}
			// An expired member's heartbeat is unknown.
			if resp := h.hb(hbReq("b", 3)); resp.ErrorCode != kerr.UnknownMemberID.Code {
				t.Fatalf("expired member: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
		}},
		{"heartbeat expires sessions first", func(t *testing.T, h *harness) {
			h.topics.add("t", 4)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.now = h.now.Add(time.Hour) // no Tick
			if resp := h.hb(hbReq("a", 1)); resp.ErrorCode != kerr.UnknownMemberID.Code {
				t.Fatalf("late heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
		}},
		{"time going back is ignored", func(t *testing.T, h *harness) {
			h.topics.add("t", 4)
			h.advance(time.Hour)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.now = t0 // an older time from a concurrent caller
			h.mustOK(h.hb(hbReq("a", 1)))
			if at, _ := h.g.NextDeadline(); !at.Equal(t0.Add(time.Hour + session)) {
				t.Fatalf("deadline %v", at)
			}
		}},
		{"subscription change", func(t *testing.T, h *harness) {
			tID := h.topics.add("t", 2)
			uID := h.topics.add("u", 3)
			h.mustOK(h.hb(joinReq("a", "t")))
			req := hbReq("a", 1)
			req.SubscribedTopicNames = []string{"u", "t"}
			resp := h.mustOK(h.hb(req))
			if resp.MemberEpoch != 2 || !reflect.DeepEqual(respAssignment(t, resp), tps{tID: {0, 1}, uID: {0, 1, 2}}) {
				t.Fatalf("resubscribe: %+v", resp)
			}
			if ms := h.g.Members(); !slices.Equal(ms[0].SubscribedTopicNames, []string{"t", "u"}) {
				t.Fatalf("names %v", ms[0].SubscribedTopicNames)
			}
			req = hbReq("a", 2)
			req.SubscribedTopicNames = []string{}
			resp = h.mustOK(h.hb(req))
			if resp.MemberEpoch != 3 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 0 {
				t.Fatalf("unsubscribe: %+v", resp)
			}
		}},
		{"rack change bumps, null rack is unchanged", func(t *testing.T, h *harness) {
			h.topics.add("t", 2)
			req := joinReq("a", "t")
			req.RackID = strp("r1")
			h.mustOK(h.hb(req))
			h.mustOK(h.hb(hbReq("a", 1))) // null: unchanged
			if ms := h.g.Members(); ms[0].Rack != "r1" || h.g.GroupEpoch() != 1 {
				t.Fatalf("rack %q, epoch %d", ms[0].Rack, h.g.GroupEpoch())
			}
			req = hbReq("a", 1)
			req.RackID = strp("r2")
			resp := h.mustOK(h.hb(req))
			if resp.MemberEpoch != 2 || resp.Assignment != nil {
				t.Fatalf("rack change: %+v", resp)
			}
		}},
		{"topic partitions added", func(t *testing.T, h *harness) {
			id := h.topics.add("t", 2)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.mustOK(h.hb(joinReq("b", "t")))
			h.mustOK(h.hb(hbReq("a", 1)))
			h.topics.add("t", 4)
			resp := h.mustOK(h.hb(hbReq("b", 2)))
			if resp.MemberEpoch != 3 || count(respAssignment(t, resp)) != 2 {
				t.Fatalf("b after partitions added: %+v", resp)
			}
			resp = h.mustOK(h.hb(hbReq("a", 2)))
			if resp.MemberEpoch != 3 || count(respAssignment(t, resp)) != 2 {
				t.Fatalf("a after partitions added: %+v", resp)
			}
			// Sticky: each keeps its old partition.
			for _, m := range h.g.Members() {
				if len(m.Assignment[id]) != 2 {
					t.Fatalf("%s: %v", m.ID, m.Assignment)
				}
			}
			if !slices.Contains(h.g.AssignedTo("a")[id], 0) || !slices.Contains(h.g.AssignedTo("b")[id], 1) {
				t.Fatalf("not sticky: a %v, b %v", h.g.AssignedTo("a"), h.g.AssignedTo("b"))
			}
		}},
		{"topic deleted", func(t *testing.T, h *harness) {
			h.topics.add("t", 2)
			uID := h.topics.add("u", 1)
			h.mustOK(h.hb(joinReq("a", "t", "u")))
			delete(h.topics.byName, "t")
			resp := h.mustOK(h.hb(hbReq("a", 1)))
			if resp.MemberEpoch != 2 || !reflect.DeepEqual(respAssignment(t, resp), tps{uID: {0}}) {
				t.Fatalf("after delete: %+v", resp)
			}
		}},
		{"topic created after the subscription", func(t *testing.T, h *harness) {
			h.mustOK(h.hb(joinReq("a", "later")))
			if resp := h.mustOK(h.hb(hbReq("a", 1))); resp.Assignment != nil {
				t.Fatalf("assignment before the topic exists: %+v", resp)
			}
			id := h.topics.add("later", 2)
			resp := h.mustOK(h.hb(hbReq("a", 1)))
			if resp.MemberEpoch != 2 || !reflect.DeepEqual(respAssignment(t, resp), tps{id: {0, 1}}) {
				t.Fatalf("after create: %+v", resp)
			}
		}},
		{"topic recreated with a new id", func(t *testing.T, h *harness) {
			h.topics.add("t", 2)
			h.mustOK(h.hb(joinReq("a", "t")))
			newID := topicID("t2")
			h.topics.byName["t"] = topicMeta{newID, 2}
			resp := h.mustOK(h.hb(hbReq("a", 1)))
			if resp.MemberEpoch != 2 || !reflect.DeepEqual(respAssignment(t, resp), tps{newID: {0, 1}}) {
				t.Fatalf("after recreate: %+v", resp)
			}
		}},
		{"unsubscribed topic changes do not bump", func(t *testing.T, h *harness) {
			h.topics.add("t", 2)
			h.mustOK(h.hb(joinReq("a", "t")))
			h.topics.add("other", 5)
			h.mustOK(h.hb(hbReq("a", 1)))
			if h.g.GroupEpoch() != 1 {
				t.Fatalf("group epoch %d", h.g.GroupEpoch())
			}
		}},
		{"more members than partitions", func(t *testing.T, h *harness) {
			id := h.topics.add("t", 2)
			for _, m := range []string{"a", "b", "c", "d", "e"} {
				h.mustOK(h.hb(joinReq(m, "t")))
			}
			for _, m := range h.g.Members() {
				h.mustOK(h.hb(hbReq(m.ID, m.MemberEpoch)))
			}
			load := map[int32]int{}
			for _, m := range h.g.Members() {
				if m.MemberEpoch != 5 || len(m.Assignment[id]) != 1 {
					t.Fatalf("%s: epoch %d, %v", m.ID, m.MemberEpoch, m.Assignment)
				}
				load[m.Assignment[id][0]]++
			}
			if load[0]+load[1] != 5 || load[0] < 2 || load[1] < 2 {
				t.Fatalf("load %v", load)
			}
			if h.g.Subscribers(id, 0)+h.g.Subscribers(id, 1) != 5 {
				t.Fatalf("subscribers %d + %d", h.g.Subscribers(id, 0), h.g.Subscribers(id, 1))
			}
		}},
		{"heartbeat interval from config", func(t *testing.T, h *harness) {
			h.g = New("g", Config{HeartbeatInterval: 1500 * time.Millisecond, SessionTimeout: time.Second}, t0)
			resp := h.mustOK(h.hb(joinReq("a")))
			if resp.HeartbeatIntervalMillis != 1500 {
				t.Fatalf("interval %d", resp.HeartbeatIntervalMillis)
			}
			if at, _ := h.g.NextDeadline(); !at.Equal(t0.Add(time.Second)) {
				t.Fatalf("deadline %v", at)
			}
		}},
		{"v0 is served like v1", func(t *testing.T, h *harness) {
			h.topics.add("t", 1)
			req := joinReq("a", "t")
			req.Version = 0
			resp := h.mustOK(h.hb(req))
			if resp.Version != 0 || resp.MemberEpoch != 1 {
				t.Fatalf("v0: %+v", resp)
			}
		}},
		{"client id and host are recorded", func(t *testing.T, h *harness) {
			h.mustOK(h.g.Heartbeat(joinReq("a"), 1, Client{ID: "cid", Host: "/10.1.2.3"}, h.topics, h.now))
			if m := h.g.Members()[0]; m.ClientID != "cid" || m.ClientHost != "/10.1.2.3" {
				t.Fatalf("member %+v", m)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			tc.run(t, h)
		})
	}
}

// After MarkDead the group is Dead, empty and answers the error.
func TestMarkDead(t *testing.T) {
	h := newHarness(t, Config{})
	id := h.topics.add("t", 2)
	h.mustOK(h.hb(joinReq("a", "t")))
	h.g.MarkDead(kerr.NotCoordinator)
	if h.g.State() != Dead || h.g.IsEmpty() || h.g.Size() != 0 || h.g.IsMember("a") ||
		h.g.AssignedTo("a") != nil || h.g.Subscribers(id, 0) != 0 {
		t.Fatalf("dead group: state %v", h.g.State())
	}
	if _, ok := h.g.NextDeadline(); ok {
		t.Fatal("dead group has a deadline")
	}
	d := h.g.Describe(h.topics, h.now)
	if d.GroupState != "Dead" || len(d.Members) != 0 {
		t.Fatalf("describe: %+v", d)
	}
}

func TestDescribe(t *testing.T) {
	h := newHarness(t, Config{})
	tID := h.topics.add("t", 3)
	uID := h.topics.add("u", 1)
	empty := h.g.Describe(h.topics, h.now)
	if empty.GroupState != "Empty" || empty.GroupID != "g" || empty.Assignor != "simple" || empty.Members == nil || len(empty.Members) != 0 {
		t.Fatalf("empty group: %+v", empty)
	}
	req := joinReq("b", "u", "t")
	req.RackID = strp("rack-1")
	h.mustOK(h.g.Heartbeat(req, 1, Client{ID: "cb", Host: "/10.0.0.2"}, h.topics, h.now))
	h.mustOK(h.g.Heartbeat(joinReq("a"), 1, Client{ID: "ca", Host: "/10.0.0.1"}, h.topics, h.now))
	// A topic deleted since: its partitions are left out of the description.
	h.topics.add("gone", 1)
	h.mustOK(h.g.Heartbeat(joinReq("c", "gone"), 1, Client{ID: "cc", Host: "/10.0.0.3"}, h.topics, h.now))
	delete(h.topics.byName, "gone")

	got := h.g.Describe(h.topics, h.now)
	want := kmsg.NewShareGroupDescribeResponseGroup()
	want.GroupID = "g"
	want.GroupState = "Stable"
	want.GroupEpoch = 3
	want.AssignmentEpoch = 3
	want.Assignor = "simple"
	member := func(id, client, host string, epoch int32, rack *string, names []string, a ...kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition) kmsg.ShareGroupDescribeResponseGroupMember {
		m := kmsg.NewShareGroupDescribeResponseGroupMember()
		m.MemberID, m.ClientID, m.ClientHost, m.MemberEpoch, m.RackID, m.SubscribedTopicNames = id, client, host, epoch, rack, names
		m.Assignment.TopicPartitions = append([]kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}, a...)
		return m
	}
	part := func(id assignor.TopicID, name string, ps ...int32) kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition {
		p := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
		p.TopicID, p.Topic, p.Partitions = id, name, ps
		return p
	}
	want.Members = []kmsg.ShareGroupDescribeResponseGroupMember{
		member("a", "ca", "/10.0.0.1", 2, nil, []string{}),
		member("b", "cb", "/10.0.0.2", 1, strp("rack-1"), []string{"t", "u"}, part(tID, "t", 0, 1, 2), part(uID, "u", 0)),
		member("c", "cc", "/10.0.0.3", 3, nil, []string{"gone"}),
	}
	if tID.Compare(uID) > 0 {
		t.Fatal("test ids out of order")
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("describe:\n%+v\nwant\n%+v", got, want)
	}
	if got.AuthorizedOperations != -2147483648 || got.ErrorCode != 0 {
		t.Fatalf("defaults not left to the caller: %+v", got)
	}
}

// Members, IsMember, AssignedTo and Subscribers return copies and agree
// with each other.
func TestAccessors(t *testing.T) {
	h := newHarness(t, Config{})
	id := h.topics.add("t", 3)
	h.mustOK(h.hb(joinReq("a", "t")))
	h.mustOK(h.hb(joinReq("b", "t")))
	if !h.g.IsMember("a") || h.g.IsMember("z") || h.g.AssignedTo("z") != nil {
		t.Fatal("membership")
	}
	a := h.g.AssignedTo("a")
	a[id][0] = 99
	if h.g.AssignedTo("a")[id][0] == 99 {
		t.Fatal("AssignedTo shares memory")
	}
	ms := h.g.Members()
	ms[1].Assignment[id][0] = 99
	ms[1].SubscribedTopicNames[0] = "x"
	if m := h.g.Members()[1]; m.Assignment[id][0] == 99 || m.SubscribedTopicNames[0] == "x" {
		t.Fatal("Members shares memory")
	}
	if h.g.Subscribers(id, 7) != 0 || h.g.Subscribers(topicID("nope"), 0) != 0 {
		t.Fatal("subscribers of unknown partitions")
	}
	if h.g.ID() != "g" {
		t.Fatal("id")
	}
}
