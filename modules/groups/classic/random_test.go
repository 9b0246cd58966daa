package classic

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testcheck"
)

// simClient is a consumer as the randomized test models it: it mostly
// follows the protocol and sometimes misbehaves (crashes, restarts, leaves,
// sends stale requests).
type simClient struct {
	name     string
	instance string // "" for a dynamic member
	member   string
	gen      int32
	leader   bool
	members  []string // from the leader's join response
	synced   bool     // has an assignment for gen
	rejoin   bool     // learned that a rebalance is in progress
	meta     int
	silentTo time.Time // crashed until then

	join <-chan *kmsg.JoinGroupResponse
	sync <-chan *kmsg.SyncGroupResponse
}

type sim struct {
	t       *testing.T
	h       *harness
	rng     *rand.Rand
	clients []*simClient
	lastGen int32
	leaders map[int32]string // generation -> leader (instance id or member id)
}

func (s *sim) leaderKey() string {
	g := s.h.g
	if m := g.byID[g.leader]; m != nil && m.instanceID != nil {
		return "instance:" + *m.instanceID
	}
	return g.leader
}

func (s *sim) check(step int, what string) {
	s.t.Helper()
	checkInvariants(s.t, s.h.g)
	g := s.h.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.generation < s.lastGen {
		s.t.Fatalf("step %d (%s): generation went back from %d to %d", step, what, s.lastGen, g.generation)
	}
	s.lastGen = g.generation
	if g.state == Stable || g.state == CompletingRebalance {
		k := s.leaderKey()
		if prev, ok := s.leaders[g.generation]; ok && prev != k {
			s.t.Fatalf("step %d (%s): generation %d has leaders %s and %s", step, what, g.generation, prev, k)
		}
		s.leaders[g.generation] = k
	}
}

func (s *sim) joinOpt(c *simClient) jopt {
	return jopt{instance: c.instance, meta: fmt.Sprint(c.meta), protocols: []string{"cooperative-sticky", "range"}}
}

// collect reads whatever responses have arrived for c.
func (s *sim) collect(c *simClient) {
	select {
	case r := <-c.join:
		c.join = nil
		switch kerr.ErrorForCode(r.ErrorCode) {
		case nil:
			c.member, c.gen, c.leader, c.synced, c.rejoin = r.MemberID, r.Generation, r.LeaderID == r.MemberID, false, false
			c.members = c.members[:0]
			for _, m := range r.Members {
				c.members = append(c.members, m.MemberID)
			}
			if r.SkipAssignment {
				c.leader = false // it keeps its assignment: act as a follower
			}
		case kerr.MemberIDRequired:
			c.member = r.MemberID
			c.rejoin = true
		case kerr.UnknownMemberID, kerr.FencedInstanceID:
			c.member, c.rejoin = "", true
		default:
			c.rejoin = true
		}
	default:
	}
	select {
	case r := <-c.sync:
		c.sync = nil
		switch kerr.ErrorForCode(r.ErrorCode) {
		case nil:
			want := fmt.Sprintf("g%d-", c.gen)
			if len(r.MemberAssignment) > 0 && !strings.HasPrefix(string(r.MemberAssignment), want) {
				s.t.Fatalf("%s got assignment %q in generation %d", c.name, r.MemberAssignment, c.gen)
			}
			c.synced = true
		case kerr.UnknownMemberID, kerr.FencedInstanceID:
			c.member, c.rejoin = "", true
		default:
			c.rejoin = true
		}
	default:
	}
}

