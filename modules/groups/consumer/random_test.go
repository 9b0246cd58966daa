package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// simClient is a consumer as the randomized test models it: it mostly
// follows the protocol and sometimes misbehaves (goes silent, forgets to
// report what it owns, sends stale epochs, leaves, restarts).
type simClient struct {
	client
	name     string
	topics   []string
	regex    string
	silentTo time.Time
	restarts int
}

type sim struct {
	t         *testing.T
	h         *harness
	rng       *rand.Rand
	clients   []*simClient
	lastEpoch int32
	states    map[State]int
	unrevoked int // steps with a member in UNREVOKED_PARTITIONS
	owning    int // steps with a client owning partitions
}

var simTopics = []string{"a", "b", "c", "orders-1", "orders-2"}

func (s *sim) newClient(i int) *simClient {
	c := &simClient{name: fmt.Sprintf("c%d", i)}
	c.id = c.name + "-0"
	if s.rng.IntN(3) == 0 {
		c.instance = "inst-" + c.name
	}
	s.resubscribe(c)
	return c
}

func (s *sim) resubscribe(c *simClient) {
	c.topics, c.regex = nil, ""
	if s.rng.IntN(4) == 0 {
		c.regex = "orders-.*"
		return
	}
	for _, t := range simTopics[:3] {
		if s.rng.IntN(2) == 0 {
			c.topics = append(c.topics, t)
		}
	}
	if len(c.topics) == 0 {
		c.topics = []string{"a"}
	}
}

