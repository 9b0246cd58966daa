package kernel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/ratelog"
	"github.com/sluicehq/sluice/internal/tlsconf"
)

// Kernel owns the listeners, connections, framing and dispatch, and the lifecycle of the
// modules composed from config.
//
// Lifecycle: New (config checked, modules decoded) → Start (listeners bound, modules
// provisioned, validated and started in dependency order, then connections accepted) →
// Shutdown (stop accepting, finish in-flight requests, stop modules in reverse order,
// clean up). A Kernel is used once.
type Kernel struct {
	cfg    *Config
	reg    *Registry
	log    *slog.Logger
	info   BrokerInfo
	metric *Metrics
	frames framePool  // reused Produce request buffers (framepool.go)
	inline inlinePool // buffers for small file ranges in responses (sendfile.go)
	// tlsBufs: write buffers of chunked responses on TLS connections (conn.go)
	tlsBufs bufWriterPool

	sections map[string]moduleSection

	// Written during Start (single goroutine), read-only afterwards.
	modules  map[string]*moduleSlot
	order    []string // roles in provision order
	handlers [maxAPIKey + 1]*handlerSlot
	authz    Authorizer
	lns      []net.Listener
	// protocols[i] is the security protocol of cfg.Listeners[i] (set by New).
	protocols []string
	listeners []*listener // parallel to lns
	tlsStore  *tlsconf.Store
	tlsServer *tls.Config        // the TLS listeners' config (nil without TLS)
	mapper    *tlsconf.Mapper    // ssl.principal.mapping.rules
	quotas    Quotas             // the quotas module; nil without
	meta      Metadata           // the metadata module; nil without (ApiVersions' finalized features)
	features  []SupportedFeature // the modules' features, by name (seam_features.go)
	authn     Authenticator      // the auth module's SASL mechanisms; nil without
	// saslMaxRecv bounds frames before authentication (sasl.server.max.receive.size).
	saslMaxRecv int32
	reauth      time.Duration // connections.max.reauth.ms; 0: sessions never expire
	failDelay   time.Duration // connection.failed.authentication.delay.ms
	adminLn     net.Listener
	adminMux    *http.ServeMux
	adminLimit  http.Handler // adminMux behind the body limits (adminlimit.go)
	adminSrv    *http.Server
	maxReq      int32
	idle        time.Duration
	// writeTimeout: see defaultWriteTimeout (tests shorten it).
	writeTimeout time.Duration
	// tlsTimeout: see tlsHandshakeTimeout (tests shorten it).
	tlsTimeout time.Duration
	// cleanupGrace: see defaultCleanupGrace (tests shorten it).
	cleanupGrace time.Duration
	// drainGrace: see requestDrainGrace (tests shorten it).
	drainGrace time.Duration

	readyFns  []func() bool
	started   atomic.Bool
	stopping  atomic.Bool
	tornDown  atomic.Bool // teardown ran (a failed Start, or Shutdown)
	dataDir   *dataDir    // datadir.go
	connID    atomic.Uint64
	conns     sync.Map // *conn → struct{}
	connWG    sync.WaitGroup
	acceptWG  sync.WaitGroup
	adminWG   sync.WaitGroup
	baseCtx   context.Context
	cancelAll context.CancelFunc

	mRequests  *Counter
	mConns     *Counter
	mBadReqs   *Counter
	mTLSFailed *Counter
	mSASLOK    prometheus.Counter
	mSASLFail  prometheus.Counter
	mAPI       *requestMetrics
	// connLog bounds the warnings of failed handshakes and authentications.
	connLog ratelog.Limiter

	// reqBudget: queued.max.request.bytes across all connections (reqbudget.go); nil
	// when unbounded (-1).
	reqBudget *requestBudget
	// limits: max.connections and friends (connlimit.go); lnLimits parallel to lns.
	limits   *connLimits
	lnLimits []*listenerLimits
	// acceptStop closes when accepting ends (Shutdown or teardown), waking an accept
	// loop that waits for a connection slot.
	acceptStop     chan struct{}
	acceptStopOnce sync.Once
	budgetLog      ratelog.Limiter // request budget waits
	limitLog       ratelog.Limiter // refused and throttled connections
	acceptLog      ratelog.Limiter // failed accepts (conn.go)
	mBudgetWaits   *Counter
	mConnRefused   *Counter
	// mConnThrottledQuota counts connections held and closed for their address's
	// connection_creation_rate quota.
	mConnThrottledQuota *Counter
	mConnThrottled      *Counter
	mAcceptErrors       *Counter
}

