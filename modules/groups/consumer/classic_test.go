package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicClient models a classic-protocol consumer: eager ones revoke everything
// before they join, cooperative ones list what they own in their subscription and
// rejoin after they revoked something.
type classicClient struct {
	id, instance string
	gen          int32
	owned        tps
	cooperative  bool
	joined       bool // has a generation and an assignment
	rejoin       bool // must join again
}

const classicSession = 10 * time.Second

func (h *harness) subscription(c *classicClient, topics []string) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 3
	md.Topics = slices.Clone(topics)
	if c.cooperative {
		for id, ps := range c.owned {
			name, _, _ := h.topics.TopicByID(id)
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic, op.Partitions = name, slices.Clone(ps)
			md.OwnedPartitions = append(md.OwnedPartitions, op)
		}
	}
	return md.AppendTo(nil)
}

func (h *harness) joinClassicReq(c *classicClient, topics []string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group = "g"
	req.SessionTimeoutMillis = int32(classicSession / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(rebalance / time.Millisecond)
	req.MemberID = c.id
	if c.instance != "" {
		req.InstanceID = strp(c.instance)
	}
	req.ProtocolType = "consumer"
	name := "range"
	if c.cooperative {
		name = "cooperative-sticky"
	}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = name, h.subscription(c, topics)
	req.Protocols = append(req.Protocols, p)
	return req
}

// classicStep joins (and syncs) c when it must, else heartbeats; it applies the
// answers as a client would and returns the first error code.
func (h *harness) classicStep(c *classicClient, admitNew bool, topics ...string) int16 {
	h.t.Helper()
	if c.joined && !c.rejoin {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version = 4
		hb.Group, hb.MemberID, hb.Generation = "g", c.id, c.gen
		if c.instance != "" {
			hb.InstanceID = strp(c.instance)
		}
		resp := h.g.HeartbeatClassic(context.Background(), hb, h.topics, h.now)
		checkInvariants(h.t, h.g)
		switch resp.ErrorCode {
		case 0:
		case kerr.RebalanceInProgress.Code:
			c.rejoin = true
		default:
			c.reset()
		}
		return resp.ErrorCode
	}
	if !c.cooperative {
		c.owned = tps{} // eager: revoke everything before joining
	}
	jr := h.g.JoinClassic(context.Background(), h.joinClassicReq(c, topics), Client{ID: "classic"}, h.topics, admitNew, h.now)
	checkInvariants(h.t, h.g)
	if jr.ErrorCode != 0 {
		c.reset()
		return jr.ErrorCode
	}
	if jr.LeaderID == jr.MemberID || len(jr.Members) > 0 {
		h.t.Fatalf("classic member %s told it leads: %+v", jr.MemberID, jr)
	}
	c.id, c.gen = jr.MemberID, jr.Generation
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Version = 5
	sr.Group, sr.MemberID, sr.Generation = "g", c.id, c.gen
	sr.ProtocolType, sr.Protocol = jr.ProtocolType, jr.Protocol
	if c.instance != "" {
		sr.InstanceID = strp(c.instance)
	}
	resp := h.g.SyncClassic(sr, h.topics, h.now)
	checkInvariants(h.t, h.g)
	if resp.ErrorCode != 0 {
		c.reset()
		return resp.ErrorCode
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(resp.MemberAssignment); err != nil {
		h.t.Fatalf("assignment: %v", err)
	}
	got := tps{}
	for _, t := range a.Topics {
		id, _, ok := h.topics.TopicByName(t.Topic)
		if !ok {
			h.t.Fatalf("assignment names unknown topic %q", t.Topic)
		}
		got[id] = union(got[id], normalize(t.Partitions))
	}
	revoked := false
	for id, ps := range c.owned {
		if len(difference(ps, got[id])) > 0 {
			revoked = true
		}
	}
	c.owned, c.joined, c.rejoin = got, true, revoked // cooperative: rejoin after revoking
	return 0
}

func (c *classicClient) reset() {
	c.joined, c.rejoin, c.owned, c.gen = false, false, tps{}, -1
	if c.instance == "" {
		c.id = ""
	}
}

// checkAllOwned fails if two clients, of either protocol, own one partition.
func checkAllOwned(t *testing.T, cs []*client, ccs []*classicClient) {
	t.Helper()
	seen := map[tp]string{}
	own := func(who string, owned tps) {
		for top, ps := range owned {
			for _, p := range ps {
				if o, dup := seen[tp{top, p}]; dup {
					t.Fatalf("partition %v/%d owned by %q and %q", top, p, o, who)
				}
				seen[tp{top, p}] = who
			}
		}
	}
	for _, c := range cs {
		if c.joined {
			own(c.id, c.owned)
		}
	}
	for i, c := range ccs {
		if c.joined {
			own(fmt.Sprintf("classic-%d", i), c.owned)
		}
	}
}

// forgetExpired resets the clients whose members the group removed (a client that
// was silent past its session owns nothing from then on: the model's zombie).
func forgetExpired(g *Group, cs []*client, ccs []*classicClient) {
	known := map[string]bool{}
	for _, m := range g.Members() {
		known[m.ID] = true
	}
	for _, c := range cs {
		if c.joined && !known[c.id] {
			c.joined, c.owned, c.epoch = false, tps{}, 0
		}
	}
	for _, c := range ccs {
		if c.joined && !known[c.id] {
			c.reset()
		}
	}
}

func TestClassicMemberJoinsConsumerGroup(t *testing.T) {
	h := newHarness(t, Config{SessionTimeout: session})
	h.topics.add("a", 6)
	c848 := &client{id: "m1"}
	h.mustOK(h.hb(joinReq("m1", "a")))
	c848.joined, c848.epoch = true, 1
	c848.owned = h.target()["m1"]

	// A new classic member is refused when the policy does not let it in.
	cc := &classicClient{cooperative: true}
	if code := h.classicStep(cc, false, "a"); code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("join not admitted: %v", kerr.ErrorForCode(code))
	}
	if code := h.classicStep(cc, true, "a"); code != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(code))
	}
	if cc.gen != 2 || count(cc.owned) != 0 {
		t.Fatalf("classic member at generation %d owns %v; want generation 2, nothing yet (m1 holds all)", cc.gen, cc.owned)
	}
	if _, n := h.g.Protocols(); n != 1 {
		t.Fatalf("%d classic members", n)
	}
	// The consumer member revokes its half; the classic member is told to rejoin
	// and then gets it.
	for range 4 {
		h.step(c848)
		if code := h.classicStep(cc, true, "a"); code != 0 && code != kerr.RebalanceInProgress.Code {
			t.Fatalf("classic step: %v", kerr.ErrorForCode(code))
		}
		checkAllOwned(t, []*client{c848}, []*classicClient{cc})
	}
	if count(cc.owned) != 3 || count(c848.owned) != 3 {
		t.Fatalf("owned: classic %v, consumer %v", cc.owned, c848.owned)
	}
	if s := h.g.State(); s != Stable {
		t.Fatalf("state %v", s)
	}
	d := h.g.Describe(h.topics, h.now)
	types := map[int8]int{}
	for _, m := range d.Members {
		types[m.MemberType]++
	}
	if types[0] != 1 || types[1] != 1 {
		t.Fatalf("member types %v", types)
	}

	// A commit from the classic member is checked against its generation.
	if e := h.g.ValidateCommit(cc.id, cc.gen); e != nil {
		t.Fatalf("commit: %v", e)
	}
	if e := h.g.ValidateCommit(cc.id, cc.gen-1); e != kerr.IllegalGeneration {
		t.Fatalf("stale commit: %v", e)
	}
	if !h.g.IsClassicMember(cc.id) || h.g.IsClassicMember("m1") {
		t.Fatal("IsClassicMember")
	}

	// Its id is not a consumer-protocol member's.
	if r := h.hb(hbReq(cc.id, cc.gen, nil)); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("848 heartbeat with a classic id: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Leaving frees its partitions for the consumer member.
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 5
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = cc.id
	lr.Members = append(lr.Members, lm)
	if r := h.g.LeaveClassic(lr, h.now); r.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.Members[0].ErrorCode))
	}
	for range 3 {
		h.step(c848)
	}
	if count(c848.owned) != 6 {
		t.Fatalf("consumer member owns %v after the classic one left", c848.owned)
	}
}

