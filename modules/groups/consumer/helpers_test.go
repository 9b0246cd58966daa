package consumer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	session   = 45 * time.Second
	rebalance = 30 * time.Second
)

// fakeTopics is a TopicView over a map.
type fakeTopics struct {
	byName map[string]topicMeta
}

func newTopics() *fakeTopics { return &fakeTopics{byName: map[string]topicMeta{}} }

func topicID(name string) assignor.TopicID {
	var id assignor.TopicID
	copy(id[:], name)
	id[15] = 0xAA
	return id
}

func (f *fakeTopics) add(name string, parts int32) assignor.TopicID {
	id := topicID(name)
	f.byName[name] = topicMeta{id, parts}
	return id
}

func (f *fakeTopics) TopicByName(name string) (assignor.TopicID, int32, bool) {
	t, ok := f.byName[name]
	return t.id, t.partitions, ok
}

func (f *fakeTopics) TopicByID(id assignor.TopicID) (string, int32, bool) {
	for n, t := range f.byName {
		if t.id == id {
			return n, t.partitions, true
		}
	}
	return "", 0, false
}

func (f *fakeTopics) TopicNames() []string {
	out := make([]string, 0, len(f.byName))
	for n := range f.byName {
		out = append(out, n)
	}
	return out
}

// harness drives one group with a fake clock and deterministic member ids.
type harness struct {
	t      *testing.T
	g      *Group
	now    time.Time
	topics *fakeTopics
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	n := 0
	if cfg.NewMemberID == nil {
		cfg.NewMemberID = func() string { n++; return fmt.Sprintf("gen-%d", n) }
	}
	return &harness{t: t, g: New("g", cfg, t0), now: t0, topics: newTopics()}
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.g.Tick(h.now)
}

func strp(s string) *string { return &s }

// joinReq is a full v1 join for member subscribing to topics.
func joinReq(member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = member
	req.MemberEpoch = 0
	req.RebalanceTimeoutMillis = int32(rebalance / time.Millisecond)
	req.SubscribedTopicNames = append([]string{}, topics...)
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

// hbReq is a light heartbeat reporting owned.
func hbReq(member string, epoch int32, owned tps) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = member
	req.MemberEpoch = epoch
	if owned != nil {
		req.Topics = ownedTopics(owned)
	}
	return req
}

func ownedTopics(owned tps) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	ids := make([]assignor.TopicID, 0, len(owned))
	for t := range owned {
		ids = append(ids, t)
	}
	slices.SortFunc(ids, assignor.TopicID.Compare)
	for _, t := range ids {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID = t
		rt.Partitions = slices.Clone(owned[t])
		out = append(out, rt)
	}
	return out
}

func (h *harness) hb(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	resp := h.g.Heartbeat(context.Background(), req, req.Version, Client{ID: "client", Host: "/127.0.0.1"}, h.topics, h.now)
	checkInvariants(h.t, h.g)
	return resp
}

func (h *harness) mustOK(resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		h.t.Fatalf("heartbeat: %v (%s)", kerr.ErrorForCode(resp.ErrorCode), msg)
	}
	return resp
}

func respAssignment(resp *kmsg.ConsumerGroupHeartbeatResponse) tps {
	if resp.Assignment == nil {
		return nil
	}
	out := tps{}
	for _, t := range resp.Assignment.Topics {
		if len(t.Partitions) > 0 {
			out[t.TopicID] = union(out[t.TopicID], normalize(t.Partitions))
		}
	}
	return out
}