// DefaultQueuedMaxRequestBytes is the default of queued.max.request.bytes (Kafka's is
// -1, unbounded): 256 MiB, over twice the default socket.request.max.bytes so a
// maximum-size request never waits for an empty budget, and small enough that a
// flood of large or stalled requests cannot push a broker with a 1 GiB memory limit
// out of memory (Go's heap may reach about twice its live size between collections).
const DefaultQueuedMaxRequestBytes = 256 << 20

const maxAPIKey = 128

type handlerSlot struct {
	minV, maxV int16
	h          Handler
	owner      string
	m          apiMetrics
}

type moduleSlot struct {
	info         ModuleInfo
	mod          Module
	provisioning bool
	provisioned  bool
	started      bool
}

// New checks cfg and prepares the modules it names (decoding their sections strictly).
// Nothing is bound or started.
func New(cfg *Config, reg *Registry, log *slog.Logger) (*Kernel, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	secs, err := cfg.sections(reg)
	if err != nil {
		return nil, err
	}
	maxReq, err := cfg.brokerInt("socket.request.max.bytes", 100<<20)
	if err != nil {
		return nil, err
	}
	if maxReq <= 0 || maxReq > 1<<30 {
		return nil, fmt.Errorf("config: socket.request.max.bytes %d out of range", maxReq)
	}
	idleMs, err := cfg.brokerInt("connections.max.idle.ms", 600000)
	if err != nil {
		return nil, err
	}
	if idleMs > int64(math.MaxInt64/time.Millisecond) {
		// In nanoseconds it would wrap, to anything (a huge value became 0.45s).
		return nil, fmt.Errorf("config: connections.max.idle.ms %d out of range", idleMs)
	}
	protocols, err := listenerProtocols(cfg.Configs, cfg.Listeners)
	if err != nil {
		return nil, err
	}
	saslMax, err := cfg.brokerInt("sasl.server.max.receive.size", 512<<10)
	if err != nil {
		return nil, err
	}
	if saslMax <= 0 || saslMax > 1<<30 {
		return nil, fmt.Errorf("config: sasl.server.max.receive.size %d out of range", saslMax)
	}
	reauthMs, err := cfg.brokerInt("connections.max.reauth.ms", 0)
	if err != nil {
		return nil, err
	}
	delayMs, err := cfg.brokerInt("connection.failed.authentication.delay.ms", 100)
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]int64{"connections.max.reauth.ms": reauthMs, "connection.failed.authentication.delay.ms": delayMs} {
		if v < 0 || v > int64(math.MaxInt64/time.Millisecond) {
			return nil, fmt.Errorf("config: %s %d out of range", name, v)
		}
	}
	queued, err := cfg.brokerInt("queued.max.request.bytes", DefaultQueuedMaxRequestBytes)
	if err != nil {
		return nil, err
	}
	switch {
	case queued == 0 || queued < -1:
		return nil, fmt.Errorf("config: queued.max.request.bytes %d: want -1 (unbounded) or a positive size", queued)
	case queued > 0 && queued < maxReq:
		// Kafka's rule too: a request of socket.request.max.bytes must fit.
		return nil, fmt.Errorf("config: queued.max.request.bytes %d is smaller than socket.request.max.bytes %d", queued, maxReq)
	}
	// Validated here, applied by the process (memlimit.go).
	if _, err := cfg.MemoryLimit(nil); err != nil {
		return nil, err
	}
	limits, err := newConnLimits(cfg)
	if err != nil {
		return nil, err
	}
	var lnLimits []*listenerLimits
	for _, l := range cfg.Listeners {
		ll, err := newListenerLimits(cfg, l.Name)
		if err != nil {
			return nil, err
		}
		lnLimits = append(lnLimits, ll)
	}
	k := &Kernel{
		limits:     limits,
		lnLimits:   lnLimits,
		acceptStop: make(chan struct{}),
		budgetLog:  ratelog.Limiter{N: 1},
		limitLog:   ratelog.Limiter{N: 1},
		acceptLog:  ratelog.Limiter{N: 1, Every: acceptLogEvery},

		cfg:       cfg,
		protocols: protocols,
		connLog:   ratelog.Limiter{N: 5},

		saslMaxRecv: int32(saslMax),
		reauth:      time.Duration(reauthMs) * time.Millisecond,
		failDelay:   time.Duration(delayMs) * time.Millisecond,
		reg:         reg,
		log:         log,
		metric:      NewMetrics(),
		sections:    secs,
		modules:     map[string]*moduleSlot{},
		adminMux:    http.NewServeMux(),
		maxReq:      int32(maxReq),
		idle:        time.Duration(idleMs) * time.Millisecond,

		writeTimeout: defaultWriteTimeout,
		cleanupGrace: defaultCleanupGrace,
		drainGrace:   requestDrainGrace,
		tlsTimeout:   tlsHandshakeTimeout,
	}
	mods, err := newModules(secs, reg, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	for role, m := range mods {
		mi, _ := reg.Lookup(role + "." + secs[role].use)
		k.modules[role] = &moduleSlot{info: mi, mod: m}
	}
	if k.adminLimit, err = k.newAdminLimiter(k.adminMux); err != nil {
		return nil, err
	}
	if err := k.checkAdminExposure(); err != nil {
		return nil, err
	}
	k.mRequests = k.metric.Counter("sluice_requests_total", "Requests received.")
	k.mConns = k.metric.Counter("sluice_connections_total", "Connections accepted.")
	k.mBadReqs = k.metric.Counter("sluice_bad_requests_total", "Requests or frames rejected as malformed.")
	sasl := promauto.With(k.metric.Registerer()).NewCounterVec(prometheus.CounterOpts{Name: "sluice_sasl_authentications_total",
		Help: "SASL authentications (and re-authentications) by result."}, []string{"result"})
	k.mSASLOK, k.mSASLFail = sasl.WithLabelValues("success"), sasl.WithLabelValues("failure")
	k.mAPI = newRequestMetrics(k.metric.Registerer())
	k.mTLSFailed = k.metric.Counter("sluice_tls_handshake_failures_total", "TLS handshakes that failed (or whose client certificate mapped to no principal).")
	if queued > 0 {
		k.reqBudget = newRequestBudget(queued)
		k.metric.Gauge("sluice_request_budget_bytes", "Bytes of requests read and not yet answered, reserved from queued.max.request.bytes.",
			func() float64 { return float64(k.reqBudget.inUse()) })
	}
	k.mBudgetWaits = k.metric.Counter("sluice_request_budget_waits_total", "Frames whose reading waited for queued.max.request.bytes.")
	k.mAcceptErrors = k.metric.Counter("sluice_accept_errors_total", "Failed accepts (EMFILE, ENFILE...), each followed by a back-off.")
	k.mConnRefused = k.metric.Counter("sluice_connections_refused_total", "Connections closed at once for max.connections.per.ip.")
	k.mConnThrottledQuota = k.metric.Counter("sluice_connections_quota_throttled_total",
		"Connections over their address's connection_creation_rate quota: held unread for the throttle time, then closed.")
	k.mConnThrottled = k.metric.Counter("sluice_connection_accept_waits_total", "Accepts delayed by max.connections or max.connection.creation.rate.")
	registerRuntimeMetrics(k.metric)
	k.metric.Collect("sluice_connections_active", "Open client connections by listener.", KindGauge, []string{"listener"},
		func(emit func(float64, ...string)) {
			n := map[string]int{}
			for _, l := range k.cfg.Listeners {
				n[l.Name] = 0
			}
			k.conns.Range(func(c, _ any) bool { n[c.(*conn).info.Listener]++; return true })
			for l, v := range n {
				emit(float64(v), l)
			}
		})
	return k, nil
}

