package interop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Multi-broker clusters for the cluster tests (cluster_*_test.go). Each broker is a
// separate process started from the binary TestMain built, on its own free ports and
// data dir, with a config file naming its node id and the raft voter set.

// clusterSessionTimeout is broker.session.timeout.ms in the test clusters: short, so
// fencing after lost heartbeats happens within the tests' deadlines, long enough that a
// loaded machine does not fence a live broker.
const clusterSessionTimeout = 4 * time.Second

// clusterNode is one broker process of a cluster.
type clusterNode struct {
	*broker
	id       int32
	raftAddr string      // where its raft transport listens
	voters   []string    // the voter set in its config ("id@host:port")
	cl       *kgo.Client // seeded with this broker only; see request
}

// cluster is a set of broker processes; nodes[i] has node id i+1.
type cluster struct {
	t     testing.TB
	nodes []*clusterNode
	// raftAddrs[i] is the raft listener of node i+1 (voters and non-voters alike).
	raftAddrs []string
	nvoters   int
	opt       clusterOpt
}

// clusterOpt adds to every broker's config file.
type clusterOpt struct {
	// configs are more broker configs (Kafka names).
	configs map[string]string
	// listeners, when set, returns YAML for the broker's listeners key (the first one
	// is replaced by --listen, the client listener).
	listeners func(id int32) string
	// rack, when set, gives the broker's rack.
	rack func(id int32) string
	// addr, when set, gives the broker's client listener address ("" for a free port).
	addr func(id int32) string
	// modules is more YAML under modules: (two-space indented lines), after metadata.
	modules string
}

// newCluster prepares n brokers, the first nvoters of them raft voters, without
// starting them. voterList, when not nil, gives the voter set broker id writes in its
// config (the network fault test points voters at proxies); by default every broker
// lists each voter's raft listener.
func newCluster(t testing.TB, n, nvoters int, voterList func(c *cluster, id int32) []string) *cluster {
	t.Helper()
	return newClusterWith(t, n, nvoters, voterList, clusterOpt{})
}

