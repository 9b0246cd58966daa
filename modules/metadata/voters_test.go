package metadata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcheck"
)

// TestThreeVoters runs a three-voter quorum over TCP: one leader is elected, writes the
// cluster id and registers, and every voter applies the same entries to the same image.
func TestThreeVoters(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	addrs := []string{testcheck.FreeAddr(t), testcheck.FreeAddr(t), testcheck.FreeAddr(t)}
	var voters []string
	for i, a := range addrs {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, a))
	}
	type node struct {
		m      *Module
		fc     *fakeContext
		cancel context.CancelFunc
		done   chan error
	}
	nodes := make([]*node, 3)
	for i := range nodes {
		fc := newFakeContext(t, int32(i+1), t.TempDir())
		m := Info().New().(*Module)
		m.Voters, m.RaftListen = voters, addrs[i]
		// Short enough to elect quickly, long enough that a loaded machine running
		// with -race does not lose leadership mid-test (100/100/50ms did).
		m.HeartbeatTimeout, m.ElectionTimeout, m.LeaseTimeout, m.CommitTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond, 10*time.Millisecond
		if err := m.Provision(fc); err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		n := &node{m: m, fc: fc, cancel: cancel, done: make(chan error, 1)}
		nodes[i] = n
		go func() { n.done <- m.Start(ctx) }()
	}
	defer func() {
		for _, n := range nodes {
			n.cancel()
			<-n.done
			stopModule(t, n.m)
		}
	}()

	var leader *node
	select {
	case <-time.After(15 * time.Second):
		t.Fatal("no voter finished Start")
	case err := <-nodes[0].done:
		leader, nodes[0].done = nodes[0], closedErr(err)
	case err := <-nodes[1].done:
		leader, nodes[1].done = nodes[1], closedErr(err)
	case err := <-nodes[2].done:
		leader, nodes[2].done = nodes[2], closedErr(err)
	}
	if !leader.m.Ready() {
		t.Fatalf("node %d started but is not ready", leader.m.node.nodeID)
	}
	if rt := createTopic(t, leader.fc, "replicated", 2, nil); rt.ErrorCode != 0 {
		t.Fatalf("create on the leader: %d", rt.ErrorCode)
	}
	// Extensions replicate too. The value is kept small: with this test's short leader
	// lease, a multi-MB entry can stall heartbeats long enough to lose leadership.
	ext := bytes.Repeat([]byte("wasm"), 64<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Under load raft may change leaders mid-commit (ErrNotController: the outcome is
	// unknown); a put is idempotent, so retry it as a client would.
	put := func(n *node, key string, v []byte) error {
		for {
			err := n.m.PutExtension(ctx, "transforms", key, v)
			if !errors.Is(err, ErrNotController) || ctx.Err() != nil {
				return err
			}
		}
	}
	if err := put(leader, "t", ext); err != nil {
		t.Fatalf("put extension on the leader: %v", err)
	}
	want := leader.m.Image()
	for _, n := range nodes {
		waitFor(t, 5*time.Second, func() bool { return n.m.Image().Version >= want.Version })
		im := n.m.Image()
		if im.ClusterID != want.ClusterID || im.Topic("replicated") == nil ||
			im.Topic("replicated").ID != want.Topic("replicated").ID || im.Brokers[leader.m.node.nodeID] == nil {
			t.Errorf("node %d image differs: %+v", n.m.node.nodeID, im)
		}
		if !bytes.Equal(im.Extension("transforms", "t"), ext) {
			t.Errorf("node %d: extension of %d bytes", n.m.node.nodeID, len(im.Extension("transforms", "t")))
		}
		if n != leader {
			// A follower forwards writes to the controller and reads its own write.
			if err := put(n, fmt.Sprintf("u%d", n.m.node.nodeID), []byte("x")); err != nil {
				t.Errorf("put extension on follower %d: %v", n.m.node.nodeID, err)
			} else if string(n.m.Image().Extension("transforms", fmt.Sprintf("u%d", n.m.node.nodeID))) != "x" {
				t.Errorf("follower %d does not read its own extension write", n.m.node.nodeID)
			}
			if _, err := n.m.AllocateProducerIDs(ctx, 1); err != nil {
				t.Errorf("allocate producer ids on follower %d: %v", n.m.node.nodeID, err)
			}
		}
	}
}

func closedErr(err error) chan error {
	ch := make(chan error, 1)
	ch <- err
	return ch
}