// send sends req for c and applies the response as a client would.
func (s *sim) send(c *simClient, req *kmsg.ConsumerGroupHeartbeatRequest) {
	if c.instance != "" && req.InstanceID == nil {
		req.InstanceID = strp(c.instance)
	}
	resp := s.h.g.Heartbeat(context.Background(), req, req.Version, Client{ID: c.name, Host: "/10.0.0.1"}, s.h.topics, s.h.now)
	switch {
	case resp.ErrorCode == 0 && req.MemberEpoch < 0:
		c.joined, c.owned, c.epoch = false, tps{}, 0
	case resp.ErrorCode == 0:
		c.joined = true
		c.epoch = resp.MemberEpoch
		if a := respAssignment(resp); a != nil {
			c.owned = a
		}
	case resp.ErrorCode == kerr.UnreleasedInstanceID.Code:
		// Wait for the old instance to be released.
	default:
		switch kerr.ErrorForCode(resp.ErrorCode) {
		case kerr.UnknownMemberID, kerr.FencedMemberEpoch, kerr.FencedInstanceID, kerr.GroupMaxSizeReached:
		default:
			s.t.Fatalf("unexpected error %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		c.joined, c.owned, c.epoch = false, tps{}, 0
	}
}

func (s *sim) join(c *simClient) *kmsg.ConsumerGroupHeartbeatRequest {
	req := joinReq(c.id, c.topics...)
	if c.regex != "" {
		req.SubscribedTopicRegex = strp(c.regex)
	}
	if s.rng.IntN(5) == 0 {
		req.ServerAssignor = strp([]string{"uniform", "range"}[s.rng.IntN(2)])
	}
	return req
}

func (s *sim) act(step int) string {
	h, rng := s.h, s.rng
	c := s.clients[rng.IntN(len(s.clients))]
	silent := h.now.Before(c.silentTo)
	switch r := rng.IntN(100); {
	case r < 55: // a normal heartbeat (or join)
		if silent {
			return "silent"
		}
		if !c.joined {
			s.send(c, s.join(c))
			return "join " + c.id
		}
		s.send(c, hbReq(c.id, c.epoch, c.owned))
		return "heartbeat " + c.id
	case r < 60: // heartbeat without an owned list
		if silent || !c.joined {
			return "skip"
		}
		s.send(c, hbReq(c.id, c.epoch, nil))
		return "light heartbeat " + c.id
	case r < 63: // stale or wild epoch
		if silent || !c.joined {
			return "skip"
		}
		e := []int32{c.epoch - 1, c.epoch + 1, 1 << 30}[rng.IntN(3)]
		s.send(c, hbReq(c.id, e, c.owned))
		return fmt.Sprintf("epoch %d for %s", e, c.id)
	case r < 66: // leave
		if !c.joined {
			return "skip"
		}
		e := int32(-1)
		if c.instance != "" && rng.IntN(2) == 0 {
			e = -2
		}
		s.send(c, hbReq(c.id, e, nil))
		return fmt.Sprintf("leave %d %s", e, c.id)
	case r < 69: // restart: forget everything, new member id
		c.restarts++
		c.id = fmt.Sprintf("%s-%d", c.name, c.restarts)
		c.joined, c.owned, c.epoch = false, tps{}, 0
		return "restart " + c.name
	case r < 71: // rejoin with epoch 0 and the same id, owning nothing
		if silent || !c.joined {
			return "skip"
		}
		c.owned = tps{}
		s.send(c, s.join(c))
		return "rejoin " + c.id
	case r < 73: // go silent
		c.silentTo = h.now.Add(time.Duration(rng.IntN(60)) * time.Second)
		return "silence " + c.id
	case r < 76: // change subscription
		if silent || !c.joined {
			return "skip"
		}
		s.resubscribe(c)
		req := hbReq(c.id, c.epoch, c.owned)
		req.SubscribedTopicNames = append([]string{}, c.topics...)
		req.SubscribedTopicRegex = strp(c.regex)
		s.send(c, req)
		return "resubscribe " + c.id
	case r < 78: // metadata change: add partitions or a topic, or delete one
		name := simTopics[rng.IntN(len(simTopics))]
		if t, ok := h.topics.byName[name]; ok && rng.IntN(4) == 0 {
			delete(h.topics.byName, name)
			return "delete " + name
		} else if ok {
			h.topics.byName[name] = topicMeta{t.id, t.partitions + int32(rng.IntN(4))}
		} else {
			h.topics.add(name, int32(1+rng.IntN(6)))
		}
		return "metadata " + name
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
	s.states[g.state()]++
	for _, m := range g.members {
		if m.state == MemberUnrevokedPartitions {
			s.unrevoked++
			break
		}
	}
	// Clients the group still knows under their member id: none owns a
	// partition another owns.
	seen := map[tp]string{}
	for _, c := range s.clients {
		if !c.joined || g.members[c.id] == nil {
			continue
		}
		for top, ps := range c.owned {
			for _, p := range ps {
				if o, dup := seen[tp{top, p}]; dup {
					s.t.Fatalf("step %d (%s): partition %v/%d owned by %s and %s", step, what, top, p, o, c.id)
				}
				seen[tp{top, p}] = c.id
			}
		}
	}
	if g.groupEpoch == g.targetEpoch && g.assignErr == nil && len(g.members) > 0 {
		in := assignor.Input{Topics: map[assignor.TopicID]assignor.Topic{}}
		for n, t := range g.meta {
			in.Topics[t.id] = assignor.Topic{ID: t.id, Name: n, Partitions: t.partitions}
		}
		for _, m := range g.sortedMembers() {
			in.Members = append(in.Members, assignor.Member{ID: m.id, Topics: g.memberTopics(m)})
		}
		if err := assignor.Check(in, g.target); err != nil {
			s.t.Fatalf("step %d (%s): target: %v", step, what, err)
		}
	}
}

func TestRandomized(t *testing.T) {
	steps := 4000
	if testing.Short() {
		steps = 500
	}
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*7919))
			s := &sim{t: t, rng: rng, states: map[State]int{}, h: newHarness(t, Config{MaxSize: 6, RegexRefreshInterval: 3 * time.Second})}
			s.h.topics.add("a", 4)
			s.h.topics.add("b", 7)
			s.h.topics.add("orders-1", 3)
			for i := range 8 {
				s.clients = append(s.clients, s.newClient(i))
			}
			for step := range steps {
				what := s.act(step)
				s.check(step, what)
				if len(s.clients[0].owned) > 0 {
					s.owning++
				}
			}
			t.Logf("states %v, steps with revocation pending %d, with c0 owning %d", s.states, s.unrevoked, s.owning)
			if s.unrevoked == 0 || s.states[Stable] == 0 || s.states[Reconciling] == 0 {
				t.Fatalf("the run did not exercise reconciliation")
			}
			// Quiesce: everyone heartbeats properly until stable.
			// Members of restarted clients expire; clients that are out
			// join again.
			for round := 0; round < 40 && s.h.g.State() != Stable && s.h.g.State() != Empty; round++ {
				s.h.advance(5 * time.Second)
				for _, c := range s.clients {
					c.silentTo = time.Time{}
					if c.joined {
						s.send(c, hbReq(c.id, c.epoch, c.owned))
					} else {
						s.send(c, s.join(c))
					}
				}
				s.check(steps+round, "quiesce")
			}
			if st := s.h.g.State(); st != Stable && st != Empty {
				for _, m := range s.h.g.Members() {
					t.Logf("%+v", m)
				}
				t.Fatalf("did not settle: %v", st)
			}
		})
	}
}

// TestHammer runs heartbeats, ticks and reads from many goroutines under
// -race.
func TestHammer(t *testing.T) {
	topics := newTopics()
	topics.add("t", 16)
	g := New("g", Config{}, t0)
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
			c := client{id: fmt.Sprintf("w%d", w)}
			for i := range 300 {
				var req *kmsg.ConsumerGroupHeartbeatRequest
				switch {
				case !c.joined:
					req = joinReq(c.id, "t")
				case i%50 == 49:
					req = hbReq(c.id, -1, nil)
				default:
					req = hbReq(c.id, c.epoch, c.owned)
				}
				resp := g.Heartbeat(context.Background(), req, 1, Client{}, topics, tick())
				switch {
				case resp.ErrorCode != 0 || req.MemberEpoch < 0:
					c.joined, c.owned, c.epoch = false, tps{}, 0
				default:
					c.joined, c.epoch = true, resp.MemberEpoch
					if a := respAssignment(resp); a != nil {
						c.owned = a
					}
				}
				g.Tick(tick())
				_ = g.Describe(topics, tick())
				_ = g.Members()
				_, _ = g.NextDeadline()
				_ = g.ValidateCommit(c.id, c.epoch)
			}
		}()
	}
	wg.Wait()
	checkInvariants(t, g)
}
