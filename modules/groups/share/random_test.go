package share

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// simClient is a share consumer as the randomized test models it: it
// mostly follows the protocol and sometimes misbehaves (goes silent, sends
// wild epochs, restarts with a new member id).
type simClient struct {
	name, id string
	joined   bool
	epoch    int32
	assigned tps // what the responses told it
	topics   []string
	silentTo time.Time
	restarts int
}

type sim struct {
	t         *testing.T
	h         *harness
	rng       *rand.Rand
	clients   []*simClient
	lastEpoch int32
	// coverage counters
	targetChecks, sharedSteps, hbOK, fenced, full int
}

var simTopics = []string{"a", "b", "c", "d"}

func (s *sim) resubscribe(c *simClient) {
	c.topics = nil
	for _, t := range simTopics {
		if s.rng.IntN(2) == 0 {
			c.topics = append(c.topics, t)
		}
	}
}

// send sends req for c, applies the response as a client would and checks
// what the protocol promises about a successful heartbeat.
func (s *sim) send(c *simClient, req *kmsg.ShareGroupHeartbeatRequest, what string) {
	s.t.Helper()
	g := s.h.g
	resp := g.Heartbeat(req, 1, Client{ID: c.name, Host: "/10.0.0.1"}, s.h.topics, s.h.now)
	switch {
	case resp.ErrorCode == 0 && req.MemberEpoch == leaveEpoch:
		c.joined, c.epoch, c.assigned = false, 0, nil
		if resp.MemberEpoch != leaveEpoch || g.IsMember(c.id) {
			s.t.Fatalf("%s: leave answered %+v", what, resp)
		}
	case resp.ErrorCode == 0:
		s.hbOK++
		c.joined, c.epoch = true, resp.MemberEpoch
		if a := respAssignment(s.t, resp); a != nil {
			c.assigned = a
		} else if req.MemberEpoch == joinEpoch {
			s.t.Fatalf("%s: join answered without an assignment", what)
		}
		g.mu.Lock()
		ge, te := g.groupEpoch, g.targetEpoch
		target := cloneTPs(g.target[c.id])
		g.mu.Unlock()
		if resp.MemberEpoch != ge || ge != te {
			s.t.Fatalf("%s: member epoch %d, group epoch %d, target epoch %d", what, resp.MemberEpoch, ge, te)
		}
		if !equalTPs(cloneTPs(c.assigned), target) {
			s.t.Fatalf("%s: client has %v, its target is %v", what, c.assigned, target)
		}
	default:
		switch kerr.ErrorForCode(resp.ErrorCode) {
		case kerr.UnknownMemberID, kerr.FencedMemberEpoch:
			s.fenced++
		case kerr.GroupMaxSizeReached:
			s.full++
		default:
			s.t.Fatalf("%s: unexpected error %v (%s)", what, kerr.ErrorForCode(resp.ErrorCode), msgOf(resp))
		}
		c.joined, c.epoch, c.assigned = false, 0, nil
	}
}

func (s *sim) joinReq(c *simClient) *kmsg.ShareGroupHeartbeatRequest {
	req := joinReq(c.id, c.topics...)
	if s.rng.IntN(3) == 0 {
		req.RackID = strp(fmt.Sprintf("rack-%d", s.rng.IntN(2)))
	}
	return req
}

func (s *sim) act() string {
	h, rng := s.h, s.rng
	c := s.clients[rng.IntN(len(s.clients))]
	silent := h.now.Before(c.silentTo)
	switch r := rng.IntN(100); {
	case r < 50: // a normal heartbeat (or join)
		if silent {
			return "silent"
		}
		if !c.joined {
			s.send(c, s.joinReq(c), "join "+c.id)
			return "join " + c.id
		}
		s.send(c, hbReq(c.id, c.epoch), "heartbeat "+c.id)
		return "heartbeat " + c.id
	case r < 53: // a wild epoch
		if silent || !c.joined {
			return "skip"
		}
		e := []int32{c.epoch - 1, c.epoch + 1, 1 << 30}[rng.IntN(3)]
		if e == joinEpoch {
			e = 2 // a join without a subscription is invalid; not what this tests
		}
		what := fmt.Sprintf("epoch %d for %s at %d", e, c.id, c.epoch)
		s.send(c, hbReq(c.id, e), what)
		return what
	case r < 57: // leave
		if !c.joined {
			return "skip"
		}
		s.send(c, hbReq(c.id, leaveEpoch), "leave "+c.id)
		return "leave " + c.id
	case r < 60: // restart: a new member id; the old one expires
		c.restarts++
		c.id = fmt.Sprintf("%s-%d", c.name, c.restarts)
		c.joined, c.epoch, c.assigned = false, 0, nil
		return "restart " + c.name
	case r < 63: // rejoin with epoch 0 and the same id
		if silent || !c.joined {
			return "skip"
		}
		s.send(c, s.joinReq(c), "rejoin "+c.id)
		return "rejoin " + c.id
	case r < 66: // go silent
		c.silentTo = h.now.Add(time.Duration(rng.IntN(60)) * time.Second)
		return "silence " + c.id
	case r < 70: // change subscription (or rack)
		if silent || !c.joined {
			return "skip"
		}
		req := hbReq(c.id, c.epoch)
		if rng.IntN(4) == 0 {
			req.RackID = strp(fmt.Sprintf("rack-%d", rng.IntN(2)))
		} else {
			s.resubscribe(c)
			req.SubscribedTopicNames = append([]string{}, c.topics...)
		}
		s.send(c, req, "resubscribe "+c.id)
		return "resubscribe " + c.id
	case r < 75: // metadata: add partitions, create, delete or recreate a topic
		name := simTopics[rng.IntN(len(simTopics))]
		t, ok := h.topics.byName[name]
		switch {
		case ok && rng.IntN(5) == 0:
			delete(h.topics.byName, name)
			return "delete " + name
		case ok && rng.IntN(5) == 0:
			t.id[14]++
			h.topics.byName[name] = topicMeta{t.id, 1 + int32(rng.IntN(3))}
			return "recreate " + name
		case ok:
			h.topics.byName[name] = topicMeta{t.id, t.partitions + int32(rng.IntN(3))}
			return "grow " + name
		default:
			h.topics.add(name, int32(rng.IntN(5)))
			return "create " + name
		}
	default: // time passes
		d := time.Duration(rng.IntN(8000)) * time.Millisecond
		h.advance(d)
		return fmt.Sprintf("advance %v", d)
	}
}