// newClusterWith is newCluster with more in every broker's config.
func newClusterWith(t testing.TB, n, nvoters int, voterList func(c *cluster, id int32) []string, opt clusterOpt) *cluster {
	t.Helper()
	needBroker(t)
	c := &cluster{t: t, nvoters: nvoters, opt: opt}
	for range n {
		c.raftAddrs = append(c.raftAddrs, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	}
	for i := range n {
		c.addNode(int32(i+1), voterList)
	}
	return c
}

// defaultVoters is every voter at its raft listener.
func (c *cluster) defaultVoters() []string {
	var vs []string
	for i := range c.nvoters {
		vs = append(vs, fmt.Sprintf("%d@%s", i+1, c.raftAddrs[i]))
	}
	return vs
}

// addNode prepares broker id (id = len(nodes)+1) with a config file; it does not start it.
func (c *cluster) addNode(id int32, voterList func(c *cluster, id int32) []string) *clusterNode {
	t := c.t
	t.Helper()
	if int(id) != len(c.nodes)+1 {
		t.Fatalf("addNode(%d) with %d nodes", id, len(c.nodes))
	}
	for len(c.raftAddrs) < int(id) {
		c.raftAddrs = append(c.raftAddrs, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	}
	dir := t.TempDir()
	addr := ""
	if c.opt.addr != nil {
		addr = c.opt.addr(id)
	}
	if addr == "" {
		addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	n := &clusterNode{
		broker: &broker{
			t:         t,
			dataDir:   filepath.Join(dir, "data"),
			addr:      addr,
			adminAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			config:    filepath.Join(dir, "sluice.yaml"),
			stderr:    &syncBuffer{},
		},
		id:       id,
		raftAddr: c.raftAddrs[id-1],
	}
	if voterList != nil {
		n.voters = voterList(c, id)
	} else {
		n.voters = c.defaultVoters()
	}
	quoted := make([]string, len(n.voters))
	for i, v := range n.voters {
		quoted[i] = fmt.Sprintf("%q", v)
	}
	var extra strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.opt.configs)) {
		fmt.Fprintf(&extra, "  %s: %q\n", k, c.opt.configs[k])
	}
	listeners := ""
	if c.opt.listeners != nil {
		listeners = "listeners: " + c.opt.listeners(id) + "\n"
	}
	if c.opt.rack != nil {
		listeners += fmt.Sprintf("rack: %q\n", c.opt.rack(id))
	}
	cfg := fmt.Sprintf(`node_id: %d
%sconfigs:
  broker.session.timeout.ms: "%d"
  broker.heartbeat.interval.ms: "500"
%smodules:
  metadata:
    use: raft
    raft_listen: %q
    voters: [%s]
%s`, id, listeners, clusterSessionTimeout.Milliseconds(), extra.String(), n.raftAddr, strings.Join(quoted, ", "), c.opt.modules)
	if err := os.WriteFile(n.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID("sluice-interop-cluster"),
		kgo.RetryTimeout(5*time.Second), kgo.RequestRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	n.cl = cl
	t.Cleanup(func() {
		cl.Close()
		if n.running() {
			n.stop()
		}
		n.checkLog()
		if t.Failed() || os.Getenv(envLog) == "1" {
			t.Logf("broker %d stderr (%s, raft %s, %d start(s)):\n%s", n.id, n.addr, n.raftAddr, n.starts,
				tail(n.stderr.String(), 200))
		}
	})
	c.nodes = append(c.nodes, n)
	return n
}

// raftLinks are TCP proxies on every raft link of a three-voter cluster: [i][j]
// carries broker i+1's traffic to broker j+1. voters is a newCluster voterList that
// makes them: broker i's config lists voter j (j != i) at the proxy for i->j and itself
// at its own raft listener, so each direction can be cut on its own.
type raftLinks [3][3]*tcpProxy

func (l *raftLinks) voters(t testing.TB) func(c *cluster, id int32) []string {
	return func(c *cluster, id int32) []string {
		var vs []string
		for j := int32(1); j <= 3; j++ {
			if j == id {
				vs = append(vs, fmt.Sprintf("%d@%s", j, c.raftAddrs[j-1]))
				continue
			}
			p := newTCPProxy(t, c.raftAddrs[j-1])
			l[id-1][j-1] = p
			vs = append(vs, fmt.Sprintf("%d@%s", j, p.addr()))
		}
		return vs
	}
}

// cutNode cuts (or heals) every raft link to and from broker id.
func (l *raftLinks) cutNode(id int32, on bool) {
	for i := range 3 {
		for j := range 3 {
			if p := l[i][j]; p != nil && (int32(i+1) == id || int32(j+1) == id) {
				p.setCut(on)
			}
		}
	}
}

// node returns broker id.
func (c *cluster) node(id int32) *clusterNode {
	c.t.Helper()
	if id < 1 || int(id) > len(c.nodes) {
		c.t.Fatalf("no broker %d (cluster of %d)", id, len(c.nodes))
	}
	return c.nodes[id-1]
}

// startAll starts every broker that is not running at once (voters wait for each other
// to form a quorum, so they cannot be started one by one) and waits for all to be ready.
func (c *cluster) startAll() {
	c.t.Helper()
	var started []*clusterNode
	for _, n := range c.nodes {
		if !n.running() {
			n.launch()
			started = append(started, n)
		}
	}
	for _, n := range started {
		waitReady(c.t, n.adminAddr, n.done, 60*time.Second)
	}
}

// stopAll stops every running broker with SIGTERM, all at once, and checks that each
// exits cleanly. (One signal each: a second SIGTERM kills a broker that is shutting
// down.)
func (c *cluster) stopAll() {
	c.t.Helper()
	var signalled []*clusterNode
	for _, n := range c.nodes {
		if n.running() {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			signalled = append(signalled, n)
		}
	}
	for _, n := range signalled {
		select {
		case <-n.done:
			killGroup(n.cmd.Process.Pid)
			if n.waitErr != nil {
				c.t.Errorf("broker %d did not exit cleanly after SIGTERM: %v", n.id, n.waitErr)
			}
		case <-time.After(30 * time.Second):
			_ = n.cmd.Process.Kill()
			killGroup(n.cmd.Process.Pid)
			<-n.done
			c.t.Errorf("broker %d did not exit within 30s of SIGTERM; killed it", n.id)
		}
		fmt.Fprintf(n.stderr, "----- interop: stopped (%v)\n", n.waitErr)
	}
}

// launch starts the broker process without waiting for it to be ready (broker.start
// does both).
func (b *broker) launch() {
	b.t.Helper()
	if b.running() {
		b.t.Fatalf("broker already running")
	}
	b.starts++
	args := []string{"serve", "--data-dir", b.dataDir, "--listen", b.addr, "--admin-listen", b.adminAddr}
	if b.config != "" {
		args = append(args, "--config", b.config)
	}
	fmt.Fprintf(b.stderr, "----- interop: start #%d: sluice %s\n", b.starts, strings.Join(args, " "))
	cmd := exec.Command(brokerBin, args...)
	cmd.Stdout = b.stderr
	cmd.Stderr = b.stderr
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("start broker: %v", err)
	}
	b.cmd = cmd
	b.done = make(chan struct{})
	done := b.done
	go func() {
		b.waitErr = cmd.Wait()
		close(done)
	}()
}

// running lists the nodes whose process runs.
func (c *cluster) running() []*clusterNode {
	var out []*clusterNode
	for _, n := range c.nodes {
		if n.running() {
			out = append(out, n)
		}
	}
	return out
}

// others lists the nodes but n, in c.nodes order.
func (c *cluster) others(n *clusterNode) []*clusterNode {
	var out []*clusterNode
	for _, o := range c.nodes {
		if o != n {
			out = append(out, o)
		}
	}
	return out
}

// request sends req to this broker itself (not to whichever broker kgo would pick).
func (n *clusterNode) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	seeds := n.cl.SeedBrokers()
	if len(seeds) != 1 {
		return nil, fmt.Errorf("client of broker %d has %d seeds", n.id, len(seeds))
	}
	return seeds[0].Request(ctx, req)
}

