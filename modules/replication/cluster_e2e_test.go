package replication_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/replication"
	"github.com/sluicehq/sluice/modules/standard"
)

// In-process multi-broker clusters: n kernels in the test process, each with the
// standard modules, a storage module of the test's choice, and the raft metadata
// module with n voters on 127.0.0.1 ports. Clients talk to them over real sockets.

// cnode is one broker of a test cluster.
type cnode struct {
	id   int32
	dir  string
	raft string // raft listener
	k    *kernel.Kernel
	logs *logBuffer
}

// rcluster is a running test cluster.
type rcluster struct {
	t       *testing.T
	nodes   []*cnode // nodes[i].id == i+1
	voters  []string
	storage string
	configs map[string]string
	opts    clusterOpts
}

// clusterOpts are less common cluster settings.
type clusterOpts struct {
	racks       []string // racks[i] is broker i+1's rack
	replication string   // extra keys of the replication module's section ("k: v, k: v")
	listeners   string   // the YAML listeners list (default one PLAINTEXT listener)
	modules     string   // extra lines of the modules section ("  auth: {use: acl}\n")
	dirs        []string // dirs[i] is broker i+1's data dir (default: a fresh temp dir)
	jbod        bool     // each broker has two log dirs, <data dir>/d0 and /d1 (log.dirs)
}

// clusterConfigs are the broker configs every test cluster gets; a test adds its own.
var clusterConfigs = map[string]string{
	"broker.heartbeat.interval.ms": "200",
	"broker.session.timeout.ms":    "4000",
	"replica.fetch.backoff.ms":     "100",
	"auto.create.topics.enable":    "false",
}

// startCluster starts n brokers (all raft voters) and waits until each sees all n
// registered and unfenced.
func startCluster(t *testing.T, n int, storage string, configs map[string]string) *rcluster {
	t.Helper()
	return startClusterWith(t, n, storage, configs, clusterOpts{})
}

// startClusterWith is startCluster with opts.
func startClusterWith(t *testing.T, n int, storage string, configs map[string]string, opts clusterOpts) *rcluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-broker cluster test")
	}
	c := &rcluster{t: t, storage: storage, configs: map[string]string{}, opts: opts}
	for k, v := range clusterConfigs {
		c.configs[k] = v
	}
	for k, v := range configs {
		c.configs[k] = v
	}
	for i := 1; i <= n; i++ {
		dir := ""
		if i <= len(opts.dirs) {
			dir = opts.dirs[i-1]
		} else {
			dir = t.TempDir()
		}
		nd := &cnode{id: int32(i), dir: dir, raft: testcheck.FreeAddr(t), logs: &logBuffer{}}
		c.nodes = append(c.nodes, nd)
		c.voters = append(c.voters, fmt.Sprintf("%d@%s", i, nd.raft))
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, nd := range c.nodes {
			if nd.k != nil {
				wg.Go(func() { c.stop(nd.id) })
			}
		}
		wg.Wait()
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("broker %d log (last lines):\n%s", nd.id, nd.logs.tail(80))
			}
		}
	})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range c.nodes {
		wg.Go(func() { errs[i] = c.start(nd) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start broker %d: %v", i+1, err)
		}
	}
	c.waitBrokers(n)
	return c
}