// Addrs returns the bound client listener addresses (after Start).
func (k *Kernel) Addrs() []net.Addr {
	out := make([]net.Addr, len(k.lns))
	for i, l := range k.lns {
		out[i] = l.Addr()
	}
	return out
}

// AdminAddr returns the bound admin HTTP address (after Start).
func (k *Kernel) AdminAddr() net.Addr { return k.adminLn.Addr() }

// Info returns this broker's identity (after Start binds the listeners).
func (k *Kernel) Info() BrokerInfo { return k.info }

// Module returns the module serving role (for tests and the admin API).
func (k *Kernel) Module(role string) Module {
	if s := k.modules[role]; s != nil {
		return s.mod
	}
	return nil
}

// Start binds the listeners, provisions, validates and starts every module, then starts
// accepting connections. On error everything started is stopped and cleaned up.
func (k *Kernel) Start(ctx context.Context) (err error) {
	k.baseCtx, k.cancelAll = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			k.teardown(context.Background())
		}
	}()
	if err := k.openDataDir(); err != nil { // datadir.go: lock, free-space guard
		return err
	}
	k.info = BrokerInfo{NodeID: k.cfg.NodeID, DataDir: k.cfg.DataDir, Rack: k.cfg.Rack, StaticConfigs: copyMap(k.cfg.Configs), Disk: k.diskSpace()}
	if err := k.setupTLS(); err != nil {
		return err
	}
	for i, lc := range k.cfg.Listeners {
		ln, err := net.Listen("tcp", lc.Address)
		if err != nil {
			return fmt.Errorf("listener %s: %w", lc.Name, err)
		}
		k.lns = append(k.lns, ln)
		l := &listener{name: lc.Name, protocol: k.protocols[i]}
		if protocolTLS(l.protocol) {
			l.tls = k.tlsServer
		}
		k.listeners = append(k.listeners, l)
		adv := lc.Advertised
		if adv == "" {
			adv = ln.Addr().String()
		}
		host, portStr, _ := net.SplitHostPort(adv)
		port, _ := strconv.Atoi(portStr)
		if port == 0 {
			_, bound, _ := net.SplitHostPort(ln.Addr().String())
			port, _ = strconv.Atoi(bound)
		}
		k.info.Listeners = append(k.info.Listeners, ListenerInfo{Name: lc.Name, Host: host, Port: int32(port), Protocol: l.protocol})
	}
	// Describe the settings the config file holds outside `configs:` by their Kafka
	// names, so DescribeConfigs shows them (read-only).
	var lsn []string
	for i, l := range k.info.Listeners {
		lsn = append(lsn, fmt.Sprintf("%s://%s", l.Name, k.lns[i].Addr()))
	}
	abs, err := filepath.Abs(k.cfg.DataDir)
	if err != nil {
		abs = k.cfg.DataDir
	}
	for name, v := range map[string]string{
		"node.id": strconv.Itoa(int(k.cfg.NodeID)), "broker.id": strconv.Itoa(int(k.cfg.NodeID)),
		"listeners": strings.Join(lsn, ","),
	} {
		k.info.StaticConfigs[name] = v
	}
	// log.dirs set in `configs:` places partition data (several dirs: JBOD); the
	// data dir otherwise.
	if k.info.StaticConfigs["log.dirs"] == "" {
		k.info.StaticConfigs["log.dirs"] = abs
	}
	aln, err := net.Listen("tcp", k.cfg.AdminListen)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	k.adminLn = aln

	if err := k.registerAPIVersions(); err != nil {
		return err
	}
	roles := slices.Sorted(maps.Keys(k.modules))
	for _, r := range roles {
		if _, err := k.provision(r); err != nil {
			return err
		}
	}
	for _, r := range k.order {
		if v, ok := k.modules[r].mod.(Validator); ok {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("module %s: validate: %w", k.modules[r].info.ID, err)
			}
		}
	}
	k.authz = AllowAll{}
	if a, ok := k.Module("auth").(Authorizer); ok {
		k.authz = a
	}
	if q, ok := k.Module("quotas").(Quotas); ok {
		k.quotas = q
	}
	if m, ok := k.Module("metadata").(Metadata); ok {
		k.meta = m
	}
	if err := k.gatherFeatures(); err != nil {
		return err
	}
	if a, ok := k.Module("auth").(Authenticator); ok {
		k.authn = a
		for _, c := range []Claim{k.saslHandshakeClaim(), k.saslAuthenticateClaim()} {
			if err := k.claim("kernel", c.Key.Int16(), c.Min, c.Max, c.Handler); err != nil {
				return fmt.Errorf("claim %s: %w", c.Key.Name(), err)
			}
		}
	}
	if err := k.checkSASLListeners(); err != nil {
		return err
	}
	for _, r := range k.order {
		s := k.modules[r]
		if st, ok := s.mod.(Starter); ok {
			if err := st.Start(ctx); err != nil {
				return fmt.Errorf("module %s: start: %w", s.info.ID, err)
			}
		}
		s.started = true
		if rd, ok := s.mod.(Readier); ok {
			k.readyFns = append(k.readyFns, rd.Ready)
		}
	}
	k.startAdmin()
	for i, ln := range k.lns {
		k.acceptWG.Add(1)
		go k.acceptLoop(ln, k.listeners[i], k.lnLimits[i])
	}
	k.started.Store(true)
	k.log.Info("broker started", "node_id", k.info.NodeID, "listeners", k.Addrs(), "admin", k.adminLn.Addr().String(), "data_dir", k.cfg.DataDir)
	return nil
}