func TestClassicMemberErrors(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("a", 2)
	cc := &classicClient{}
	if code := h.classicStep(cc, true, "a"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	bad := func(name string, mutate func(*kmsg.JoinGroupRequest), want *kerr.Error) {
		t.Helper()
		req := h.joinClassicReq(&classicClient{}, []string{"a"})
		mutate(req)
		if r := h.g.JoinClassic(context.Background(), req, Client{}, h.topics, true, h.now); r.ErrorCode != want.Code {
			t.Fatalf("%s: %v, want %v", name, kerr.ErrorForCode(r.ErrorCode), want)
		}
	}
	bad("session too short", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 10 }, kerr.InvalidSessionTimeout)
	bad("protocol type", func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "connect" }, kerr.InconsistentGroupProtocol)
	bad("no protocols", func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }, kerr.InconsistentGroupProtocol)
	bad("garbage metadata", func(r *kmsg.JoinGroupRequest) { r.Protocols[0].Metadata = []byte{0, 9, 1} }, kerr.InconsistentGroupProtocol)
	bad("unknown member", func(r *kmsg.JoinGroupRequest) { r.MemberID = "nobody" }, kerr.UnknownMemberID)
	bad("too many protocols", func(r *kmsg.JoinGroupRequest) {
		for i := range 70 {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = fmt.Sprint(i)
			r.Protocols = append(r.Protocols, p)
		}
	}, kerr.InvalidRequest)

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.MemberID, hb.Generation = cc.id, cc.gen+1
	if r := h.g.HeartbeatClassic(context.Background(), hb, h.topics, h.now); r.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat with a wrong generation: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.MemberID, sr.Generation, sr.Protocol = cc.id, cc.gen, strp("roundrobin")
	if r := h.g.SyncClassic(sr, h.topics, h.now); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("sync with another protocol: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A silent classic member expires after its own session timeout.
	h.advance(classicSession + time.Millisecond)
	if h.g.Size() != 0 {
		t.Fatalf("%d members after the classic session timeout", h.g.Size())
	}
}

