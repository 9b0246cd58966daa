package metadata

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/internal/interbroker"
	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// ModuleID is this module's ID.
const ModuleID = "metadata.raft"

// Errors of the module.
var (
	// ErrNotController: this broker is not the raft leader, so it cannot write metadata.
	ErrNotController = errors.New("metadata: this broker is not the controller")
	// ErrNotRunning: the module is not started, or is stopping.
	ErrNotRunning = errors.New("metadata: not running")
	// ErrClusterIDMismatch: the configured cluster id differs from the one in the log.
	ErrClusterIDMismatch = errors.New("metadata: cluster id mismatch")
	// ErrUnsupportedFeatures: the cluster finalized a feature level this broker does not
	// support (an older broker, or one composed without the module that implements
	// it), so the controller refused its registration and it does not start.
	ErrUnsupportedFeatures = errors.New("metadata: this broker does not support the cluster's feature levels")
	// ErrConfig: the module's configuration is invalid.
	ErrConfig = errors.New("metadata: invalid config")
)

// Info describes the module for the registry.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: ModuleID, New: func() kernel.Module { return new(Module) }}
}

// Module is the raft-backed metadata module. Its exported fields are its config section.
//
// Module itself holds the config, the lifecycle the kernel drives (Provision, Start,
// Stop, Cleanup), the kernel interfaces other modules assert, and the admin handlers
// (the NN_*.go claims, topics.go, configs.go). The raft node and proposing are its
// node field (node.go); the controller's duties are ctl (controller, sessions.go);
// this broker's registration and heartbeats are life (lifecycle, lifecycle.go); the
// pure image is package image and the RPC transport package rpc. Lock order:
// DESIGN.md ("Lock order"); groupConfigsMu, the only lock declared on Module itself,
// is taken before any other.
type Module struct {
	// Voters is the voter set a new metadata log starts with, "id@host:port" each, and
	// the servers a broker not yet in the log asks to join; once the log exists its
	// voters change only with AddRaftVoter/RemoveRaftVoter (docs/quorum.md). Default:
	// this node alone.
	Voters []string `yaml:"voters"`
	// RaftListen is host:port for raft's TCP transport. Empty with a single voter that
	// has no address: raft's in-memory transport.
	RaftListen string `yaml:"raft_listen"`
	// HeartbeatTimeout is how long a follower goes without hearing from the raft
	// leader before it stands for election. Zero: 50ms for a single voter without a
	// raft address, raft's 1s otherwise. (The raft timeouts' zero defaults:
	// raftConfig.)
	HeartbeatTimeout time.Duration `yaml:"heartbeat_timeout"`
	// ElectionTimeout is how long a candidate waits for votes before it tries again.
	// Zero: 50ms for a single voter without a raft address, raft's 1s otherwise.
	ElectionTimeout time.Duration `yaml:"election_timeout"`
	// LeaseTimeout is how long a raft leader keeps leading without a quorum's
	// contact; at most HeartbeatTimeout. Zero: 50ms for a single voter without a raft
	// address, raft's 500ms otherwise.
	LeaseTimeout time.Duration `yaml:"lease_timeout"`
	// CommitTimeout is how long an idle leader waits before telling followers what
	// committed: the metadata propagation delay to other brokers. Zero: 5ms for a
	// single voter without a raft address, 10ms otherwise.
	CommitTimeout time.Duration `yaml:"commit_timeout"`
	// SnapshotThreshold is how many entries since the last snapshot trigger a new one
	// (default 8192).
	SnapshotThreshold uint64 `yaml:"snapshot_threshold"`
	// SnapshotInterval is how often SnapshotThreshold is checked (default 2m).
	SnapshotInterval time.Duration `yaml:"snapshot_interval"`

	// node is the raft node this module runs and the services every part shares:
	// the hub, proposing (locally or forwarded), tracked goroutines (node.go).
	node node
	ctl  *controller // the controller's duties while this node leads raft (controller.go)
	// quotas charges topic and partition mutations (quotas.go); nil without a quota
	// module. Set during Provision.
	quotas kernel.Quotas
	life   *lifecycle // this broker's registration, heartbeats, controlled shutdown (lifecycle.go)

	dir   string // data_dir/metadata
	fsm   *fsm
	store *boltStore
	logs  raft.LogStore
	snaps raft.SnapshotStore

	stopLoops context.CancelFunc
	shutdown  chan struct{} // closed once raft has shut down

	// groupConfigsMu serialises writes of group configs (groupconfigs.go).
	groupConfigsMu sync.Mutex

	// raftTLS is the raft port's mutual TLS when brokers talk TLS to each other
	// (SSL or SASL_SSL inter-broker listener); nil: plaintext. Set in Provision.
	raftTLS *rpc.TLS
}

