package groups_test

// End-to-end tests of the KIP-848 consumer group protocol over real sockets, beyond
// the smoke test: kgo members churning, server assignor selection, the heartbeat
// rules kgo does not exercise (driven with raw ConsumerGroupHeartbeat requests),
// offsets with member epochs, mixed classic/consumer group ids, and the classic admin
// APIs on a consumer group.
//
// kgo's server assignor: there is no option naming it. With KIP-848 on
// (kgo.ServerSideBalancer() or the opt-in context value), kgo sends
// ServerAssignor "uniform" when its first balancer is a sticky one (the default
// CooperativeStickyBalancer) and "range" when it is kgo.RangeBalancer(); with any
// other first balancer it stays on the classic protocol.

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cfg848 is the broker config of these tests: fast classic groups and a 200ms
// heartbeat interval for KIP-848 members, so kgo members notice changes quickly.
const cfg848 = fastGroupConfig + `  group.consumer.heartbeat.interval.ms: "200"
`

// tps848 is an assignment: partitions by topic id.
type tps848 = map[[16]byte][]int32

// m848 is a KIP-848 member driven by hand with ConsumerGroupHeartbeat requests sent
// through a kgo client (which routes them to the group coordinator, at v1).
type m848 struct {
	t        testing.TB
	cl       *kgo.Client
	group    string
	id       string
	instance *string
	epoch    int32
	assigned tps848 // as last sent by the coordinator
}

func hb848(t testing.TB, cl *kgo.Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	resp, err := tryHB848(cl, req)
	if err != nil {
		t.Fatalf("ConsumerGroupHeartbeat %s/%s epoch %d: %v", req.Group, req.MemberID, req.MemberEpoch, err)
	}
	return resp
}

// tryHB848 is hb848 returning the client's error (a coordinator still coming back
// after a restart) instead of failing the test.
func tryHB848(cl *kgo.Client, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return req.RequestWith(ctx, cl)
}

// rawHB848 sends a ConsumerGroupHeartbeat at the version it carries over rc, once
// FindCoordinator (which creates __consumer_offsets) finds the group's coordinator,
// and again while the coordinator is still loading.
func rawHB848(t testing.TB, rc *rawConn, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	waitFor(t, 10*time.Second, "coordinator found", func() string {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version = 4
		fc.CoordinatorKeys = []string{req.Group}
		fr := rc.do(fc).(*kmsg.FindCoordinatorResponse)
		if len(fr.Coordinators) != 1 {
			return fmt.Sprintf("%d coordinators", len(fr.Coordinators))
		}
		if c := fr.Coordinators[0].ErrorCode; c != 0 {
			return errName848(c)
		}
		return ""
	})
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	waitFor(t, 10*time.Second, "coordinator ready", func() string {
		resp = rc.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
		switch e := kerr.ErrorForCode(resp.ErrorCode); e {
		case kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator:
			return e.Error()
		}
		return ""
	})
	return resp
}

// joinReq848 is a full join (epoch 0) subscribing to topics.
func joinReq848(group, member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, member, 0
	req.RebalanceTimeoutMillis = 10_000
	req.SubscribedTopicNames = append([]string{}, topics...)
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

// newID848 is a client-generated member id (v1 clients name themselves).
func newID848() string { return rand.Text() }

func errName848(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

func want848(t testing.TB, what string, got int16, msg *string, want *kerr.Error) {
	t.Helper()
	wc := int16(0)
	if want != nil {
		wc = want.Code
	}
	if got != wc {
		m := ""
		if msg != nil {
			m = *msg
		}
		t.Fatalf("%s: error %s (%q), want %s", what, errName848(got), m, errName848(wc))
	}
}

// join848 joins a new member with a client-generated id; mod may change the join
// request. It fails the test unless the join succeeds.
func join848(t testing.TB, cl *kgo.Client, group string, mod func(*kmsg.ConsumerGroupHeartbeatRequest), topics ...string) *m848 {
	t.Helper()
	m := &m848{t: t, cl: cl, group: group, id: newID848(), assigned: tps848{}}
	req := joinReq848(group, m.id, topics...)
	if mod != nil {
		mod(req)
	}
	m.instance = req.InstanceID
	resp := hb848(t, cl, req)
	want848(t, "join "+group, resp.ErrorCode, resp.ErrorMessage, nil)
	m.apply(resp)
	return m
}

func (m *m848) apply(resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if resp.ErrorCode != 0 {
		return
	}
	if resp.MemberID != nil {
		m.id = *resp.MemberID
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.assigned = tps848{}
		for _, at := range resp.Assignment.Topics {
			m.assigned[at.TopicID] = slices.Sorted(slices.Values(at.Partitions))
		}
	}
}

// beat heartbeats at the member's epoch reporting owned as its owned partitions (nil:
// no owned list) and applies a successful response.
func (m *m848) beat(owned tps848) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	resp := hb848(m.t, m.cl, m.beatRequest(owned))
	m.apply(resp)
	return resp
}

// beatRequest is the heartbeat beat sends.
func (m *m848) beatRequest(owned tps848) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = m.group, m.id, m.epoch, m.instance
	if owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, id := range slices.SortedFunc(maps.Keys(owned), func(a, b [16]byte) int { return strings.Compare(string(a[:]), string(b[:])) }) {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = id, slices.Clone(owned[id])
			req.Topics = append(req.Topics, rt)
		}
	}
	return req
}