// provision provisions the module of role (and, through Lookup, its dependencies).
func (k *Kernel) provision(role string) (Module, error) {
	s := k.modules[role]
	if s == nil {
		return nil, fmt.Errorf("no module for role %q", role)
	}
	if s.provisioned {
		return s.mod, nil
	}
	if s.provisioning {
		return nil, fmt.Errorf("module %s: dependency cycle", s.info.ID)
	}
	s.provisioning = true
	if p, ok := s.mod.(Provisioner); ok {
		if err := p.Provision(&modContext{k: k, id: s.info.ID}); err != nil {
			s.provisioning = false
			return nil, fmt.Errorf("module %s: provision: %w", s.info.ID, err)
		}
	}
	s.provisioning = false
	s.provisioned = true
	k.order = append(k.order, role)
	return s.mod, nil
}

// Ready reports whether the broker serves: started, not stopping, every module ready.
func (k *Kernel) Ready() bool {
	if !k.started.Load() || k.stopping.Load() {
		return false
	}
	for _, f := range k.readyFns {
		if !f() {
			return false
		}
	}
	return true
}

// requestDrainGrace bounds how long Shutdown lets in-flight requests finish before it
// cancels them: a produce waiting for its acks or a long-poll fetch ends within it,
// while a request parked for up to a client's timeout (a JoinGroup waiting for its
// rebalance, with kafka-go's 30 s) must not eat the modules' share of the shutdown
// deadline.
const requestDrainGrace = 5 * time.Second