// behave does the next thing a correct client would do.
func (s *sim) behave(c *simClient) string {
	h := s.h
	switch {
	case c.join != nil || c.sync != nil:
		return "wait"
	case c.member == "" || c.rejoin || c.gen == 0:
		c.join = h.join(c.member, s.joinOpt(c))
		return "join " + c.name
	case !c.synced:
		assign := map[string]string{}
		if c.leader {
			for _, m := range c.members {
				assign[m] = fmt.Sprintf("g%d-%s", c.gen, m)
			}
		}
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = 5
		req.MemberID, req.Generation = c.member, c.gen
		if c.instance != "" {
			req.InstanceID = &c.instance
		}
		for id, a := range assign {
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a)})
		}
		c.sync = h.g.Sync(req, h.now)
		return "sync " + c.name
	default:
		var code int16
		if c.instance != "" {
			code = h.heartbeatStatic(c.member, c.instance, c.gen)
		} else {
			code = h.heartbeat(c.member, c.gen)
		}
		switch kerr.ErrorForCode(code) {
		case nil:
		case kerr.UnknownMemberID, kerr.FencedInstanceID:
			c.member, c.rejoin = "", true
		default:
			c.rejoin = true
		}
		return "heartbeat " + c.name
	}
}

// misbehave does something disruptive.
func (s *sim) misbehave(c *simClient) string {
	h := s.h
	switch s.rng.IntN(6) {
	case 0: // crash: silent for a while, then restart from scratch
		c.silentTo = h.now.Add(time.Duration(s.rng.IntN(40)) * time.Second)
		s.restart(c)
		return "crash " + c.name
	case 1:
		s.restart(c)
		return "restart " + c.name
	case 2:
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = 5
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = c.member
		if c.instance != "" {
			lm.InstanceID = &c.instance
		}
		req.Members = append(req.Members, lm)
		h.g.Leave(req, h.now)
		s.restart(c)
		return "leave " + c.name
	case 3: // new subscription: rejoin with new metadata
		c.meta++
		if c.join == nil {
			c.join = h.join(c.member, s.joinOpt(c))
		}
		return "resubscribe " + c.name
	case 4: // stale heartbeat
		h.heartbeat(c.member, c.gen-1)
		return "stale heartbeat " + c.name
	default: // a join without member id from a flaky client that gives up
		h.join("", jopt{protocols: []string{"range"}})
		return "drive-by join"
	}
}

func (s *sim) restart(c *simClient) {
	c.join, c.sync = nil, nil // the old responses are dropped with the connection
	c.member, c.gen, c.leader, c.synced, c.rejoin = "", 0, false, false, false
	if c.instance == "" {
		return
	}
	// A static member keeps no member id across restarts either.
}

// newSim starts a randomized schedule of n clients (every third one static) on a
// new group, its random stream seeded with seed and stream.
func newSim(t *testing.T, seed, stream uint64, n int) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, stream)), leaders: map[int32]string{}}
	s.h = newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second, MaxSize: 20})
	for i := range n {
		c := &simClient{name: fmt.Sprint("c", i)}
		if i%3 == 0 {
			c.instance = fmt.Sprint("inst", i)
		}
		s.clients = append(s.clients, c)
	}
	return s
}

// step runs the schedule's step for r, a draw of [0, 100): below 10 the clock
// advances, otherwise a random client acts (unless crashed), misbehaving below 15.
// It returns what happened.
func (s *sim) step(r int) string {
	if r < 10 {
		d := time.Duration(s.rng.IntN(4000)) * time.Millisecond
		s.h.advance(d)
		return fmt.Sprint("advance ", d)
	}
	c := s.clients[s.rng.IntN(len(s.clients))]
	s.collect(c)
	if s.h.now.Before(c.silentTo) {
		return "silent " + c.name
	}
	if r < 15 {
		return s.misbehave(c)
	}
	return s.behave(c)
}

// settle checks liveness: once every client behaves, the group settles with all of
// them.
func (s *sim) settle() {
	t := s.t
	t.Helper()
	for _, c := range s.clients {
		c.silentTo = time.Time{}
	}
	for round := 0; ; round++ {
		if round > 200 {
			t.Fatalf("group did not settle: %v, %v", s.h.g.State(), s.h.g.Describe(s.h.now).Members)
		}
		for _, c := range s.clients {
			s.collect(c)
			s.behave(c)
			s.collect(c)
		}
		s.h.advance(time.Second)
		s.check(-round, "settle")
		settled := s.h.g.State() == Stable
		for _, c := range s.clients {
			settled = settled && c.synced && c.gen == s.h.g.Generation()
		}
		if m, _ := s.h.g.Size(); settled && m == len(s.clients) {
			break
		}
	}
}