// ack heartbeats owning exactly what the member was last assigned (so it
// acknowledges revocations) and fails the test on an error.
func (m *m848) ack() {
	m.t.Helper()
	resp := m.beat(m.assigned)
	want848(m.t, "heartbeat of "+m.id, resp.ErrorCode, resp.ErrorMessage, nil)
}

// leave leaves the group with epoch -1.
func (m *m848) leave() {
	m.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = m.group, m.id, -1, m.instance
	resp := hb848(m.t, m.cl, req)
	want848(m.t, "leave of "+m.id, resp.ErrorCode, resp.ErrorMessage, nil)
}

// parts848 flattens an assignment of one topic.
func parts848(a tps848) []int32 {
	var out []int32
	for _, ps := range a {
		out = append(out, ps...)
	}
	slices.Sort(out)
	return out
}

func describe848(t testing.TB, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ConsumerGroupDescribe %s: %v", group, err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("ConsumerGroupDescribe %s: %d groups", group, len(resp.Groups))
	}
	return resp.Groups[0]
}

// flatDescribed848 flattens a described assignment to topic -> sorted partitions.
func flatDescribed848(a kmsg.Assignment) map[string][]int32 {
	out := map[string][]int32{}
	for _, tp := range a.TopicPartitions {
		out[tp.Topic] = append(out[tp.Topic], tp.Partitions...)
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

func equalFlat848(a, b map[string][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

// reconciled848 checks that a described group is Stable with exactly the member ids
// want, every member at its target assignment, and the members' partitions of
// topic disjoint and covering 0..parts-1. It returns each member's partitions, or
// why not.
func reconciled848(g kmsg.ConsumerGroupDescribeResponseGroup, want []string, topic string, parts int32) (map[string][]int32, string) {
	if g.ErrorCode != 0 {
		return nil, "describe: " + errName848(g.ErrorCode)
	}
	if g.State != "Stable" {
		return nil, fmt.Sprintf("state %s (epoch %d, assignment epoch %d)", g.State, g.Epoch, g.AssignmentEpoch)
	}
	var ids []string
	for _, mb := range g.Members {
		ids = append(ids, mb.MemberID)
	}
	slices.Sort(ids)
	if w := slices.Sorted(slices.Values(want)); !slices.Equal(ids, w) {
		return nil, fmt.Sprintf("members %v, want %v", ids, w)
	}
	out := map[string][]int32{}
	owner := map[int32]string{}
	for _, mb := range g.Members {
		a, tgt := flatDescribed848(mb.Assignment), flatDescribed848(mb.TargetAssignment)
		if !equalFlat848(a, tgt) {
			return nil, fmt.Sprintf("member %s has %v, target %v", mb.MemberID, a, tgt)
		}
		for tp, ps := range a {
			if tp != topic {
				return nil, fmt.Sprintf("member %s assigned foreign topic %s", mb.MemberID, tp)
			}
			for _, p := range ps {
				if prev, dup := owner[p]; dup {
					return nil, fmt.Sprintf("partition %d assigned to both %s and %s", p, prev, mb.MemberID)
				}
				owner[p] = mb.MemberID
			}
		}
		out[mb.MemberID] = a[topic]
	}
	if len(owner) != int(parts) {
		return nil, fmt.Sprintf("%d of %d partitions assigned", len(owner), parts)
	}
	for p := range parts {
		if _, ok := owner[p]; !ok {
			return nil, fmt.Sprintf("partition %d unassigned", p)
		}
	}
	return out, ""
}

// waitReconciled848 waits until the group is reconciled (see reconciled848) with
// exactly the kgo consumers cs, each owning (per kgo's callbacks) what the broker
// assigned it. It returns the assignment by consumer name.
func waitReconciled848(t testing.TB, cl *kgo.Client, group, topic string, parts int32, cs []*consumer) map[string][]int32 {
	t.Helper()
	var out map[string][]int32
	waitFor(t, 20*time.Second, fmt.Sprintf("group %s reconciled with %d members", group, len(cs)), func() string {
		var ids []string
		for _, c := range cs {
			ids = append(ids, c.memberID())
		}
		byID, why := reconciled848(describe848(t, cl, group), ids, topic, parts)
		if why != "" {
			return why
		}
		out, why = ownedAsAssigned(cs, byID)
		return why
	})
	return out
}

// commitWatch848 samples a group's committed offsets until stopped and records every
// offset that went backwards.
type commitWatch848 struct {
	stopc chan struct{}
	done  chan struct{}

	mu       sync.Mutex
	last     map[int32]int64
	samples  int
	backward []string
}

func watchCommits848(adm *kadm.Client, group, topic string) *commitWatch848 {
	w := &commitWatch848{stopc: make(chan struct{}), done: make(chan struct{}), last: map[int32]int64{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			w.sample(adm, group, topic)
			select {
			case <-w.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *commitWatch848) sample(adm *kadm.Client, group, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil || o.Topic != topic {
			return
		}
		if prev, ok := w.last[o.Partition]; ok && o.At < prev {
			w.backward = append(w.backward, fmt.Sprintf("partition %d: %d -> %d", o.Partition, prev, o.At))
		}
		w.last[o.Partition] = o.At
	})
}

func (w *commitWatch848) stop() (samples int, backward []string) {
	close(w.stopc)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.samples, w.backward
}

// TestConsumer848Churn: three kgo KIP-848 consumers join one by one and leave one by
// one while a producer writes to 12 partitions. At every reconciled point the
// broker's assignments are disjoint and cover all partitions (and match what kgo
// thinks it owns); every acknowledged record is consumed; committed offsets never go
// backwards; a consumer starting on the emptied group resumes at the committed
// offsets.
func TestConsumer848Churn(t *testing.T) {
	const topic, group, parts = "churn848", "g-churn848", 12
	b, adm := startWithTopic(t, cfg848, topic, parts)
	desc := b.Client(t)
	prod := startProducer(t, b, topic, parts)
	seen := newSeenSet()
	watch := watchCommits848(adm, group, topic)
	opts := append(fastGroupOpts(group, topic), kgo.WithContext(nextGen()))

	// caughtUp waits until everything acknowledged so far has been consumed: the
	// members consume every partition.
	caughtUp := func() {
		t.Helper()
		prod.mu.Lock()
		want := maps.Clone(prod.acked)
		prod.mu.Unlock()
		waitFor(t, 20*time.Second, "consumers caught up", func() string {
			if n, ex := seen.missing(want); n > 0 {
				return fmtMissing(n, len(want), ex)
			}
			return ""
		})
	}
	var cs []*consumer
	for i := range 3 {
		cs = append(cs, startConsumer(t, b, fmt.Sprintf("c%d", i), seen, opts...))
		a := waitReconciled848(t, desc, group, topic, parts, cs)
		t.Logf("%d members: %s", len(cs), fmtMap(a))
		caughtUp()
	}
	for len(cs) > 1 {
		cs[0].stop()
		cs = cs[1:]
		a := waitReconciled848(t, desc, group, topic, parts, cs)
		t.Logf("%d members: %s", len(cs), fmtMap(a))
		caughtUp()
	}
	cs[0].stop()
	waitFor(t, 10*time.Second, "group empty", func() string {
		g := describe848(t, desc, group)
		if g.State != "Empty" || len(g.Members) != 0 {
			return fmt.Sprintf("state %s with %d members", g.State, len(g.Members))
		}
		return ""
	})

	// Restart on the empty group: the first record of each partition is at the
	// committed offset.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	committed := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.Topic == topic && o.At >= 0 {
			committed[o.Partition] = o.At
		}
	})
	if len(committed) != parts {
		t.Fatalf("committed offsets for %d of %d partitions: %s", len(committed), parts, fmtMap(committed))
	}
	r := startConsumer(t, b, "restarted", seen, opts...)
	waitFor(t, 20*time.Second, "restarted consumer reads every partition", func() string {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.first) != parts {
			return fmt.Sprintf("read %d of %d partitions", len(r.first), parts)
		}
		return ""
	})
	r.mu.Lock()
	first := maps.Clone(r.first)
	r.mu.Unlock()
	for p, at := range committed {
		if first[p] != at {
			t.Errorf("restarted consumer read partition %d from %d, committed %d", p, first[p], at)
		}
	}

	acked := prod.Stop()
	if n := prod.failed.Load(); n > 0 {
		t.Logf("%d produce failures (not counted)", n)
	}
	seen.waitConsumed(t, 20*time.Second, acked)
	r.stop()
	samples, backward := watch.stop()
	if len(backward) > 0 {
		t.Errorf("committed offsets went backwards: %v", backward)
	}
	if samples < 10 {
		t.Errorf("only %d commit samples", samples)
	}
	t.Logf("%d records produced and consumed, %d commit samples", len(acked), samples)
}

// contiguous848 reports whether ps (sorted) is a run of consecutive partitions.
func contiguous848(ps []int32) bool {
	for i := 1; i < len(ps); i++ {
		if ps[i] != ps[i-1]+1 {
			return false
		}
	}
	return true
}

// rangeShape848 checks the range assignor's shape for 2 members on 6 partitions: two
// contiguous runs of 3.
func rangeShape848(byMember map[string][]int32) string {
	for id, ps := range byMember {
		if len(ps) != 3 || !contiguous848(ps) {
			return fmt.Sprintf("member %s has %v, want a contiguous range of 3", id, ps)
		}
	}
	return ""
}

// TestConsumer848ServerAssignor: kgo with RangeBalancer asks for "range" and gets
// it; raw heartbeats naming "range" get range's contiguous ranges; an unknown
// assignor is UNSUPPORTED_ASSIGNOR; without one the group uses "uniform".
func TestConsumer848ServerAssignor(t *testing.T) {
	const topic, parts = "assign848", 6
	b, _ := startWithTopic(t, cfg848, topic, parts)
	cl := b.Client(t)

	t.Run("kgo range", func(t *testing.T) {
		const group = "g-kgo-range"
		opts := append(fastGroupOpts(group, topic), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
		cs := []*consumer{startConsumer(t, b, "r0", nil, opts...), startConsumer(t, b, "r1", nil, opts...)}
		a := waitReconciled848(t, cl, group, topic, parts, cs)
		if g := describe848(t, cl, group); g.AssignorName != "range" {
			t.Fatalf("assignor %q, want range", g.AssignorName)
		}
		if why := rangeShape848(a); why != "" {
			t.Fatal(why)
		}
		t.Logf("range: %s", fmtMap(a))
	})

	t.Run("kgo default", func(t *testing.T) {
		const group = "g-kgo-uniform"
		opts := append(fastGroupOpts(group, topic), kgo.WithContext(nextGen()))
		cs := []*consumer{startConsumer(t, b, "u0", nil, opts...)}
		waitReconciled848(t, cl, group, topic, parts, cs)
		if g := describe848(t, cl, group); g.AssignorName != "uniform" {
			t.Fatalf("assignor %q, want uniform", g.AssignorName)
		}
	})

	t.Run("raw range", func(t *testing.T) {
		const group = "g-raw-range"
		rng := func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = ptr("range") }
		ms := []*m848{join848(t, cl, group, rng, topic), join848(t, cl, group, rng, topic)}
		a := settle848(t, cl, group, topic, parts, ms)
		if g := describe848(t, cl, group); g.AssignorName != "range" {
			t.Fatalf("assignor %q, want range", g.AssignorName)
		}
		if why := rangeShape848(a); why != "" {
			t.Fatal(why)
		}
	})

	t.Run("unknown", func(t *testing.T) {
		req := joinReq848("g-raw-unknown", newID848(), topic)
		req.ServerAssignor = ptr("no-such-assignor")
		resp := hb848(t, cl, req)
		want848(t, "join with an unknown assignor", resp.ErrorCode, resp.ErrorMessage, kerr.UnsupportedAssignor)
	})

	t.Run("raw default", func(t *testing.T) {
		const group = "g-raw-default"
		ms := []*m848{join848(t, cl, group, nil, topic), join848(t, cl, group, nil, topic)}
		settle848(t, cl, group, topic, parts, ms)
		if g := describe848(t, cl, group); g.AssignorName != "uniform" {
			t.Fatalf("assignor %q, want uniform", g.AssignorName)
		}
	})
}

// settle848 heartbeats the raw members (acknowledging what they were assigned) until
// the group is reconciled; it returns the assignment by member id, and checks it
// against what each member was sent.
func settle848(t testing.TB, cl *kgo.Client, group, topic string, parts int32, ms []*m848) map[string][]int32 {
	t.Helper()
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.id)
	}
	var out map[string][]int32
	waitFor(t, 10*time.Second, "raw members reconciled", func() string {
		for _, m := range ms {
			m.ack()
		}
		var why string
		out, why = reconciled848(describe848(t, cl, group), ids, topic, parts)
		if why != "" {
			return why
		}
		for _, m := range ms {
			if got := parts848(m.assigned); !slices.Equal(got, out[m.id]) {
				return fmt.Sprintf("member %s was sent %v, described %v", m.id, got, out[m.id])
			}
		}
		return ""
	})
	return out
}