func TestClassicStaticMemberRestarts(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics.add("a", 4)
	cc := &classicClient{instance: "i1"}
	if code := h.classicStep(cc, true, "a"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	before, epoch, oldID := cc.owned, h.g.GroupEpoch(), cc.id
	// The client restarts: it joins with its instance id and no member id, and
	// gets a new id with the same partitions, without a rebalance.
	restarted := &classicClient{instance: "i1"}
	if code := h.classicStep(restarted, false, "a"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if restarted.id == oldID || !equalTPs(restarted.owned, before) || h.g.GroupEpoch() != epoch {
		t.Fatalf("restart: id %s (old %s), owned %v (was %v), epoch %d (was %d)",
			restarted.id, oldID, restarted.owned, before, h.g.GroupEpoch(), epoch)
	}
	// The old incarnation is fenced.
	if code := h.classicStep(cc, false, "a"); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation: %v", kerr.ErrorForCode(code))
	}
	// A consumer-protocol client with the same instance id takes over (the
	// application moved to the new protocol).
	req := joinReq("new-848", "a")
	req.InstanceID = strp("i1")
	h.mustOK(h.hb(req))
	if _, n := h.g.Protocols(); n != 0 {
		t.Fatalf("%d classic members after the takeover", n)
	}
}

func TestClassicMigrationRoundTrip(t *testing.T) {
	h := newHarness(t, Config{})
	tid := h.topics.add("a", 4)
	assign := func(ps ...int32) []byte {
		a := kmsg.NewConsumerMemberAssignment()
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = "a", ps
		a.Topics = append(a.Topics, at)
		return a.AppendTo(nil)
	}
	sub := h.subscription(&classicClient{}, []string{"a"})
	members := []ClassicMember{
		{ID: "x", ClientID: "cx", SessionTimeout: classicSession, RebalanceTimeout: rebalance,
			Protocols: []ClassicProtocol{{Name: "range", Metadata: sub}}, Assignment: assign(0, 1)},
		{ID: "y", InstanceID: "iy", SessionTimeout: classicSession, RebalanceTimeout: rebalance,
			Protocols: []ClassicProtocol{{Name: "range", Metadata: sub}}, Assignment: assign(1, 2, 3, 9)},
	}
	h.g = FromClassic("g", Config{NewMemberID: func() string { return "gen" }}, 7, members, h.topics, h.now)
	checkInvariants(t, h.g)
	if h.g.GroupEpoch() != 7 || h.g.State() != Stable {
		t.Fatalf("upgraded: epoch %d state %v", h.g.GroupEpoch(), h.g.State())
	}
	ms := h.g.Members()
	if !equalTPs(ms[0].Assigned, tps{tid: {0, 1}}) || !equalTPs(ms[1].Assigned, tps{tid: {2, 3}}) {
		t.Fatalf("upgraded assignments %v %v (a partition claimed twice goes to the first)", ms[0].Assigned, ms[1].Assigned)
	}
	// x's client keeps heartbeating with the classic generation.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.MemberID, hb.Generation = "x", 7
	if r := h.g.HeartbeatClassic(context.Background(), hb, h.topics, h.now); r.ErrorCode != 0 {
		t.Fatalf("heartbeat after the upgrade: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	gen, back, ok := h.g.ToClassic(h.topics)
	if !ok || gen != 7 || len(back) != 2 || back[1].InstanceID != "iy" {
		t.Fatalf("downgrade: %d %+v %v", gen, back, ok)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(back[0].Assignment); err != nil || len(a.Topics) != 1 || !slices.Equal(a.Topics[0].Partitions, []int32{0, 1}) {
		t.Fatalf("downgraded assignment %+v %v", a, err)
	}
	// With a consumer-protocol member the group cannot go back.
	h.mustOK(h.hb(joinReq("m", "a")))
	if _, _, ok := h.g.ToClassic(h.topics); ok {
		t.Fatal("ToClassic with a consumer-protocol member")
	}

	// Classic members survive a restore.
	r := Restore("g", Config{}, h.g.Snapshot(), h.topics, h.now)
	if !r.IsClassicMember("x") || r.IsClassicMember("m") {
		t.Fatal("restore lost the member kinds")
	}
	rm := r.Members()
	if rm[1].ClassicProtocols[0].Name != "range" {
		t.Fatalf("restored protocols %+v", rm[1].ClassicProtocols)
	}
}

// TestClassicMixedRandom drives a group of eager and cooperative classic clients
// and consumer-protocol clients joining, leaving, going silent and changing
// subscriptions: no partition is ever owned by two clients, and once things calm
// down every partition is owned and the group is Stable.
func TestClassicMixedRandom(t *testing.T) {
	var signals, revocations int // the paths worth reaching, over all seeds
	defer func() {
		if !t.Failed() && (signals == 0 || revocations == 0) {
			t.Errorf("REBALANCE_IN_PROGRESS answered %d times, cooperative revocations %d: the test reaches too little", signals, revocations)
		}
	}()
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			h := newHarness(t, Config{})
			h.topics.add("a", 8)
			h.topics.add("b", 5)
			cs := make([]*client, 3)
			for i := range cs {
				cs[i] = &client{id: fmt.Sprintf("m%d", i)}
			}
			ccs := make([]*classicClient, 4)
			for i := range ccs {
				ccs[i] = &classicClient{cooperative: i%2 == 0, gen: -1}
				if i == 3 {
					ccs[i].instance = "static"
				}
			}
			active := map[any]bool{}
			for step := range 400 {
				calm := step >= 300
				if !calm && rng.IntN(25) == 0 {
					// Someone leaves or goes away for good for a while.
					if i := rng.IntN(len(cs) + len(ccs)); i < len(cs) {
						c := cs[i]
						if c.joined {
							h.hb(hbReq(c.id, -1, nil))
							c.joined, c.owned = false, tps{}
						}
					} else if c := ccs[i-len(cs)]; c.joined && c.instance == "" {
						lr := kmsg.NewPtrLeaveGroupRequest()
						lr.MemberID = c.id
						h.g.LeaveClassic(lr, h.now)
						c.reset()
					}
				}
				h.now = h.now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
				h.g.Tick(h.now)
				forgetExpired(h.g, cs, ccs)
				i := rng.IntN(len(cs) + len(ccs))
				if i < len(cs) {
					c := cs[i]
					code := h.step(c, "a", "b")
					t.Logf("step %d t=%v consumer %s -> %v epoch %d owned %v", step, h.now.Sub(t0), c.id, code, c.epoch, c.owned)
					if code != 0 && code != kerr.UnknownMemberID.Code && code != kerr.FencedMemberEpoch.Code {
						t.Fatalf("step %d: consumer: %v", step, kerr.ErrorForCode(code))
					}
					active[c] = true
				} else {
					c := ccs[i-len(cs)]
					topics := []string{"a", "b"}
					if !calm && rng.IntN(10) == 0 {
						topics = []string{"a"}
					}
					code := h.classicStep(c, true, topics...)
					t.Logf("step %d t=%v classic-%d %s -> %v gen %d owned %v rejoin %v", step, h.now.Sub(t0), i-len(cs), c.id, code, c.gen, c.owned, c.rejoin)
					if code == kerr.RebalanceInProgress.Code {
						signals++
					}
					if code == 0 && c.rejoin {
						revocations++
					}
					switch code {
					case 0, kerr.RebalanceInProgress.Code, kerr.UnknownMemberID.Code, kerr.IllegalGeneration.Code:
					default:
						t.Fatalf("step %d: classic: %v", step, kerr.ErrorForCode(code))
					}
				}
				checkAllOwned(t, cs, ccs)
			}
			// Calm: everyone steps in turn until nothing changes.
			for range 30 {
				forgetExpired(h.g, cs, ccs)
				for _, c := range cs {
					h.step(c, "a", "b")
				}
				for _, c := range ccs {
					h.classicStep(c, true, "a", "b")
				}
				checkAllOwned(t, cs, ccs)
			}
			total := 0
			for _, c := range cs {
				total += count(c.owned)
			}
			for _, c := range ccs {
				total += count(c.owned)
			}
			if total != 13 {
				t.Fatalf("after calm: %d of 13 partitions owned", total)
			}
			if s := h.g.State(); s != Stable {
				t.Fatalf("after calm: state %v", s)
			}
		})
	}
}