// view is what one broker's Metadata answer says about the cluster and some topics.
type view struct {
	controller int32
	brokers    []int32 // sorted
	// leaders[topic][partition] is the leader, -1 when the partition has none or is
	// answered with LEADER_NOT_AVAILABLE.
	leaders map[string]map[int32]int32
	// errs[topic] is the topic-level error, if any.
	errs map[string]error
	ids  map[string][16]byte
}

// metadata asks broker n for its Metadata view of topics (all topics when none given).
func (n *clusterNode) metadata(ctx context.Context, topics ...string) (*view, error) {
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) > 0 {
		for _, tp := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(tp)
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil // all topics
	}
	resp, err := n.request(ctx, req)
	if err != nil {
		return nil, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	v := &view{controller: mr.ControllerID, leaders: map[string]map[int32]int32{}, errs: map[string]error{},
		ids: map[string][16]byte{}}
	for _, b := range mr.Brokers {
		v.brokers = append(v.brokers, b.NodeID)
	}
	sort.Slice(v.brokers, func(i, j int) bool { return v.brokers[i] < v.brokers[j] })
	for _, tp := range mr.Topics {
		name := ""
		if tp.Topic != nil {
			name = *tp.Topic
		}
		if err := kerr.ErrorForCode(tp.ErrorCode); err != nil {
			v.errs[name] = err
			continue
		}
		v.ids[name] = tp.TopicID
		ps := map[int32]int32{}
		for _, p := range tp.Partitions {
			l := p.Leader
			if p.ErrorCode == kerr.LeaderNotAvailable.Code {
				l = -1
			}
			ps[p.Partition] = l
		}
		v.leaders[name] = ps
	}
	return v, nil
}

// pollLatest calls get (with 3s to answer) until cond accepts what it returns or timeout
// passes. It returns the last answer get gave without an error, the error of the last
// call if it failed (nil once an answer came after it), and whether cond accepted.
func pollLatest[T any](timeout time.Duration, get func(ctx context.Context) (T, error), cond func(T) bool) (last T, lastErr error, ok bool) {
	ok = pollUntil(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		v, err := get(ctx)
		if err != nil {
			lastErr = err
			return false
		}
		last, lastErr = v, nil
		return cond(v)
	})
	return last, lastErr, ok
}