func topicID848(t testing.TB, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		t.Fatalf("topic %s: %v", topic, td.Err)
	}
	return td.ID
}

// TestConsumer848Heartbeats drives ConsumerGroupHeartbeat by hand for what kgo does
// not exercise.
func TestConsumer848Heartbeats(t *testing.T) {
	const topic, parts = "hb848", 6
	b, adm := startWithTopic(t, cfg848, topic, parts)
	cl := b.Client(t)

	t.Run("v1 join without member id", func(t *testing.T) {
		rc := dialRaw(t, b.Addr, "raw")
		req := joinReq848("g-v1-noid", "", topic)
		req.Version = 1
		resp := rawHB848(t, rc, req)
		want848(t, "v1 join with an empty member id", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRequest)
	})

	t.Run("v0 join without member id", func(t *testing.T) {
		rc := dialRaw(t, b.Addr, "raw")
		req := joinReq848("g-v0-noid", "", topic)
		req.Version = 0
		resp := rawHB848(t, rc, req)
		want848(t, "v0 join with an empty member id", resp.ErrorCode, resp.ErrorMessage, nil)
		if resp.MemberID == nil || *resp.MemberID == "" || resp.MemberEpoch <= 0 {
			t.Fatalf("v0 join: member id %v epoch %d, want a generated id and a positive epoch", resp.MemberID, resp.MemberEpoch)
		}
		if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || len(resp.Assignment.Topics[0].Partitions) != parts {
			t.Fatalf("v0 join: assignment %+v, want all %d partitions", resp.Assignment, parts)
		}
		// The generated id works for the next (v0) heartbeat.
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version = 0
		hb.Group, hb.MemberID, hb.MemberEpoch = "g-v0-noid", *resp.MemberID, resp.MemberEpoch
		r2 := rawHB848(t, rc, hb)
		want848(t, "v0 heartbeat with the generated id", r2.ErrorCode, r2.ErrorMessage, nil)
		if r2.MemberEpoch != resp.MemberEpoch {
			t.Fatalf("epoch %d after heartbeat, want %d", r2.MemberEpoch, resp.MemberEpoch)
		}
	})

	t.Run("join without subscription", func(t *testing.T) {
		req := joinReq848("g-nosub", newID848())
		req.SubscribedTopicNames = nil
		resp := hb848(t, cl, req)
		want848(t, "join without a subscription", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRequest)
	})

	t.Run("fenced epochs", func(t *testing.T) {
		const group = "g-fenced"
		m := join848(t, cl, group, nil, "nope-1")
		// Each subscription change bumps the epoch (nothing to revoke: the topics do
		// not exist).
		for _, sub := range []string{"nope-2", "nope-3"} {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.MemberEpoch = group, m.id, m.epoch
			req.SubscribedTopicNames = []string{sub}
			resp := hb848(t, cl, req)
			want848(t, "subscription change", resp.ErrorCode, resp.ErrorMessage, nil)
			if resp.MemberEpoch != m.epoch+1 {
				t.Fatalf("epoch %d after a subscription change, want %d", resp.MemberEpoch, m.epoch+1)
			}
			m.apply(resp)
		}
		cur := m.epoch
		for _, e := range []int32{cur - 2, cur + 1, cur + 10} {
			m.epoch = e
			resp := m.beat(nil)
			want848(t, fmt.Sprintf("heartbeat at epoch %d (current %d)", e, cur), resp.ErrorCode, resp.ErrorMessage, kerr.FencedMemberEpoch)
		}
		// Its previous epoch is still accepted (the response moving it on may be lost).
		m.epoch = cur - 1
		m.ack()
		if m.epoch != cur {
			t.Fatalf("epoch %d after heartbeat at the previous epoch, want %d", m.epoch, cur)
		}
	})

	t.Run("unknown member", func(t *testing.T) {
		const group = "g-unknown"
		join848(t, cl, group, nil, topic)
		for _, g := range []string{group, "g-never-seen"} {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.MemberEpoch = g, newID848(), 1
			resp := hb848(t, cl, req)
			want848(t, "heartbeat of an unknown member to "+g, resp.ErrorCode, resp.ErrorMessage, kerr.UnknownMemberID)
		}
	})

	t.Run("leave", func(t *testing.T) {
		const group = "g-leave"
		a, bm := join848(t, cl, group, nil, topic), join848(t, cl, group, nil, topic)
		settle848(t, cl, group, topic, parts, []*m848{a, bm})
		a.leave()
		g := describe848(t, cl, group)
		for _, mb := range g.Members {
			if mb.MemberID == a.id {
				t.Fatalf("member %s still described after leaving", a.id)
			}
		}
		// The remaining member gets everything.
		settle848(t, cl, group, topic, parts, []*m848{bm})
		if got := parts848(bm.assigned); len(got) != parts {
			t.Fatalf("remaining member has %v", got)
		}
		resp := a.beat(nil)
		want848(t, "heartbeat after leaving", resp.ErrorCode, resp.ErrorMessage, kerr.UnknownMemberID)
	})

	t.Run("static rejoin", func(t *testing.T) {
		const group = "g-static"
		inst := func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = ptr("instance-a") }
		a := join848(t, cl, group, inst, topic)
		other := join848(t, cl, group, nil, topic)
		byID := settle848(t, cl, group, topic, parts, []*m848{a, other})
		before := byID[a.id]

		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = group, a.id, -2, a.instance
		resp := hb848(t, cl, req)
		want848(t, "static leave (-2)", resp.ErrorCode, resp.ErrorMessage, nil)
		if resp.MemberEpoch != -2 {
			t.Fatalf("static leave answered epoch %d, want -2", resp.MemberEpoch)
		}
		// Its partitions stay with it while it is away.
		g := describe848(t, cl, group)
		found := false
		for _, mb := range g.Members {
			if mb.MemberID == a.id {
				found = true
				if mb.MemberEpoch != -2 || !slices.Equal(flatDescribed848(mb.Assignment)[topic], before) {
					t.Fatalf("away static member: epoch %d, assignment %v; want -2, %v", mb.MemberEpoch, flatDescribed848(mb.Assignment), before)
				}
			}
		}
		if !found {
			t.Fatalf("static member %s gone after leaving with -2", a.id)
		}

		a2 := join848(t, cl, group, inst, topic)
		if a2.id == a.id {
			t.Fatal("rejoin reused the member id")
		}
		if got := parts848(a2.assigned); !slices.Equal(got, before) {
			t.Fatalf("rejoined static member got %v, had %v", got, before)
		}
		after := settle848(t, cl, group, topic, parts, []*m848{a2, other})
		if !slices.Equal(after[a2.id], before) {
			t.Fatalf("after settling the rejoined member has %v, had %v", after[a2.id], before)
		}
		// The old member id is fenced: its instance id belongs to the new one.
		a.epoch = a2.epoch
		resp = a.beat(nil)
		want848(t, "heartbeat of the replaced static member", resp.ErrorCode, resp.ErrorMessage, kerr.FencedInstanceID)
	})

	t.Run("regex", func(t *testing.T) {
		const group = "g-regex"
		createTopic(t, adm, "rx-a", 2)
		m := join848(t, cl, group, func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames = nil
			r.SubscribedTopicRegex = ptr("rx-.*")
		})
		rxa := topicID848(t, adm, "rx-a")
		if got := m.assigned[rxa]; len(got) != 2 || len(m.assigned) != 1 {
			t.Fatalf("regex join assigned %v, want both partitions of rx-a only", m.assigned)
		}
		createTopic(t, adm, "rx-b", 3)
		createTopic(t, adm, "other-c", 1)
		rxb := topicID848(t, adm, "rx-b")
		start := time.Now()
		// The coordinator resolves regexes again every 10s.
		waitFor(t, 15*time.Second, "regex picks up rx-b", func() string {
			m.ack()
			if len(m.assigned[rxb]) != 3 || len(m.assigned[rxa]) != 2 || len(m.assigned) != 2 {
				return fmt.Sprintf("assigned %v", m.assigned)
			}
			return ""
		})
		t.Logf("rx-b assigned after %v", time.Since(start).Round(100*time.Millisecond))
		g := describe848(t, cl, group)
		if len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil || *g.Members[0].SubscribedTopicRegex != "rx-.*" {
			t.Fatalf("described %+v", g.Members)
		}
	})

	t.Run("revocation", func(t *testing.T) {
		const group = "g-revoke"
		a := join848(t, cl, group, nil, topic)
		if got := parts848(a.assigned); len(got) != parts {
			t.Fatalf("first member got %v, want all %d", got, parts)
		}
		a.ack()
		all := maps.Clone(a.assigned)
		epochA := a.epoch

		bm := join848(t, cl, group, nil, topic)
		if got := parts848(bm.assigned); len(got) != 0 {
			t.Fatalf("second member got %v before the first released anything", got)
		}
		// A still owns everything: its heartbeat asks it to give some up; it keeps its epoch.
		resp := a.beat(all)
		want848(t, "heartbeat of the revoking member", resp.ErrorCode, resp.ErrorMessage, nil)
		if resp.Assignment == nil {
			t.Fatal("revoking member got no new assignment")
		}
		kept := parts848(a.assigned)
		if len(kept) >= parts || len(kept) == 0 {
			t.Fatalf("revoking member now has %v", kept)
		}
		if a.epoch != epochA {
			t.Fatalf("revoking member moved to epoch %d before acknowledging (was %d)", a.epoch, epochA)
		}
		// Until A acknowledges, B gets nothing, however often it asks, and A's
		// heartbeats still owning everything change nothing.
		for range 3 {
			bm.ack()
			if got := parts848(bm.assigned); len(got) != 0 {
				t.Fatalf("second member got %v before the first acknowledged the revocation", got)
			}
			resp = a.beat(all)
			want848(t, "heartbeat still owning everything", resp.ErrorCode, resp.ErrorMessage, nil)
			if a.epoch != epochA || !slices.Equal(parts848(a.assigned), kept) {
				t.Fatalf("revoking member: epoch %d, assigned %v", a.epoch, parts848(a.assigned))
			}
		}
		g := describe848(t, cl, group)
		if g.State != "Reconciling" {
			t.Fatalf("state %s while revoking, want Reconciling", g.State)
		}
		// A acknowledges (owns only what it kept): it moves on, then B gets the rest.
		a.ack()
		if a.epoch <= epochA {
			t.Fatalf("member still at epoch %d after acknowledging", a.epoch)
		}
		bm.ack()
		got := parts848(bm.assigned)
		if len(got) != parts-len(kept) {
			t.Fatalf("second member got %v after the revocation, first kept %v", got, kept)
		}
		for _, p := range got {
			if slices.Contains(kept, p) {
				t.Fatalf("partition %d given to both (%v, %v)", p, kept, got)
			}
		}
		settle848(t, cl, group, topic, parts, []*m848{a, bm})
	})

}

