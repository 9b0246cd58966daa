package share

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const session = 45 * time.Second

// fakeTopics is a TopicView over a map.
type fakeTopics struct {
	byName map[string]topicMeta
}

func newTopics() *fakeTopics { return &fakeTopics{byName: map[string]topicMeta{}} }

// topicID is a readable id: the name's bytes, then a marker byte.
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

// harness drives one group with a fake clock.
type harness struct {
	t      *testing.T
	g      *Group
	now    time.Time
	topics *fakeTopics
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	return &harness{t: t, g: New("g", cfg, t0), now: t0, topics: newTopics()}
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.g.Tick(h.now)
	checkInvariants(h.t, h.g)
}

func strp(s string) *string { return &s }

// joinReq is a join (epoch 0) of member subscribing to topics.
func joinReq(member string, topics ...string) *kmsg.ShareGroupHeartbeatRequest {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID = "g"
	req.MemberID = member
	req.SubscribedTopicNames = append([]string{}, topics...)
	return req
}

// hbReq is a heartbeat with nothing changed (null subscription and rack).
func hbReq(member string, epoch int32) *kmsg.ShareGroupHeartbeatRequest {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID = "g"
	req.MemberID = member
	req.MemberEpoch = epoch
	return req
}

func (h *harness) hb(req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	h.t.Helper()
	resp := h.g.Heartbeat(req, req.Version, Client{ID: "client-" + req.MemberID, Host: "/127.0.0.1"}, h.topics, h.now)
	checkInvariants(h.t, h.g)
	return resp
}

func (h *harness) mustOK(resp *kmsg.ShareGroupHeartbeatResponse) *kmsg.ShareGroupHeartbeatResponse {
	h.t.Helper()
	if resp.ErrorCode != 0 {
		h.t.Fatalf("heartbeat: %v (%s)", kerr.ErrorForCode(resp.ErrorCode), msgOf(resp))
	}
	return resp
}

func msgOf(resp *kmsg.ShareGroupHeartbeatResponse) string {
	if resp.ErrorMessage == nil {
		return ""
	}
	return *resp.ErrorMessage
}

// respAssignment is the response's assignment as a set; nil when absent. It
// fails the test if the wire order is not ascending.
func respAssignment(t *testing.T, resp *kmsg.ShareGroupHeartbeatResponse) tps {
	t.Helper()
	if resp.Assignment == nil {
		return nil
	}
	out := tps{}
	for i, at := range resp.Assignment.TopicPartitions {
		if i > 0 && assignor.TopicID(resp.Assignment.TopicPartitions[i-1].TopicID).Compare(at.TopicID) >= 0 {
			t.Fatalf("assignment topics not ascending: %+v", resp.Assignment.TopicPartitions)
		}
		if len(at.Partitions) == 0 || !slices.Equal(at.Partitions, normalize(at.Partitions)) {
			t.Fatalf("assignment partitions empty or not ascending: %v", at.Partitions)
		}
		out[at.TopicID] = slices.Clone(at.Partitions)
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
		if len(g.members) != 0 || len(g.holders) != 0 || len(g.target) != 0 {
			t.Fatalf("dead group keeps state")
		}
		return
	}
	if g.targetEpoch > g.groupEpoch || g.targetEpoch < 0 {
		t.Fatalf("target epoch %d, group epoch %d", g.targetEpoch, g.groupEpoch)
	}
	holders := map[tp]int{}
	refs := map[string]int{}
	for id, m := range g.members {
		if m.id != id {
			t.Fatalf("member %q filed under %q", m.id, id)
		}
		if m.epoch < 0 || m.epoch > g.targetEpoch {
			t.Fatalf("member %q epoch %d, target epoch %d", id, m.epoch, g.targetEpoch)
		}
		if m.sessionDeadline.IsZero() {
			t.Fatalf("member %q has no session deadline", id)
		}
		if !slices.IsSorted(m.names) || len(slices.Compact(slices.Clone(m.names))) != len(m.names) {
			t.Fatalf("member %q: names %v not sorted and unique", id, m.names)
		}
		for _, n := range m.names {
			refs[n]++
		}
		checkSet(t, "member "+id+" assigned", m.assigned)
		for top, ps := range m.assigned {
			for _, p := range ps {
				holders[tp{top, p}]++
			}
		}
		if _, ok := g.target[id]; !ok && g.targetEpoch == g.groupEpoch {
			t.Fatalf("member %q has no target at the group epoch", id)
		}
	}
	if !mapsEqual(refs, g.nameRefs) {
		t.Fatalf("nameRefs %v, want %v", g.nameRefs, refs)
	}
	if !mapsEqual(holders, g.holders) {
		t.Fatalf("holders %v, want %v", g.holders, holders)
	}
	for id, a := range g.target {
		if g.members[id] == nil {
			t.Fatalf("target names removed member %q", id)
		}
		checkSet(t, "target of "+id, a)
	}
	if g.targetEpoch == g.groupEpoch && len(g.members) > 0 {
		checkTarget(t, g)
	}
}

func mapsEqual[K comparable](a, b map[K]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func checkSet(t *testing.T, what string, a tps) {
	t.Helper()
	for top, ps := range a {
		if len(ps) == 0 || !slices.Equal(ps, normalize(ps)) {
			t.Fatalf("%s: %v/%v empty or not ascending", what, top, ps)
		}
	}
}

// checkTarget verifies the target against the metadata it was computed
// with: every partition of every subscribed topic to at least one
// subscriber (exactly one when partitions >= subscribers, with counts within
// one), each member at least one partition of each topic it subscribes to,
// nothing else. g.mu is held.
func checkTarget(t *testing.T, g *Group) {
	t.Helper()
	idOf := map[assignor.TopicID]string{}
	for n, tm := range g.meta {
		if g.nameRefs[n] > 0 {
			idOf[tm.id] = n
		}
	}
	for id, a := range g.target {
		m := g.members[id]
		for top, ps := range a {
			n, ok := idOf[top]
			if !ok || !slices.Contains(m.names, n) {
				t.Fatalf("member %q assigned topic %v it does not subscribe to", id, top)
			}
			if ps[len(ps)-1] >= g.meta[n].partitions {
				t.Fatalf("member %q assigned %s/%d of %d partitions", id, n, ps[len(ps)-1], g.meta[n].partitions)
			}
		}
	}
	for top, n := range idOf {
		parts := int(g.meta[n].partitions)
		if parts == 0 {
			continue
		}
		var subs []string
		for id, m := range g.members {
			if slices.Contains(m.names, n) {
				subs = append(subs, id)
			}
		}
		load := make([]int, parts)
		lo, hi := 1<<30, 0
		for _, id := range subs {
			ps := g.target[id][top]
			if len(ps) == 0 {
				t.Fatalf("member %q subscribes to %s and got none of it", id, n)
			}
			lo, hi = min(lo, len(ps)), max(hi, len(ps))
			for _, p := range ps {
				load[p]++
			}
		}
		for p, l := range load {
			switch {
			case l == 0:
				t.Fatalf("%s/%d assigned to nobody (subscribers %v)", n, p, subs)
			case len(subs) <= parts && l != 1:
				t.Fatalf("%s/%d assigned to %d members, %d subscribers for %d partitions", n, p, l, len(subs), parts)
			case len(subs) > parts && (l < len(subs)/parts || l > (len(subs)+parts-1)/parts):
				t.Fatalf("%s/%d shared by %d members, %d subscribers for %d partitions", n, p, l, len(subs), parts)
			}
		}
		if hi-lo > 1 {
			t.Fatalf("%s: members have %d to %d partitions", n, lo, hi)
		}
	}
}