// setupSecurity resolves the inter-broker security (package interbroker): with a TLS
// inter-broker listener the raft port (raft and the controller RPC) is mutual TLS; a
// broker of a cluster on a SASL inter-broker listener must have its credentials.
func (m *Module) setupSecurity(bi kernel.BrokerInfo) error {
	sec, err := interbroker.New(bi, m.node.log.With("component", "tls"))
	if err != nil {
		return fmt.Errorf("inter-broker security: %w", err)
	}
	if len(m.node.voters) > 1 || !m.node.isVoter() {
		// A single node never dials another broker: it may run a SASL listener
		// without credentials of its own.
		if err := sec.CheckCredentials(); err != nil {
			return err
		}
	}
	if !sec.TLS() {
		return nil
	}
	srv, err := sec.RaftServerTLS()
	if err != nil {
		return err
	}
	m.raftTLS = &rpc.TLS{Server: srv, Client: sec.ClientTLS}
	return nil
}

// voter is one member of the static voter set.
type voter struct {
	ID   int32
	Addr string // host:port; "" = in-memory transport (single voter only)
}

func parseVoter(s string) (voter, error) {
	id, addr, ok := strings.Cut(s, "@")
	n, err := strconv.ParseInt(id, 10, 32)
	if !ok || err != nil || n < 0 || addr == "" {
		return voter{}, fmt.Errorf("voter %q: want id@host:port: %w", s, ErrConfig)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return voter{}, fmt.Errorf("voter %q: %w: %v", s, ErrConfig, err)
	}
	return voter{ID: int32(n), Addr: addr}, nil
}

// Provision opens the raft stores and claims the module's API keys.
func (m *Module) Provision(ctx kernel.Context) error {
	m.node.kctx = ctx
	m.node.log = ctx.Logger()
	bi := ctx.Broker()
	m.node.nodeID = bi.NodeID
	if m.node.rand == nil {
		m.node.rand = rand.Reader
	}
	m.node.hub = newHub()
	m.fsm = &fsm{log: m.node.log, hub: m.node.hub}
	m.shutdown = make(chan struct{})
	m.ctl = newController(&m.node)
	m.node.wakeController = m.ctl.wake
	m.life = newLifecycle(&m.node, m.ctl)
	if err := m.parseVoters(); err != nil {
		return err
	}
	if err := m.setupSecurity(bi); err != nil {
		return err
	}
	m.node.rpc = rpc.NewClient(ErrNotRunning, m.raftTLS)
	// The config file's `configs:` section holds Kafka broker configs: an unknown name
	// or a bad value is a startup error, not a silently ignored setting.
	if err := kconfig.ValidateStaticBrokers(bi.StaticConfigs); err != nil {
		return fmt.Errorf("configs: %w", err)
	}
	if bi.DataDir == "" {
		return fmt.Errorf("data_dir is empty: %w", ErrConfig)
	}
	m.dir = filepath.Join(bi.DataDir, "metadata")
	store, err := openBoltStore(filepath.Join(m.dir, "raft.db"))
	if err != nil {
		return err
	}
	m.store = store
	m.logs, err = raft.NewLogCache(512, store)
	if err != nil {
		return err
	}
	m.snaps, err = raft.NewFileSnapshotStoreWithLogger(filepath.Join(m.dir, "snapshots"), 2, newHCLog(m.node.log, len(m.node.voters) == 1, m.node.stopping.Load))
	if err != nil {
		return fmt.Errorf("open snapshot store: %w", err)
	}
	if err := kernel.ClaimAll(ctx,
		claimMetadata(m),
		claimCreateTopics(m),
		claimDeleteTopics(m),
		claimDescribeConfigs(m),
		claimAlterConfigs(m),
		claimCreatePartitions(m),
		claimIncrementalAlterConfigs(m),
		claimDescribeCluster(m),
		claimDescribeQuorum(m),
		claimElectLeaders(m),
		claimUpdateFeatures(m),
		claimDescribeTopicPartitions(m),
		claimUnregisterBroker(m),
		claimListConfigResources(m),
		claimAlterPartitionReassignments(m),
		claimListPartitionReassignments(m),
		claimAddRaftVoter(m),
		claimRemoveRaftVoter(m),
		claimUpdateRaftVoter(m),
	); err != nil {
		return err
	}
	if mt := ctx.Metrics(); mt != nil {
		m.registerMetrics(mt)
	}
	return nil
}