// TestConsumer848SessionTimeout: a member that stops heartbeating is removed after
// group.consumer.session.timeout.ms.
func TestConsumer848SessionTimeout(t *testing.T) {
	const topic, group = "sess848", "g-sess848"
	b, _ := startWithTopic(t, cfg848+"  group.consumer.session.timeout.ms: \"1000\"\n", topic, 4)
	cl := b.Client(t)
	stay := join848(t, cl, group, nil, topic)
	gone := join848(t, cl, group, nil, topic)
	settle848(t, cl, group, topic, 4, []*m848{stay, gone})
	start := time.Now()
	// stay keeps heartbeating; gone stops.
	waitFor(t, 10*time.Second, "silent member removed", func() string {
		stay.ack()
		g := describe848(t, cl, group)
		for _, mb := range g.Members {
			if mb.MemberID == gone.id {
				return fmt.Sprintf("%d members", len(g.Members))
			}
		}
		return ""
	})
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Fatalf("member removed after %v, before its 1s session timeout", el)
	}
	settle848(t, cl, group, topic, 4, []*m848{stay})
	resp := gone.beat(nil)
	want848(t, "heartbeat of the expired member", resp.ErrorCode, resp.ErrorMessage, kerr.UnknownMemberID)
}

// TestConsumer848OffsetEpochs: OffsetCommit v9+ and OffsetFetch v9+ check member
// epochs of consumer groups; v8 member commits are refused.
func TestConsumer848OffsetEpochs(t *testing.T) {
	const topic, group = "off848", "g-off848"
	b, adm := startWithTopic(t, cfg848, topic, 2)
	tid := topicID848(t, adm, topic)
	cl := b.Client(t)
	m := join848(t, cl, group, nil, topic)
	m.ack()
	rc := dialRaw(t, b.Addr, "raw")

	commit := func(version int16, member string, epoch int32, offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = version
		req.Group, req.MemberID, req.Generation = group, member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, tid
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.do(req).(*kmsg.OffsetCommitResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetCommit v%d: %+v", version, resp)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	fetch := func(member *string, epoch int32) kmsg.OffsetFetchResponseGroup {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		fg := kmsg.NewOffsetFetchRequestGroup()
		fg.Group, fg.MemberID, fg.MemberEpoch = group, member, epoch
		fg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}
		req.Groups = append(req.Groups, fg)
		resp := rc.do(req).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 {
			t.Fatalf("OffsetFetch v9: %+v", resp)
		}
		return resp.Groups[0]
	}

	want848(t, "OffsetCommit v9 at the member epoch", commit(9, m.id, m.epoch, 7), nil, nil)
	want848(t, "OffsetCommit v10 at the member epoch", commit(10, m.id, m.epoch, 8), nil, nil)
	want848(t, "OffsetCommit v9 at a stale epoch", commit(9, m.id, m.epoch-1, 100), nil, kerr.StaleMemberEpoch)
	want848(t, "OffsetCommit v9 from an unknown member", commit(9, "nobody", m.epoch, 100), nil, kerr.UnknownMemberID)
	want848(t, "OffsetCommit v8 from a member", commit(8, m.id, m.epoch, 100), nil, kerr.UnsupportedVersion)
	want848(t, "OffsetCommit v9 simple commit to a group with members", commit(9, "", -1, 100), nil, kerr.UnknownMemberID)

	g := fetch(&m.id, m.epoch)
	want848(t, "OffsetFetch v9 at the member epoch", g.ErrorCode, nil, nil)
	if len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 || g.Topics[0].Partitions[0].Offset != 8 {
		t.Fatalf("OffsetFetch v9: %+v, want offset 8", g.Topics)
	}
	g = fetch(&m.id, m.epoch+1)
	want848(t, "OffsetFetch v9 at a wrong epoch", g.ErrorCode, nil, kerr.StaleMemberEpoch)
	g = fetch(ptr("nobody"), m.epoch)
	want848(t, "OffsetFetch v9 from an unknown member", g.ErrorCode, nil, kerr.UnknownMemberID)
	g = fetch(nil, -1)
	want848(t, "OffsetFetch v9 without a member (admin)", g.ErrorCode, nil, nil)

	// Once the group is empty, simple commits are allowed again.
	m.leave()
	want848(t, "OffsetCommit v8 simple commit to the empty group", commit(8, "", -1, 9), nil, nil)
}