// start starts a broker (again, on its data dir) and waits until it is ready.
func (c *rcluster) start(nd *cnode) error {
	var cfgs strings.Builder
	for k, v := range c.configs {
		fmt.Fprintf(&cfgs, "  %s: %q\n", k, v)
	}
	if c.opts.jbod {
		fmt.Fprintf(&cfgs, "  log.dirs: %q\n", filepath.Join(nd.dir, "d0")+","+filepath.Join(nd.dir, "d1"))
	}
	quoted := make([]string, len(c.voters))
	for i, v := range c.voters {
		quoted[i] = fmt.Sprintf("%q", v)
	}
	rack, repl := "", ""
	if int(nd.id) <= len(c.opts.racks) {
		rack = c.opts.racks[nd.id-1]
	}
	if c.opts.replication != "" {
		repl = ", " + c.opts.replication
	}
	listeners := c.opts.listeners
	if listeners == "" {
		listeners = `[{name: PLAINTEXT, address: "127.0.0.1:0"}]`
	}
	yaml := fmt.Sprintf(`node_id: %d
data_dir: %q
rack: %q
listeners: %s
admin_listen: "127.0.0.1:0"
configs:
%smodules:
  storage: {use: %s}
  metadata: {use: raft, raft_listen: %q, voters: [%s], commit_timeout: 10ms}
  replication: {use: isr%s}
%s`, nd.id, nd.dir, rack, listeners, cfgs.String(), c.storage, nd.raft, strings.Join(quoted, ", "), repl, c.opts.modules)
	cfg, err := kernel.ParseConfig([]byte(yaml))
	if err != nil {
		return err
	}
	reg := kernel.NewRegistry()
	standard.Register(reg)
	log := slog.New(slog.NewTextHandler(nd.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	k, err := kernel.New(cfg, reg, log.With("node", nd.id))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := k.Start(ctx); err != nil {
		return err
	}
	for !k.Ready() {
		if ctx.Err() != nil {
			_ = k.Shutdown(context.Background())
			return fmt.Errorf("broker %d not ready: %w", nd.id, ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	nd.k = k
	return nil
}

// stop shuts broker id down gracefully.
func (c *rcluster) stop(id int32) {
	nd := c.nodes[id-1]
	if nd.k == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := nd.k.Shutdown(ctx); err != nil {
		c.t.Errorf("shutdown broker %d: %v", id, err)
	}
	nd.k = nil
}

// restart starts a stopped broker again on its data.
func (c *rcluster) restart(id int32) {
	c.t.Helper()
	if err := c.start(c.nodes[id-1]); err != nil {
		c.t.Fatalf("restart broker %d: %v", id, err)
	}
}

func (c *rcluster) repl(id int32) *replication.Module {
	return c.nodes[id-1].k.Module("replication").(*replication.Module)
}

func (c *rcluster) image(id int32) *kernel.Image {
	return c.nodes[id-1].k.Module("metadata").(kernel.Metadata).Image()
}

func (c *rcluster) running() []*cnode {
	var out []*cnode
	for _, nd := range c.nodes {
		if nd.k != nil {
			out = append(out, nd)
		}
	}
	return out
}

func (c *rcluster) addr(id int32) string { return c.nodes[id-1].k.Addrs()[0].String() }

// client returns a kgo client seeded with every running broker.
func (c *rcluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	var seeds []string
	for _, nd := range c.running() {
		seeds = append(seeds, nd.k.Addrs()[0].String())
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// brokerClient is a kgo client that talks to broker id only (raw requests).
func (c *rcluster) brokerClient(id int32, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addr(id)), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// eventually polls cond until it holds or d passes.
func (c *rcluster) eventually(d time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitBrokers waits until every running broker's image has n unfenced brokers.
func (c *rcluster) waitBrokers(n int) {
	c.t.Helper()
	c.eventually(30*time.Second, fmt.Sprintf("%d unfenced brokers in every image", n), func() bool {
		for _, nd := range c.running() {
			im := c.image(nd.id)
			live := 0
			for _, b := range im.Brokers {
				if !b.Fenced {
					live++
				}
			}
			if live < n {
				return false
			}
		}
		return true
	})
}

// createTopic creates a topic through broker 1 and waits until every running replica
// holds it, its followers follow it, and its ISR is complete.
func (c *rcluster) createTopic(name string, partitions int32, rf int16, configs map[string]*string) {
	c.t.Helper()
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.CreateTopic(ctx, partitions, rf, configs, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s: %v", name, err)
	}
	c.eventually(30*time.Second, "topic "+name+" on every replica", func() bool {
		for p := range partitions {
			tp := kernel.TopicPartition{Topic: name, Partition: p}
			pi := c.image(c.running()[0].id).Partition(name, p)
			if pi == nil || pi.Leader < 0 {
				return false
			}
			for _, r := range pi.Replicas {
				v, ok := c.repl(r).Replica(tp)
				if !ok || v.Leader != pi.Leader || (r != pi.Leader) != v.Follower {
					return false
				}
			}
		}
		return true
	})
}

// leaderOf is the leader of tp in broker 1's image.
func (c *rcluster) leaderOf(tp kernel.TopicPartition) int32 {
	return c.image(c.running()[0].id).Partition(tp.Topic, tp.Partition).Leader
}

// logBytes reads a replica's whole log.
func logBytes(t *testing.T, l kernel.Log) []byte {
	t.Helper()
	var out []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rr, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if rr.Size == 0 {
			rr.Release()
			break
		}
		start := len(out)
		for _, ch := range rr.Chunks {
			if ch.File == nil {
				out = append(out, ch.Bytes...)
				continue
			}
			buf := make([]byte, ch.N)
			if _, err := ch.File.ReadAt(buf, ch.Off); err != nil {
				rr.Release()
				t.Fatal(err)
			}
			out = append(out, buf...)
		}
		rr.Release()
		// The next offset: past the last batch read.
		next, ok := lastOffset(out[start:])
		if !ok {
			t.Fatalf("unreadable batches at %d", off)
		}
		off = next + 1
	}
	return out
}

// lastOffset is the last offset of the last batch in b.
func lastOffset(b []byte) (int64, bool) {
	last, ok := int64(-1), false
	for len(b) >= 61 {
		size := int(int32(be32(b[8:]))) + 12
		if size < 61 || size > len(b) {
			return last, ok
		}
		last = int64(be64(b)) + int64(int32(be32(b[23:])))
		ok = true
		b = b[size:]
	}
	return last, ok
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
func be64(b []byte) uint64 { return uint64(be32(b))<<32 | uint64(be32(b[4:])) }

// waitInSync waits until every replica of tp has the leader's log start, log end and HW, and
// returns the leader's log bytes after checking every replica's bytes and leader
// epochs equal it.
func (c *rcluster) waitInSync(tp kernel.TopicPartition, d time.Duration) []byte {
	c.t.Helper()
	var pi *kernel.PartitionImage
	c.eventually(d, fmt.Sprintf("replicas of %s in sync", tp), func() bool {
		pi = c.image(c.running()[0].id).Partition(tp.Topic, tp.Partition)
		if pi.Leader < 0 {
			return false
		}
		lv, ok := c.repl(pi.Leader).Replica(tp)
		if !ok {
			return false
		}
		leo := lv.Log.LogEndOffset()
		if lv.HW != leo {
			return false
		}
		for _, r := range pi.Replicas {
			if c.nodes[r-1].k == nil {
				continue
			}
			v, ok := c.repl(r).Replica(tp)
			if !ok || v.Log.LogEndOffset() != leo || v.HW != leo || v.Log.LogStartOffset() != lv.Log.LogStartOffset() {
				return false
			}
		}
		return true
	})
	lv, _ := c.repl(pi.Leader).Replica(tp)
	want := logBytes(c.t, lv.Log)
	for _, r := range pi.Replicas {
		if r == pi.Leader || c.nodes[r-1].k == nil {
			continue
		}
		v, _ := c.repl(r).Replica(tp)
		if got := logBytes(c.t, v.Log); !bytes.Equal(got, want) {
			c.t.Fatalf("%s: replica %d's log (%d bytes) differs from leader %d's (%d bytes)", tp, r, len(got), pi.Leader, len(want))
		}
		if got, want := v.Log.Epochs(), lv.Log.Epochs(); !slices.Equal(got, want) {
			c.t.Fatalf("%s: replica %d's leader epochs %v, leader %d's %v", tp, r, got, pi.Leader, want)
		}
		if v.Log.LogStartOffset() != lv.Log.LogStartOffset() {
			c.t.Fatalf("%s: replica %d's log start %d, leader's %d", tp, r, v.Log.LogStartOffset(), lv.Log.LogStartOffset())
		}
	}
	return want
}

// logBuffer keeps a broker's log lines for the failure report.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, strings.TrimRight(string(p), "\n"))
	if len(b.lines) > 4000 {
		b.lines = b.lines[len(b.lines)-2000:]
	}
	return len(p), nil
}

func (b *logBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines[max(0, len(b.lines)-n):], "\n")
}

func (b *logBuffer) contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