// voterSet parses Voters as node nodeID sees them: with none, nodeID alone at
// raft_listen.
func (m *Module) voterSet(nodeID int32) ([]voter, error) {
	var out []voter
	seen := map[int32]bool{}
	for _, s := range m.Voters {
		v, err := parseVoter(s)
		if err != nil {
			return nil, err
		}
		if seen[v.ID] {
			return nil, fmt.Errorf("voter %d listed twice: %w", v.ID, ErrConfig)
		}
		seen[v.ID] = true
		out = append(out, v)
	}
	if len(out) == 0 {
		out = []voter{{ID: nodeID, Addr: m.RaftListen}}
	}
	return out, nil
}

func (m *Module) parseVoters() error {
	vs, err := m.voterSet(m.node.nodeID)
	m.node.voters = vs
	return err
}

// selfIn returns node id's entry in voters.
func selfIn(voters []voter, id int32) (voter, bool) {
	for _, v := range voters {
		if v.ID == id {
			return v, true
		}
	}
	return voter{}, false
}

// self returns this node's voter entry.
func (nd *node) self() (voter, bool) { return selfIn(nd.voters, nd.nodeID) }

// isVoter reports whether this node is in the static voter set.
func (nd *node) isVoter() bool {
	_, ok := nd.self()
	return ok
}

// Check checks the voter set and the raft settings from the config file alone,
// before anything is provisioned (kernel.Checker); Validate checks them again on the
// provisioned module.
func (m *Module) Check(cc kernel.CheckContext) error {
	voters, err := m.voterSet(cc.NodeID)
	if err != nil {
		return err
	}
	return m.checkSettings(cc.NodeID, voters)
}

// Validate checks the voter set and the raft settings.
func (m *Module) Validate() error { return m.checkSettings(m.node.nodeID, m.node.voters) }

// checkSettings checks voters and the raft settings as node nodeID would run them.
func (m *Module) checkSettings(nodeID int32, voters []voter) error {
	me, ok := selfIn(voters, nodeID)
	if !ok {
		// A non-voter: it follows the log over raft, so it needs its own raft port and
		// the voters' addresses to ask to be added.
		if m.RaftListen == "" {
			return fmt.Errorf("node %d is not in voters %v: a non-voting broker needs raft_listen: %w", nodeID, m.Voters, ErrConfig)
		}
		if _, _, err := net.SplitHostPort(m.RaftListen); err != nil {
			return fmt.Errorf("raft_listen %q: %w: %v", m.RaftListen, ErrConfig, err)
		}
		for _, v := range voters {
			if v.Addr == "" {
				return fmt.Errorf("voter %d has no address: %w", v.ID, ErrConfig)
			}
		}
	} else if len(voters) > 1 {
		for _, v := range voters {
			if v.Addr == "" {
				return fmt.Errorf("voter %d has no address: %w", v.ID, ErrConfig)
			}
		}
		if m.RaftListen == "" && me.Addr == "" {
			return fmt.Errorf("raft_listen is required with several voters: %w", ErrConfig)
		}
	}
	if err := raft.ValidateConfig(m.raftSettings(nodeID, voters)); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// defaultClusterCommitTimeout is raft's CommitTimeout with more than one voter (or
// on a non-voter); see raftConfig.
const defaultClusterCommitTimeout = 10 * time.Millisecond

// raftConfig is raft's configuration for this node, with its logger.
func (m *Module) raftConfig() *raft.Config {
	c := m.raftSettings(m.node.nodeID, m.node.voters)
	c.Logger = newHCLog(m.node.log, len(m.node.voters) == 1 && m.node.isVoter(), m.node.stopping.Load)
	return c
}

// raftSettings is raft's configuration for node nodeID among voters, without a
// logger: the file's settings over the defaults.
func (m *Module) raftSettings(nodeID int32, voters []voter) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(strconv.FormatInt(int64(nodeID), 10))
	hb, el, lease, commit := 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond, 5*time.Millisecond
	// A single voter with a raft address may be joined by others (AddRaftVoter): it
	// runs with the cluster's timeouts from the start, since raft cannot change the
	// leader lease later (a 50ms lease would make a leader of several voters step
	// down between heartbeats).
	if me, isVoter := selfIn(voters, nodeID); len(voters) > 1 || !isVoter || me.Addr != "" || m.RaftListen != "" {
		// Raft's own timeouts, except the commit timeout: a follower learns that an
		// entry committed with the leader's next AppendEntries, which an idle leader
		// sends only after CommitTimeout (raft's default 50ms). That delay is the
		// metadata propagation delay to every other broker (a created topic, a new
		// leader): 10ms cuts it from ~85ms to ~10ms (docs/BENCHMARKS.md) for ~100
		// small RPCs per second per follower when idle.
		hb, el, lease, commit = c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, defaultClusterCommitTimeout
	}
	c.HeartbeatTimeout = orDefault(m.HeartbeatTimeout, hb)
	c.ElectionTimeout = orDefault(m.ElectionTimeout, el)
	c.LeaderLeaseTimeout = orDefault(m.LeaseTimeout, lease)
	c.CommitTimeout = orDefault(m.CommitTimeout, commit)
	c.SnapshotInterval = orDefault(m.SnapshotInterval, c.SnapshotInterval)
	if m.SnapshotThreshold > 0 {
		c.SnapshotThreshold = m.SnapshotThreshold
	}
	c.NoLegacyTelemetry = true
	return c
}