// TestConsumer848MixedGroups: with group.consumer.migration.policy=disabled, one
// protocol per group id while the group has members; an empty classic group becomes
// a consumer group, keeping its offsets.
func TestConsumer848MixedGroups(t *testing.T) {
	const topic = "mixed848"
	b, adm := startWithTopic(t, cfg848+"  group.consumer.migration.policy: disabled\n", topic, 3)
	cl := b.Client(t)
	produceN(t, cl, topic, 60)

	waitClassic := func(group, state string, members int) {
		t.Helper()
		waitFor(t, 15*time.Second, fmt.Sprintf("classic group %s %s with %d members", group, state, members), func() string {
			d, err := describeGroup(adm, group, 5*time.Second)
			if err != nil {
				return err.Error()
			}
			if d.State != state || len(d.Members) != members {
				return fmt.Sprintf("state %s with %d members (%v)", d.State, len(d.Members), d.Err)
			}
			return ""
		})
	}

	t.Run("848 join to a live classic group", func(t *testing.T) {
		const group = "g-mixed-classic"
		startConsumer(t, b, "classic", nil, fastGroupOpts(group, topic)...)
		waitClassic(group, "Stable", 1)
		resp := hb848(t, cl, joinReq848(group, newID848(), topic))
		want848(t, "ConsumerGroupHeartbeat join to a classic group", resp.ErrorCode, resp.ErrorMessage, kerr.GroupIDNotFound)
		if resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "classic") {
			t.Fatalf("error message %v does not mention classic members", resp.ErrorMessage)
		}
	})

	t.Run("classic join to a live 848 group", func(t *testing.T) {
		const group = "g-mixed-848"
		m := join848(t, cl, group, nil, topic)
		m.ack()
		want848(t, "JoinGroup to a consumer group", classicJoin(t, cl, group, topic), nil, kerr.InconsistentGroupProtocol)
	})

	t.Run("empty classic group converts", func(t *testing.T) {
		const group = "g-mixed-convert"
		seen := newSeenSet()
		c := startConsumer(t, b, "classic", seen, fastGroupOpts(group, topic)...)
		waitFor(t, 15*time.Second, "classic consumer read everything", func() string {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if len(seen.seen) < 60 {
				return fmt.Sprintf("%d of 60", len(seen.seen))
			}
			return ""
		})
		c.stop()
		waitClassic(group, "Empty", 0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		before, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		before.Each(func(o kadm.OffsetResponse) { total += o.At })
		if total != 60 {
			t.Fatalf("classic group committed %d records, want 60", total)
		}

		m := join848(t, cl, group, nil, topic)
		if got := parts848(m.assigned); len(got) != 3 {
			t.Fatalf("converted group assigned %v", got)
		}
		m.ack()
		if g := describe848(t, cl, group); g.ErrorCode != 0 || len(g.Members) != 1 {
			t.Fatalf("ConsumerGroupDescribe of the converted group: %s, %d members", errName848(g.ErrorCode), len(g.Members))
		}
		after, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if !equalOffsets848(before, after) {
			t.Fatalf("offsets changed on conversion: %v -> %v", before, after)
		}
		// And a new classic member is now refused.
		want848(t, "JoinGroup to the converted group", classicJoin(t, cl, group, topic), nil, kerr.InconsistentGroupProtocol)
	})
}