func count(a tps) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// checkInvariants verifies the package invariants on g's internals.
func checkInvariants(t *testing.T, g *Group) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return
	}
	if g.targetEpoch > g.groupEpoch {
		t.Fatalf("target epoch %d > group epoch %d", g.targetEpoch, g.groupEpoch)
	}
	seen := map[tp]string{}
	for id, m := range g.members {
		if m.id != id {
			t.Fatalf("member %q filed under %q", m.id, id)
		}
		if m.epoch > g.targetEpoch {
			t.Fatalf("member %q epoch %d > target epoch %d", id, m.epoch, g.targetEpoch)
		}
		if m.instanceID != "" && g.static[m.instanceID] != id {
			t.Fatalf("static index: instance %q -> %q, want %q", m.instanceID, g.static[m.instanceID], id)
		}
		if m.sessionDeadline.IsZero() {
			t.Fatalf("member %q has no session deadline", id)
		}
		switch {
		case m.classic == nil && (m.state == MemberUnrevokedPartitions) != !m.revokeDeadline.IsZero():
			t.Fatalf("member %q: state %v, revoke deadline %v", id, m.state, m.revokeDeadline)
		case m.classic != nil && m.state == MemberUnrevokedPartitions && m.revokeDeadline.IsZero():
			t.Fatalf("classic member %q revokes without a deadline", id)
		case m.classic != nil && (len(m.pending) > 0) != (m.state == MemberUnrevokedPartitions):
			t.Fatalf("classic member %q: state %v, pending %v", id, m.state, m.pending)
		}
		for _, set := range []tps{m.assigned, m.pending} {
			for top, ps := range set {
				if len(ps) == 0 {
					t.Fatalf("member %q: empty partition list", id)
				}
				for i, p := range ps {
					if i > 0 && ps[i-1] >= p {
						t.Fatalf("member %q: partitions not ascending: %v", id, ps)
					}
					k := tp{top, p}
					if o, dup := seen[k]; dup {
						t.Fatalf("partition %v/%d held by %q and %q", top, p, o, id)
					}
					seen[k] = id
					if g.owner[k] != id {
						t.Fatalf("owner index: %v/%d -> %q, want %q", top, p, g.owner[k], id)
					}
				}
			}
		}
	}
	if len(seen) != len(g.owner) {
		t.Fatalf("owner index has %d entries, members hold %d", len(g.owner), len(seen))
	}
	for id := range g.target {
		if g.members[id] == nil {
			t.Fatalf("target names removed member %q", id)
		}
	}
	for inst, id := range g.static {
		if m := g.members[id]; m == nil || m.instanceID != inst {
			t.Fatalf("static index: %q -> %q dangling", inst, id)
		}
	}
	refs := map[string]int{}
	rx := map[string]int{}
	for _, m := range g.members {
		for _, n := range m.names {
			refs[n]++
		}
		if m.regex != "" {
			rx[m.regex]++
		}
	}
	if len(refs) != len(g.nameRefs) {
		t.Fatalf("nameRefs %v, want %v", g.nameRefs, refs)
	}
	for n, c := range refs {
		if g.nameRefs[n] != c {
			t.Fatalf("nameRefs %v, want %v", g.nameRefs, refs)
		}
	}
	if len(rx) != len(g.regexes) {
		t.Fatalf("%d regexes, want %d", len(g.regexes), len(rx))
	}
	for r, c := range rx {
		if e := g.regexes[r]; e == nil || e.refs != c {
			t.Fatalf("regex %q refs wrong", r)
		}
	}
}

// client models a consumer that follows the protocol: it owns exactly
// what the last Assignment it got lists.
type client struct {
	id       string
	epoch    int32
	owned    tps
	instance string
	joined   bool
}

// step sends one heartbeat for c (a join if it has not joined) and applies
// the response. It reports the error code.
func (h *harness) step(c *client, topics ...string) int16 {
	h.t.Helper()
	var req *kmsg.ConsumerGroupHeartbeatRequest
	if !c.joined {
		req = joinReq(c.id, topics...)
	} else {
		req = hbReq(c.id, c.epoch, c.owned)
	}
	if c.instance != "" {
		req.InstanceID = strp(c.instance)
	}
	resp := h.hb(req)
	if resp.ErrorCode != 0 {
		c.joined, c.owned, c.epoch = false, tps{}, 0
		return resp.ErrorCode
	}
	c.joined = true
	c.epoch = resp.MemberEpoch
	if a := respAssignment(resp); a != nil {
		c.owned = a
	}
	return 0
}

// checkOwned fails if two clients own one partition.
func checkOwned(t *testing.T, cs []*client) {
	t.Helper()
	seen := map[tp]string{}
	for _, c := range cs {
		if !c.joined {
			continue
		}
		for top, ps := range c.owned {
			for _, p := range ps {
				if o, dup := seen[tp{top, p}]; dup {
					t.Fatalf("partition %v/%d owned by %q and %q", top, p, o, c.id)
				}
				seen[tp{top, p}] = c.id
			}
		}
	}
}

// input rebuilds the assignor Input of g's current members and topics.
func (h *harness) input() assignor.Input {
	g := h.g
	g.mu.Lock()
	defer g.mu.Unlock()
	in := assignor.Input{Topics: map[assignor.TopicID]assignor.Topic{}}
	for n, t := range g.currentMeta(h.topics) {
		in.Topics[t.id] = assignor.Topic{ID: t.id, Name: n, Partitions: t.partitions}
	}
	for _, m := range g.sortedMembers() {
		in.Members = append(in.Members, assignor.Member{ID: m.id, Topics: g.memberTopics(m)})
	}
	return in
}

func (h *harness) target() assignor.Assignment {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	out := assignor.Assignment{}
	for id, a := range h.g.target {
		out[id] = cloneTPs(a)
	}
	return out
}