func (s *sim) check(step int, what string) {
	s.t.Helper()
	g := s.h.g
	checkInvariants(s.t, g)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.groupEpoch < s.lastEpoch {
		s.t.Fatalf("step %d (%s): group epoch went back", step, what)
	}
	s.lastEpoch = g.groupEpoch
	if g.groupEpoch == g.targetEpoch && len(g.members) > 0 {
		s.targetChecks++
		for n, tm := range g.meta {
			if subs := g.nameRefs[n]; subs > int(tm.partitions) && tm.partitions > 0 {
				s.sharedSteps++
				break
			}
		}
	}
	// A client the group still knows has what the group says it has.
	for _, c := range s.clients {
		if m := g.members[c.id]; c.joined && m != nil {
			if m.epoch != c.epoch || !equalTPs(cloneTPs(c.assigned), m.assigned) {
				s.t.Fatalf("step %d (%s): client %s at %d has %v; the group says %d, %v", step, what, c.id, c.epoch, c.assigned, m.epoch, m.assigned)
			}
		}
	}
}

func TestRandomized(t *testing.T) {
	steps := 5000
	if testing.Short() {
		steps = 500
	}
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*7919))
			s := &sim{t: t, rng: rng, h: newHarness(t, Config{MaxSize: 7})}
			s.h.topics.add("a", 2)
			s.h.topics.add("b", 7)
			for i := range 9 {
				c := &simClient{name: fmt.Sprintf("c%d", i)}
				c.id = c.name + "-0"
				s.resubscribe(c)
				s.clients = append(s.clients, c)
			}
			for step := range steps {
				what := s.act()
				s.check(step, what)
			}
			t.Logf("heartbeats ok %d, fenced or unknown %d, group full %d, target checks %d, with shared partitions %d",
				s.hbOK, s.fenced, s.full, s.targetChecks, s.sharedSteps)
			if s.fenced == 0 || s.full == 0 || s.targetChecks < steps/4 || s.sharedSteps == 0 {
				t.Fatal("the run did not exercise the rules")
			}
			// Quiesce: everyone heartbeats until all members are at the group
			// epoch; then the members' own assignments (not only the target)
			// cover every subscribed partition.
			s.h.advance(session + time.Second) // restarted clients' old ids expire
			settled := func() bool {
				for _, m := range s.h.g.Members() {
					if m.MemberEpoch != s.h.g.GroupEpoch() {
						return false
					}
				}
				return true
			}
			for round := 0; round < 10 && (round < 2 || !settled()); round++ {
				s.h.advance(time.Second)
				for _, c := range s.clients {
					c.silentTo = time.Time{}
					if c.joined {
						s.send(c, hbReq(c.id, c.epoch), "quiesce")
					} else {
						s.send(c, s.joinReq(c), "quiesce join")
					}
				}
				s.check(steps+round, "quiesce")
			}
			g := s.h.g
			g.mu.Lock()
			defer g.mu.Unlock()
			for id, m := range g.members {
				if m.epoch != g.groupEpoch || !reflect.DeepEqual(m.assigned, cloneTPs(g.target[id])) {
					t.Fatalf("did not settle: %s at %d of %d, %v, target %v", id, m.epoch, g.groupEpoch, m.assigned, g.target[id])
				}
			}
			if len(g.members) == 0 {
				t.Fatal("nobody left")
			}
		})
	}
}

// TestHammer runs heartbeats, ticks and reads from many goroutines under
// -race.
func TestHammer(t *testing.T) {
	topics := newTopics()
	id := topics.add("t", 5)
	g := New("g", Config{MaxSize: 6}, t0)
	var (
		wg    sync.WaitGroup
		clock sync.Mutex
		now   = t0
	)
	tick := func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := simClient{id: fmt.Sprintf("w%d", w)}
			for i := range 300 {
				var req *kmsg.ShareGroupHeartbeatRequest
				switch {
				case !c.joined:
					req = joinReq(c.id, "t")
				case i%50 == 49:
					req = hbReq(c.id, -1)
				default:
					req = hbReq(c.id, c.epoch)
				}
				resp := g.Heartbeat(req, 1, Client{}, topics, tick())
				switch {
				case resp.ErrorCode != 0 || req.MemberEpoch < 0:
					c.joined, c.epoch = false, 0
				default:
					c.joined, c.epoch = true, resp.MemberEpoch
				}
				g.Tick(tick())
				_ = g.Describe(topics, tick())
				_ = g.Members()
				_, _ = g.NextDeadline()
				_ = g.IsMember(c.id)
				_ = g.AssignedTo(c.id)
				_ = g.Subscribers(id, int32(i%5))
				_ = g.Snapshot()
				_ = g.State()
			}
		}()
	}
	wg.Wait()
	checkInvariants(t, g)
}