// Shutdown stops accepting, lets in-flight requests finish (for requestDrainGrace,
// bounded by ctx; then they are cancelled), then stops modules in reverse provision
// order and cleans them up.
func (k *Kernel) Shutdown(ctx context.Context) error {
	if !k.stopping.CompareAndSwap(false, true) {
		return nil
	}
	k.log.Info("broker shutting down")
	k.stopAccepting()
	for _, ln := range k.lns {
		ln.Close()
	}
	k.acceptWG.Wait()
	k.conns.Range(func(c, _ any) bool { c.(*conn).stopReading(); return true })
	done := make(chan struct{})
	go func() { k.connWG.Wait(); close(done) }()
	drain := time.NewTimer(k.drainGrace)
	defer drain.Stop()
	select {
	case <-done:
	case <-drain.C:
		k.log.Warn("shutdown: in-flight requests did not finish in time; cancelling them and closing connections",
			"grace", k.drainGrace)
		k.cancelAll()
		k.conns.Range(func(c, _ any) bool { c.(*conn).nc.Close(); return true })
		<-done
	case <-ctx.Done():
		k.log.Warn("shutdown: in-flight requests did not finish in time; closing connections")
		k.cancelAll()
		k.conns.Range(func(c, _ any) bool { c.(*conn).nc.Close(); return true })
		<-done
	}
	err := k.teardown(ctx)
	k.log.Info("broker stopped")
	return err
}

// defaultCleanupGrace is how long a module's Cleanup may still take once the shutdown's
// context is done.
const defaultCleanupGrace = 5 * time.Second

// errCleanupAbandoned: a module's Cleanup did not return in time; the shutdown went on
// without it (its goroutine is left to the process's exit).
var errCleanupAbandoned = errors.New("did not finish before the shutdown deadline; abandoned")