// newTransport returns raft's transport: in memory for a single voter without an
// address; otherwise a NetworkTransport over rpc.Mux, which also serves the
// controller RPC on the same port (ctx bounds the RPC handlers).
func (m *Module) newTransport(ctx context.Context) (raft.Transport, error) {
	me, _ := m.node.self()
	bind := m.RaftListen
	if bind == "" {
		bind = me.Addr
	}
	if bind == "" { // single voter, nothing to listen on
		_, t := raft.NewInmemTransport(raft.ServerAddress("inmem-node-" + strconv.FormatInt(int64(m.node.nodeID), 10)))
		return t, nil
	}
	var advertise net.Addr
	if me.Addr != "" {
		a, err := net.ResolveTCPAddr("tcp", me.Addr)
		if err != nil {
			return nil, fmt.Errorf("resolve voter address %s: %w", me.Addr, err)
		}
		if !a.IP.IsUnspecified() && a.Port != 0 {
			advertise = a
		}
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", bind, err)
	}
	if advertise == nil {
		if a, ok := ln.Addr().(*net.TCPAddr); !ok || a.IP.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("raft transport on %s: the address is not advertisable (give a host): %w", bind, ErrConfig)
		}
	}
	mux := rpc.NewMux(ln, advertise, m.node.log, func(c net.Conn) { rpc.ServeConn(ctx, c, m.node.log, m.ctl.handleRPC) }, m.raftTLS)
	m.node.mux = mux
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  mux,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  newHCLog(m.node.log, false, m.node.stopping.Load),
	}), nil
}

func (m *Module) bootstrapConfiguration(trans raft.Transport) raft.Configuration {
	var c raft.Configuration
	for _, v := range m.node.voters {
		addr := raft.ServerAddress(v.Addr)
		if v.ID == m.node.nodeID {
			addr = trans.LocalAddr()
		}
		c.Servers = append(c.Servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(strconv.FormatInt(int64(v.ID), 10)),
			Address:  addr,
		})
	}
	return c
}

// Start starts raft (bootstrapping a new log), waits for the log to be applied and
// returns once this broker is registered in the image.
func (m *Module) Start(ctx context.Context) error {
	conf := m.raftConfig()
	loopCtx, cancel := context.WithCancel(context.Background())
	m.stopLoops = cancel
	trans, err := m.newTransport(loopCtx)
	if err != nil {
		return err
	}
	if m.life.incarnation, err = m.node.newUUID(); err != nil {
		closeTransport(trans)
		return err
	}
	has, err := raft.HasExistingState(m.logs, m.store, m.snaps)
	if err != nil {
		closeTransport(trans)
		return fmt.Errorf("read raft state: %w", err)
	}
	if !has && m.node.isVoter() {
		if err := raft.BootstrapCluster(conf, m.logs, m.store, m.snaps, trans, m.bootstrapConfiguration(trans)); err != nil {
			closeTransport(trans)
			return fmt.Errorf("bootstrap metadata log: %w", err)
		}
		m.node.log.Info("bootstrapped metadata log", "voters", len(m.node.voters))
	}
	r, err := raft.NewRaft(conf, m.fsm, m.logs, m.store, m.snaps, trans)
	if err != nil {
		closeTransport(trans)
		return fmt.Errorf("start raft: %w", err)
	}
	m.node.trans = trans
	m.node.raft.Store(r)
	if !m.node.goTracked(func() { m.ctl.leaderLoop(loopCtx, r) }) {
		return ErrNotRunning
	}
	// Before registering: a voter whose address moved is not caught up until the
	// controller knows where it is.
	if addr := m.voterAddr(trans); addr != "" && !m.node.goTracked(func() { m.ctl.announceAddress(loopCtx, r, addr) }) {
		return ErrNotRunning
	}
	if !m.node.isVoter() {
		if err := m.life.joinAsObserver(ctx); err != nil {
			return fmt.Errorf("join the metadata quorum as non-voter %d: %w", m.node.nodeID, err)
		}
	}
	if err := m.life.register(ctx); err != nil {
		return fmt.Errorf("register broker %d: %w", m.node.nodeID, err)
	}
	if !m.node.goTracked(func() { m.life.heartbeatLoop(loopCtx) }) {
		return ErrNotRunning
	}
	im := m.node.hub.image()
	m.node.log.Info("metadata ready", "cluster_id", im.ClusterID, "version", im.Version, "topics", im.NumTopics())
	return nil
}