func TestRandomSchedules(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			s := newSim(t, seed, 42, 10)
			states := map[State]int{}
			for step := range 3000 {
				what := s.step(s.rng.IntN(100))
				s.check(step, what)
				states[s.h.g.State()]++
			}
			t.Logf("generation %d, steps per state %v", s.h.g.Generation(), states)
			s.settle()
		})
	}
}

func TestStaticMembersThatNeverRejoinExpire(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: time.Second})
	h.together([]string{"a"}, 1, jopt{})
	var dyn string
	for _, m := range h.g.Describe(h.now).Members {
		if m.InstanceID == nil {
			dyn = m.MemberID
		}
	}
	h.join(dyn, jopt{meta: "x"})
	testcheck.WantCode(t, "leave", h.g.Leave(&kmsg.LeaveGroupRequest{MemberID: dyn}, h.now).ErrorCode, nil)
	gen := h.g.Generation()
	var static string
	for _, m := range h.g.Describe(h.now).Members {
		static = m.MemberID
	}
	// The static member heartbeats (REBALANCE_IN_PROGRESS) but never rejoins:
	// the join phase ends without anyone to lead and is extended.
	for range 8 {
		h.advance(5 * time.Second)
		testcheck.WantCode(t, "hb", h.heartbeatStatic(static, "a", gen), kerr.RebalanceInProgress)
	}
	if h.g.State() != PreparingRebalance || h.g.Generation() != gen {
		t.Fatalf("state %v gen %d", h.g.State(), h.g.Generation())
	}
	h.advance(session)
	if h.g.State() != Empty || h.g.Generation() != gen+1 {
		t.Fatalf("state %v gen %d", h.g.State(), h.g.Generation())
	}
}

// TestHammer runs many goroutines against one group under -race: the
// group must stay consistent and every channel must get its one answer.
func TestHammer(t *testing.T) {
	const P, N = 8, 300
	var ids atomic.Int64
	g := New("g", Config{
		InitialRebalanceDelay: -1,
		NewMemberID:           func(c string) string { return fmt.Sprint(c, "-", ids.Add(1)) },
	}, t0)
	var clock atomic.Int64 // fake nanoseconds since t0
	now := func() time.Time { return t0.Add(time.Duration(clock.Load())) }
	var wg sync.WaitGroup
	for p := range P {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			member, gen := "", int32(0)
			for range N {
				clock.Add(int64(rng.IntN(200)) * int64(time.Millisecond))
				switch rng.IntN(5) {
				case 0, 1:
					req := kmsg.NewPtrJoinGroupRequest()
					req.Version = 9
					req.MemberID = member
					req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 20000
					req.ProtocolType = "consumer"
					req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
					ch := g.Join(req, Client{ID: "c"}, now())
					select {
					case r := <-ch:
						if r.ErrorCode == 0 || r.ErrorCode == kerr.MemberIDRequired.Code {
							member, gen = r.MemberID, r.Generation
						}
					default:
					}
				case 2:
					req := kmsg.NewPtrSyncGroupRequest()
					req.MemberID, req.Generation = member, gen
					req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("x")}}
					select { // a follower's answer may come later, or never
					case <-g.Sync(req, now()):
					default:
					}
				case 3:
					g.Heartbeat(&kmsg.HeartbeatRequest{MemberID: member, Generation: gen}, now())
				case 4:
					g.Tick(now())
					g.Describe(now())
					g.IsEmpty()
					g.Revision()
					checkInvariants(t, Restore("g", Config{}, g.Snapshot(), now()))
				}
			}
		})
	}
	wg.Wait()
	checkInvariants(t, g)
}