func equalOffsets848(a, b kadm.OffsetResponses) bool {
	flat := func(o kadm.OffsetResponses) map[string]int64 {
		out := map[string]int64{}
		o.Each(func(r kadm.OffsetResponse) { out[fmt.Sprintf("%s/%d", r.Topic, r.Partition)] = r.At })
		return out
	}
	return maps.Equal(flat(a), flat(b))
}

// TestConsumer848AdminViews: DescribeGroups, ListGroups and kadm.Lag on a KIP-848
// group with kgo members.
func TestConsumer848AdminViews(t *testing.T) {
	const topic, group, parts = "admin848", "g-admin848", 4
	b, adm := startWithTopic(t, cfg848, topic, parts)
	cl := b.Client(t)
	seen := newSeenSet()
	opts := append(fastGroupOpts(group, topic), kgo.WithContext(nextGen()))
	cs := []*consumer{startConsumer(t, b, "a0", seen, opts...), startConsumer(t, b, "a1", seen, opts...)}
	waitReconciled848(t, cl, group, topic, parts, cs)
	produceN(t, cl, topic, 200)

	// Everything consumed and committed: lag 0, every partition attributed to a member.
	waitFor(t, 20*time.Second, "lag 0", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lags, err := adm.Lag(ctx, group)
		if err != nil {
			return err.Error()
		}
		l := lags[group]
		if l.Error() != nil {
			return l.Error().Error()
		}
		if l.ProtocolType != "consumer" || l.State != "Stable" {
			return fmt.Sprintf("lag describes protocol type %q state %q", l.ProtocolType, l.State)
		}
		n := 0
		for _, ps := range l.Lag {
			for _, pl := range ps {
				n++
				if pl.Err != nil {
					return fmt.Sprintf("partition %d: %v", pl.Partition, pl.Err)
				}
				if pl.Member == nil {
					return fmt.Sprintf("partition %d has no member", pl.Partition)
				}
			}
		}
		if n != parts {
			return fmt.Sprintf("lag for %d of %d partitions", n, parts)
		}
		if tot := l.Lag.Total(); tot != 0 {
			return fmt.Sprintf("lag %d", tot)
		}
		return ""
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[group]
	if d.Err != nil || d.ProtocolType != "consumer" || d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("DescribeGroups: err %v protocol type %q state %q, %d members", d.Err, d.ProtocolType, d.State, len(d.Members))
	}
	owned := map[int32]bool{}
	for _, mb := range d.Members {
		a, ok := mb.Assigned.AsConsumer()
		if !ok {
			t.Fatalf("member %s: assignment is not a consumer assignment", mb.MemberID)
		}
		if mb.ClientID != "a0" && mb.ClientID != "a1" {
			t.Errorf("member %s: client id %q", mb.MemberID, mb.ClientID)
		}
		for _, at := range a.Topics {
			for _, p := range at.Partitions {
				if owned[p] {
					t.Fatalf("partition %d described twice", p)
				}
				owned[p] = true
			}
		}
	}
	if len(owned) != parts {
		t.Fatalf("DescribeGroups assignments cover %d of %d partitions", len(owned), parts)
	}

	ls, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lg, ok := ls[group]
	if !ok || lg.ProtocolType != "consumer" || lg.GroupType != "consumer" || lg.State != "Stable" {
		t.Fatalf("ListGroups: %+v (listed %v)", lg, ok)
	}
	for _, typ := range []string{"consumer", "classic"} {
		ls, err := adm.ListGroupsByType(ctx, []string{typ})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ls[group]; ok != (typ == "consumer") {
			t.Fatalf("ListGroups of type %s lists the group: %v", typ, ok)
		}
	}
	ls, err = adm.ListGroups(ctx, "Empty")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ls[group]; ok {
		t.Fatal("ListGroups of state Empty lists the Stable group")
	}
}