// waitView polls broker n's Metadata view until cond accepts it, failing the test with
// the last view after timeout.
func (n *clusterNode) waitView(timeout time.Duration, what string, cond func(v *view) bool, topics ...string) *view {
	n.t.Helper()
	last, lastErr, ok := pollLatest(timeout, func(ctx context.Context) (*view, error) { return n.metadata(ctx, topics...) }, cond)
	if !ok {
		n.t.Fatalf("broker %d: %s: not within %s (last view %s, last error %v)", n.id, what, timeout, last, lastErr)
	}
	return last
}

func (v *view) String() string {
	if v == nil {
		return "<none>"
	}
	return fmt.Sprintf("{controller %d, brokers %v, leaders %v, errors %v}", v.controller, v.brokers, v.leaders, v.errs)
}

// leaderCounts counts the partitions of topic each broker leads (-1: leaderless).
func (v *view) leaderCounts(topic string) map[int32]int {
	out := map[int32]int{}
	for _, l := range v.leaders[topic] {
		out[l]++
	}
	return out
}

// controller asks broker n which broker is the active controller (DescribeCluster).
func (n *clusterNode) controller(ctx context.Context) (int32, []int32, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := n.request(ctx, req)
	if err != nil {
		return -1, nil, err
	}
	dr := resp.(*kmsg.DescribeClusterResponse)
	if err := kerr.ErrorForCode(dr.ErrorCode); err != nil {
		return -1, nil, err
	}
	var ids []int32
	for _, b := range dr.Brokers {
		ids = append(ids, b.NodeID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return dr.ControllerID, ids, nil
}

// waitController polls broker n's DescribeCluster until it names a controller that
// accept approves, and returns it.
func (n *clusterNode) waitController(timeout time.Duration, accept func(id int32) bool) int32 {
	n.t.Helper()
	var last int32 = -1
	var lastErr error
	ok := pollUntil(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		id, _, err := n.controller(ctx)
		last, lastErr = id, err
		return err == nil && id >= 0 && accept(id)
	})
	if !ok {
		n.t.Fatalf("broker %d: no acceptable controller within %s (last answer %d, error %v)", n.id, timeout, last, lastErr)
	}
	return last
}

// createTopic creates topic through broker n itself (the request goes to n, which
// forwards it to the controller when it is not the controller).
func (n *clusterNode) createTopic(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	// The broker's own deadline: a second before ctx's, so a broker that cannot get the
	// topic created answers with an error code (REQUEST_TIMED_OUT) before we give up.
	req.TimeoutMillis = 15000
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMillis = int32(max(time.Until(dl)-time.Second, 100*time.Millisecond).Milliseconds())
	}
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	names := make([]string, 0, len(configs))
	for k := range configs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = kmsg.StringPtr(configs[k])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := n.request(ctx, req)
	if err != nil {
		return err
	}
	cr := resp.(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 {
		return fmt.Errorf("CreateTopics answered %d topics", len(cr.Topics))
	}
	if err := kerr.ErrorForCode(cr.Topics[0].ErrorCode); err != nil {
		msg := ""
		if cr.Topics[0].ErrorMessage != nil {
			msg = ": " + *cr.Topics[0].ErrorMessage
		}
		return fmt.Errorf("%w%s", err, msg)
	}
	return nil
}

// mustCreateTopic creates topic through broker n, retrying retriable errors (a
// controller election in progress) until timeout.
func (n *clusterNode) mustCreateTopic(timeout time.Duration, topic string, partitions int32, rf int16, configs map[string]string) {
	n.t.Helper()
	var lastErr error
	ok := pollUntil(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		lastErr = n.createTopic(ctx, topic, partitions, rf, configs)
		if errors.Is(lastErr, kerr.TopicAlreadyExists) {
			// An earlier attempt that timed out on our side but was applied.
			lastErr = nil
		}
		return lastErr == nil
	})
	if !ok {
		n.t.Fatalf("create topic %q (%d partitions, RF %d) through broker %d: not within %s: %v",
			topic, partitions, rf, n.id, timeout, lastErr)
	}
}

