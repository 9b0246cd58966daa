package interop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestClusterNetworkPartition cuts one broker off from the two others, first the active
// controller, then (on a new cluster) a broker that is not the controller, and heals
// the cut later.
//
// Every raft link between two brokers goes through its own in-process TCP proxy: broker
// i's config lists voter j (j != i) at the proxy for i→j and itself at its own raft
// listener, so each direction can be cut on its own. A cut proxy closes its connections
// and drops whatever new ones send (a network that loses packets, not one that refuses
// connections).
//
// This bends modules/metadata's rule that every broker lists the same voters: the ids
// agree, only the addresses differ. It works because raft keeps each broker's own
// bootstrap configuration (the same index and term everywhere) until a configuration
// change, and this test makes none (no non-voter joins). Controller RPCs to a known
// raft leader use the address the leader advertises (its own listener, not a proxy),
// but a cut-off broker knows no leader once its raft heartbeat times out, and the
// voters it then tries are proxies.
//
// While cut: the two others have a controller among themselves (a new one when the
// controller was cut off, the same one otherwise), fence the cut broker (its RF=1
// partitions lose their leader), keep creating topics (placed on live brokers only), and
// a CreateTopics sent to the cut broker fails with a Kafka error. After healing: the cut
// broker catches up on what it missed, is unfenced and leads its partitions again, and
// topics can be created through it.
func TestClusterNetworkPartition(t *testing.T) {
	t.Parallel()
	for _, cutController := range []bool{true, false} {
		name := "follower"
		if cutController {
			name = "controller"
		}
		t.Run(name, func(t *testing.T) { testNetworkPartition(t, cutController) })
	}
}

func testNetworkPartition(t *testing.T, cutController bool) {
	needBroker(t)
	var links raftLinks
	c := newCluster(t, 3, 3, links.voters(t))
	c.startAll()
	ctrl := c.agreedController(20 * time.Second)
	c.waitAllSeeAll(20*time.Second, allThree) // all unfenced, so placement uses all three
	victim := c.node(ctrl)
	if !cutController {
		victim = c.node(ctrl%3 + 1)
	}
	survivors := c.others(victim)
	survivors[0].mustCreateTopic(30*time.Second, "pre-cut", 12, 1, nil)
	before := survivors[0].waitView(20*time.Second, "pre-cut led", func(v *view) bool { return allLed(v, "pre-cut", 12) }, "pre-cut")
	var victimParts []int32
	for p, l := range before.leaders["pre-cut"] {
		if l == victim.id {
			victimParts = append(victimParts, p)
		}
	}
	if len(victimParts) == 0 {
		t.Fatalf("broker %d leads no partition of pre-cut: %v", victim.id, before)
	}

	cut := func(on bool) { links.cutNode(victim.id, on) }
	cut(true)
	cutAt := time.Now()

	// The majority has a controller among themselves: a new one when the controller was
	// cut off. (Raft's pre-vote keeps a cut-off follower from deposing the leader.)
	newCtrl := survivors[0].waitController(20*time.Second, func(id int32) bool { return id != victim.id })
	survivors[1].waitController(10*time.Second, func(id int32) bool { return id == newCtrl })
	if !cutController && newCtrl != ctrl {
		t.Errorf("cutting off follower %d moved the controller from %d to %d", victim.id, ctrl, newCtrl)
	}
	t.Logf("broker %d cut off; broker %d is controller after %s", victim.id, newCtrl, time.Since(cutAt).Round(time.Millisecond))

	// The cut broker cannot get a metadata write committed.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	err := victim.createTopic(ctx, "through-the-cut", 1, 1, nil)
	cancel()
	var kerrErr *kerr.Error
	if err == nil {
		t.Errorf("CreateTopics through the cut-off broker %d succeeded", victim.id)
	} else if !errors.As(err, &kerrErr) {
		t.Errorf("CreateTopics through the cut-off broker %d: %v, want a Kafka error code within the request's timeout", victim.id, err)
	} else {
		t.Logf("CreateTopics through the cut-off broker: %v", err)
	}

	// It stops heartbeating to the new controller, so it is fenced.
	for _, n := range survivors {
		n.waitView(clusterSessionTimeout+20*time.Second, fmt.Sprintf("broker %d fenced", victim.id), func(v *view) bool {
			if slices.Contains(v.brokers, victim.id) {
				return false
			}
			for _, p := range victimParts {
				if v.leaders["pre-cut"][p] != -1 {
					return false
				}
			}
			return true
		}, "pre-cut")
	}
	// The majority keeps working, and places new partitions on live brokers only.
	survivors[1].mustCreateTopic(20*time.Second, "during-cut", 6, 1, nil)
	during := survivors[0].waitView(10*time.Second, "during-cut led", func(v *view) bool { return allLed(v, "during-cut", 6) }, "during-cut")
	for p, l := range during.leaders["during-cut"] {
		if l == victim.id {
			t.Errorf("during-cut-%d placed on the fenced broker %d", p, victim.id)
		}
	}

	cut(false)
	healed := time.Now()
	victim.waitView(30*time.Second, "caught up after healing", func(v *view) bool {
		return v.controller == newCtrl && allLed(v, "during-cut", 6)
	}, "during-cut")
	for _, n := range c.nodes {
		n.waitView(30*time.Second, fmt.Sprintf("broker %d unfenced and leading its partitions", victim.id), func(v *view) bool {
			return leadsAgain(v, victim.id, "pre-cut", victimParts)
		}, "pre-cut")
	}
	t.Logf("healed; broker %d back in %s", victim.id, time.Since(healed).Round(time.Millisecond))
	victim.mustCreateTopic(20*time.Second, "after-heal", 3, 1, nil)
	for _, n := range survivors {
		n.waitView(10*time.Second, "after-heal led", func(v *view) bool { return allLed(v, "after-heal", 3) }, "after-heal")
	}
}