// voterAddr is the raft address this node announces as a voter: its own entry in
// the voters setting (what the operator wrote, a host name kept as such), else its
// transport's address (what it joined with as an observer before being promoted);
// "" without a network transport.
func (m *Module) voterAddr(trans raft.Transport) string {
	if !m.node.networked() {
		return ""
	}
	if me, ok := m.node.self(); ok && me.Addr != "" {
		return me.Addr
	}
	return string(trans.LocalAddr())
}

func closeTransport(t raft.Transport) {
	if c, ok := t.(raft.WithClose); ok {
		_ = c.Close()
	}
}

// goTracked runs fn on a goroutine that Stop waits for; false once stopping.
func (nd *node) goTracked(fn func()) bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.stopped {
		return false
	}
	nd.wg.Add(1)
	go func() {
		defer nd.wg.Done()
		fn()
	}()
	return true
}

// Stop shuts raft down and waits for the module's goroutines; ctx bounds the wait
// (Cleanup finishes it).
func (m *Module) Stop(ctx context.Context) error {
	if !m.node.isStopped() {
		m.life.controlledShutdown(ctx)
	}
	m.beginStop()
	select {
	case <-m.shutdown:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginStop starts the shutdown once; m.shutdown is closed when it is complete.
func (m *Module) beginStop() {
	m.node.mu.Lock()
	if m.node.stopped {
		m.node.mu.Unlock()
		return
	}
	m.node.stopped = true
	m.node.stopping.Store(true)
	m.node.mu.Unlock()
	if m.stopLoops != nil {
		m.stopLoops()
	}
	if m.node.rpc != nil {
		m.node.rpc.Close()
	}
	go func() {
		defer close(m.shutdown)
		if r := m.node.raft.Load(); r != nil {
			if err := r.Shutdown().Error(); err != nil {
				m.node.log.Warn("raft shutdown", "err", err)
			}
			closeTransport(m.node.trans)
		}
		m.node.wg.Wait()
		m.node.hub.closeAll()
	}()
}

// Cleanup stops what is still running and closes the stores. It works after a failed
// Provision too.
func (m *Module) Cleanup() error {
	if m.shutdown != nil {
		m.beginStop()
		<-m.shutdown
	}
	if m.store != nil {
		err := m.store.Close()
		m.store = nil
		return err
	}
	return nil
}

// Image returns the current metadata image (an empty one before Start).
func (m *Module) Image() *kernel.Image { return m.node.hub.image() }

// Subscribe calls fn with the current image and then every new one, in order, from one
// goroutine. cancel stops it and waits for a running fn; it must not be called from fn.
func (m *Module) Subscribe(fn func(*kernel.Image)) (cancel func()) { return m.node.hub.subscribe(fn) }

// Ready reports whether the metadata log has a leader and this broker is registered.
func (m *Module) Ready() bool {
	r := m.node.raft.Load()
	if r == nil || !m.life.registered.Load() {
		return false
	}
	addr, _ := r.LeaderWithID()
	return addr != ""
}

var (
	_ kernel.Provisioner  = (*Module)(nil)
	_ kernel.Validator    = (*Module)(nil)
	_ kernel.Checker      = (*Module)(nil)
	_ kernel.Starter      = (*Module)(nil)
	_ kernel.Stopper      = (*Module)(nil)
	_ kernel.CleanerUpper = (*Module)(nil)
	_ kernel.Metadata     = (*Module)(nil)
	_ kernel.TopicCreator = (*Module)(nil)
)