// produceEach produces one record to each partition of topic through a client seeded
// with broker n alone, keys and values "<tag>-<partition>", and fails on any error.
func (n *clusterNode) produceEach(topic string, partitions int32, tag string) {
	n.t.Helper()
	cl := newClient(n.t, n.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(20))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for p := range partitions {
		// Keyed: a compacted topic refuses records without a key.
		v := fmt.Appendf(nil, "%s-%d", tag, p)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: v, Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		n.t.Fatalf("produce to %q through broker %d: %v", topic, n.id, err)
	}
}

// checkProducedEach reads partitions parts of topic through addr and checks that each,
// p, holds exactly the records produceEach wrote with tags, in order: tag-p for each tag.
func checkProducedEach(t *testing.T, addr, topic string, parts []int32, what string, tags ...string) {
	t.Helper()
	got := fetchAll(t, addr, topic, parts, 30*time.Second)
	for _, p := range parts {
		var vals []string
		for _, r := range got[p] {
			vals = append(vals, string(r.Value))
		}
		var want []string
		for _, tag := range tags {
			want = append(want, fmt.Sprintf("%s-%d", tag, p))
		}
		if !slices.Equal(vals, want) {
			t.Errorf("%s: partition %d holds %q, want %q", what, p, vals, want)
		}
	}
}

// partitionsOf returns 0..n-1.
func partitionsOf(n int32) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// describeQuorumRequest asks for the metadata quorum (DescribeQuorum on
// __cluster_metadata-0).
func describeQuorumRequest() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// quorumPartition checks a DescribeQuorum answer and returns its one partition.
func quorumPartition(dr *kmsg.DescribeQuorumResponse) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	if err := kerr.ErrorForCode(dr.ErrorCode); err != nil {
		return nil, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if len(dr.Topics) != 1 || len(dr.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("DescribeQuorum answered %d topics", len(dr.Topics))
	}
	p := &dr.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return nil, fmt.Errorf("DescribeQuorum partition: %w", err)
	}
	return p, nil
}

// describeQuorum asks broker n itself for the metadata quorum.
func (n *clusterNode) describeQuorum(ctx context.Context) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	resp, err := n.request(ctx, describeQuorumRequest())
	if err != nil {
		return nil, err
	}
	return quorumPartition(resp.(*kmsg.DescribeQuorumResponse))
}

// tcpProxy forwards connections from its own listener to target, and can be cut: a
// cut proxy closes the connections it was forwarding and accepts new ones but forwards
// nothing (bytes are read and dropped, as by a network that loses packets), until
// heal closes those too and it forwards again.
type tcpProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool // open connections (both ends); value: opened while cut
	closed bool
	wg     sync.WaitGroup
}

func newTCPProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		cut := p.cut
		p.conns[c] = cut
		p.wg.Add(1)
		p.mu.Unlock()
		if cut {
			go p.drop(c)
		} else {
			go p.forward(c)
		}
	}
}

// drop reads and discards everything c sends until it is closed (by heal or close).
func (p *tcpProxy) drop(c net.Conn) {
	defer p.wg.Done()
	defer p.forget(c)
	_, _ = io.Copy(io.Discard, c)
}

// forward pipes c to a new connection to the target, both ways, until either closes.
func (p *tcpProxy) forward(c net.Conn) {
	defer p.wg.Done()
	defer p.forget(c)
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.closed || p.cut {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = false
	p.mu.Unlock()
	defer p.forget(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); up.Close(); c.Close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); up.Close(); c.Close(); done <- struct{}{} }()
	<-done
	<-done
}

func (p *tcpProxy) forget(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// setCut cuts (true) or heals (false) the link. Either way the connections of the
// previous state are closed: streams cut mid-message cannot be resumed.
func (p *tcpProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut == cut {
		return
	}
	p.cut = cut
	for c := range p.conns {
		c.Close()
	}
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
