package metadata

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/kernel"
)

// tnode is one broker of an in-process test cluster.
type tnode struct {
	id   int32
	dir  string
	addr string // raft port
	rack string
	m    *Module
	fc   *fakeContext
}

// tcluster is a set of metadata modules talking over TCP on 127.0.0.1.
type tcluster struct {
	t      *testing.T
	voters []string
	nodes  map[int32]*tnode
	// static broker configs every node gets (heartbeat and session settings).
	configs map[string]string
	// features every node supports.
	features []kernel.SupportedFeature
}

// Test lifecycle settings: fast heartbeats, a session that survives a loaded -race
// machine.
var testClusterConfigs = map[string]string{
	"broker.heartbeat.interval.ms": "100",
	"broker.session.timeout.ms":    "2500",
}

// newCluster starts voters 1..n (racks[i] for node i+1 when given) and waits until
// every one is registered.
func newCluster(t *testing.T, n int, racks ...string) *tcluster {
	t.Helper()
	return newClusterWith(t, n, nil, racks...)
}

// newClusterWith is newCluster with static broker configs added to the test ones.
func newClusterWith(t *testing.T, n int, configs map[string]string, racks ...string) *tcluster {
	t.Helper()
	return newClusterFeatures(t, n, configs, nil, racks...)
}

// newClusterFeatures is newClusterWith with every node supporting features (feature
// levels, KIP-584), as the kernel would tell it from its modules.
func newClusterFeatures(t *testing.T, n int, configs map[string]string, features []kernel.SupportedFeature, racks ...string) *tcluster {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := &tcluster{t: t, nodes: map[int32]*tnode{}, configs: maps.Clone(testClusterConfigs), features: features}
	maps.Copy(c.configs, configs)
	for i := 1; i <= n; i++ {
		nd := &tnode{id: int32(i), dir: t.TempDir(), addr: testcheck.FreeAddr(t)}
		if i-1 < len(racks) {
			nd.rack = racks[i-1]
		}
		c.nodes[nd.id] = nd
		c.voters = append(c.voters, fmt.Sprintf("%d@%s", i, nd.addr))
	}
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.start(c.nodes[int32(i)])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start node %d: %v", i, err)
		}
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd.m != nil {
				c.kill(nd.id)
			}
		}
	})
	// Start returns once a node's own image holds its registration; a node that
	// registered first may not have applied the others' yet, and a non-controller
	// plans topic creation on its own image.
	c.waitAll(20*time.Second, "every node sees every broker registered", func(im *kernel.Image) bool {
		return len(liveBrokers(im)) == n
	})
	return c
}

// start provisions and starts a node's module (on its old data when it ran before).
func (c *tcluster) start(nd *tnode) error {
	fc := newFakeContext(c.t, nd.id, nd.dir)
	fc.info.Rack = nd.rack
	fc.info.Listeners = []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9090 + nd.id}}
	fc.info.StaticConfigs = c.configs
	m := Info().New().(*Module)
	m.Voters, m.RaftListen = c.voters, nd.addr
	// raft's default timings (1 s, 1 s, 500 ms): shorter ones lose leadership on a
	// loaded 2-core machine under -race.
	m.CommitTimeout = 10 * time.Millisecond
	if err := m.Provision(fc); err != nil {
		return err
	}
	m.SetSupportedFeatures(c.features)
	if err := m.Validate(); err != nil {
		_ = m.Cleanup()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		_ = m.Cleanup()
		return err
	}
	nd.m, nd.fc = m, fc
	return nil
}

// addNonVoter starts node id as a non-voter.
func (c *tcluster) addNonVoter(id int32, rack string) *tnode {
	c.t.Helper()
	nd := &tnode{id: id, dir: c.t.TempDir(), addr: "127.0.0.1:0", rack: rack}
	c.nodes[id] = nd
	if err := c.start(nd); err != nil {
		c.t.Fatalf("start non-voter %d: %v", id, err)
	}
	return nd
}

// restart starts a stopped node again on its data.
func (c *tcluster) restart(id int32) {
	c.t.Helper()
	if err := c.start(c.nodes[id]); err != nil {
		c.t.Fatalf("restart node %d: %v", id, err)
	}
}

// stop stops a node gracefully (controlled shutdown).
func (c *tcluster) stop(id int32) {
	c.t.Helper()
	nd := c.nodes[id]
	stopModule(c.t, nd.m)
	nd.m = nil
}

// kill stops a node without a controlled shutdown, as a crash would (raft and the
// RPC port go away at once).
func (c *tcluster) kill(id int32) {
	c.t.Helper()
	nd := c.nodes[id]
	nd.m.beginStop()
	stopModule(c.t, nd.m)
	nd.m = nil
}

// leader waits for a running node that is the raft leader and has done its
// controller duties, and returns it.
func (c *tcluster) leader() *tnode {
	c.t.Helper()
	var l *tnode
	waitFor(c.t, 20*time.Second, func() bool {
		for _, nd := range c.nodes {
			if nd.m != nil && nd.m.node.isLeader() && nd.m.Image().ControllerID == nd.id {
				l = nd
				return true
			}
		}
		return false
	})
	return l
}

// follower returns a running node that is not the raft leader.
func (c *tcluster) follower() *tnode {
	c.t.Helper()
	l := c.leader()
	for _, id := range []int32{1, 2, 3, 4, 5} {
		if nd := c.nodes[id]; nd != nil && nd.m != nil && nd != l {
			return nd
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// third returns the running node that is neither a nor b (of a three-node cluster).
func (c *tcluster) third(a, b *tnode) *tnode {
	c.t.Helper()
	for _, nd := range c.running() {
		if nd != a && nd != b {
			return nd
		}
	}
	c.t.Fatal("no third node")
	return nil
}

// running returns the running nodes.
func (c *tcluster) running() []*tnode {
	var out []*tnode
	for _, nd := range c.nodes {
		if nd.m != nil {
			out = append(out, nd)
		}
	}
	return out
}

// waitAll waits until fn holds on every running node's image.
func (c *tcluster) waitAll(d time.Duration, what string, fn func(*kernel.Image) bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok := true
		for _, nd := range c.running() {
			if !fn(nd.m.Image()) {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// createTopicOn creates a topic through node nd's CreateTopics handler.
func createTopicOn(t *testing.T, nd *tnode, name string, partitions int32, rf int16, assignment map[int32][]int32) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, 20000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for p, rs := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp := call[*kmsg.CreateTopicsResponse](t, nd.fc, nil, req)
	return resp.Topics[0]
}

// leaders counts partition leaders per broker.
func leaders(t *kernel.TopicImage) map[int32]int {
	out := map[int32]int{}
	for _, p := range t.Partitions {
		out[p.Leader]++
	}
	return out
}