// runCleanup runs c.Cleanup and waits for it until ctx is done and then cleanupGrace
// more. Cleanup takes no context, and one that blocks must not keep the broker from
// exiting: badger's Close retried a memtable flush forever once the data dir was
// deleted under a running broker.
func (k *Kernel) runCleanup(ctx context.Context, c CleanerUpper) error {
	done := make(chan error, 1)
	go func() { done <- c.Cleanup() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(k.cleanupGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errCleanupAbandoned
	}
}

// teardown stops admin HTTP and the modules, reverse order, then cleans up.
func (k *Kernel) teardown(ctx context.Context) error {
	// Once only: a Shutdown after a failed Start (a deferred Shutdown) must not stop or
	// clean up the modules a second time.
	if !k.tornDown.CompareAndSwap(false, true) {
		return nil
	}
	k.stopAccepting()
	if k.cancelAll != nil {
		k.cancelAll()
	}
	if k.adminSrv != nil {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if k.adminSrv.Shutdown(sctx) != nil {
			// Connections still active (or half-sent) after the grace period are closed,
			// so no admin goroutine outlives the kernel.
			_ = k.adminSrv.Close()
		}
		cancel()
		k.adminWG.Wait()
	} else if k.adminLn != nil {
		k.adminLn.Close()
	}
	for _, ln := range k.lns {
		ln.Close()
	}
	var errs []error
	for i := len(k.order) - 1; i >= 0; i-- {
		s := k.modules[k.order[i]]
		if st, ok := s.mod.(Stopper); ok && s.started {
			if err := st.Stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("module %s: stop: %w", s.info.ID, err))
			}
		}
		s.started = false
	}
	// Cleanup runs for every module, provisioned or not (it must cope with a failed
	// Provision), in reverse order with the unprovisioned ones last.
	cleaned := map[string]bool{}
	cleanup := func(role string) {
		if cleaned[role] {
			return
		}
		cleaned[role] = true
		if c, ok := k.modules[role].mod.(CleanerUpper); ok {
			if err := k.runCleanup(ctx, c); err != nil {
				errs = append(errs, fmt.Errorf("module %s: cleanup: %w", k.modules[role].info.ID, err))
			}
		}
	}
	for i := len(k.order) - 1; i >= 0; i-- {
		cleanup(k.order[i])
	}
	for role := range k.modules {
		cleanup(role)
	}
	k.closeDataDir()
	for _, e := range errs {
		k.log.Error("shutdown", "err", e)
	}
	return errors.Join(errs...)
}

// stopAccepting wakes accept loops waiting for a connection slot, for good.
func (k *Kernel) stopAccepting() {
	k.acceptStopOnce.Do(func() { close(k.acceptStop) })
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// modContext is the Context a module gets during Provision.
type modContext struct {
	k  *Kernel
	id string
}

func (c *modContext) Logger() *slog.Logger { return c.k.log.With("module", c.id) }
func (c *modContext) Broker() BrokerInfo   { return c.k.info }
func (c *modContext) Metrics() *Metrics    { return c.k.metric }
func (c *modContext) Registry() *Registry  { return c.k.reg } // GuestRegistry
func (c *modContext) Lookup(role string) (Module, error) {
	return c.k.provision(role)
}
func (c *modContext) HandleHTTP(pattern string, h http.Handler) { c.k.adminMux.Handle(pattern, h) }
func (c *modContext) Handle(key, minV, maxV int16, h Handler) error {
	return c.k.claim(c.id, key, minV, maxV, h)
}

// claim registers a handler for an API key.
func (k *Kernel) claim(owner string, key, minV, maxV int16, h Handler) error {
	if key < 0 || key > maxAPIKey {
		return fmt.Errorf("api key %d out of range", key)
	}
	if minV < 0 || maxV < minV {
		return fmt.Errorf("api key %d: bad version range %d-%d", key, minV, maxV)
	}
	// The connection decodes with kmsg: a key or version it cannot decode would panic
	// there, outside any handler.
	if body := kmsg.RequestForKey(key); body == nil {
		return fmt.Errorf("api key %d: unknown to the protocol decoder", key)
	} else if maxV > body.MaxVersion() {
		return fmt.Errorf("api key %d: version %d is past the newest the decoder knows (%d)", key, maxV, body.MaxVersion())
	}
	if prev := k.handlers[key]; prev != nil {
		return fmt.Errorf("api key %d already claimed by %s", key, prev.owner)
	}
	k.handlers[key] = &handlerSlot{minV: minV, maxV: maxV, h: h, owner: owner, m: k.mAPI.forKey(key)}
	return nil
}

var (
	_ Context       = (*modContext)(nil)
	_ GuestRegistry = (*modContext)(nil)
)
