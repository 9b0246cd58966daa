// Assignor plugins: server-side assignors of KIP-848 groups served by separate
// processes (plugins/assignor, hashicorp/go-plugin over gRPC with AutoMTLS).
//
// A plugin-backed assignor never fails a group: on any trouble — the plugin is not
// running (launching, restarting, failed, broker stopping), the call misses its
// deadline, returns an error or panics in the host, or answers an assignment
// assignor.Check rejects — the call counts an error and a fallback, is logged
// (rate-limited), and the configured built-in fallback computes the assignment.
// The consumer state machine therefore sees a successful assignment either way;
// the plugin's stats (GET /v1/plugins, `sluice plugin list`) tell which it was.
//
// Each plugin has a supervisor goroutine. It launches the plugin (the first launch
// happens in Start, synchronously, so the first groups already use it), polls
// go-plugin's Client.Exited every pluginPollInterval, and after an exit launches it
// again with exponential backoff (100 ms doubling to 30 s; reset after a launch that
// lived pluginStableAfter). State: running; restarting (between launches); failed
// (pluginFailedAfter launches in a row failed — it keeps retrying at the backoff,
// which by then is slow). Stop refuses new calls (they use the fallback), waits for
// the calls in flight (bounded by Stop's context), then kills the process and waits
// for the supervisor: no plugin process or goroutine outlives Stop.

package groups

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/sluicehq/sluice/modules/groups/assignor"
	pluginsdk "github.com/sluicehq/sluice/plugins/assignor"
)

// Plugin states, as the stats show them.
const (
	PluginStarting   = "starting"
	PluginRunning    = "running"
	PluginRestarting = "restarting"
	PluginFailed     = "failed"
	PluginStopped    = "stopped"
)

var (
	pluginPollInterval  = 50 * time.Millisecond
	pluginBackoffMin    = 100 * time.Millisecond
	pluginBackoffMax    = 30 * time.Second
	pluginStableAfter   = time.Minute
	pluginFailedAfter   = 3
	pluginStartTimeout  = 10 * time.Second
	pluginLogEvery      = 10 * time.Second // at most one failure log line per plugin per this
	errPluginNotRunning = errors.New("plugin not running")
)

// PluginStats is one plugin's row of GET /v1/plugins.
type PluginStats struct {
	Name          string  `json:"name"`
	Path          string  `json:"path"`
	Fallback      string  `json:"fallback"`
	State         string  `json:"state"`
	PID           int     `json:"pid,omitempty"`
	Restarts      int64   `json:"restarts"`
	Calls         int64   `json:"calls"`
	Errors        int64   `json:"errors"`
	Fallbacks     int64   `json:"fallbacks"`
	LastLatencyMs float64 `json:"last_latency_ms"`
	LastError     string  `json:"last_error,omitempty"`
	LastErrorAt   string  `json:"last_error_at,omitempty"`
}

// pluginAssignor is an assignor.Assignor served by a plugin process.
type pluginAssignor struct {
	cfg      AssignorConfig // with defaults
	fallback assignor.Assignor
	timeout  time.Duration
	log      *slog.Logger

	calls, errs, fallbacks, restarts atomic.Int64
	lastLatency                      atomic.Int64 // ns

	mu        sync.Mutex
	state     string
	client    *plugin.Client
	impl      assignor.Assignor
	pid       int
	inflight  int
	idle      *sync.Cond // signalled when inflight drops to 0
	stopping  bool
	stop      chan struct{} // closed by Stop
	done      chan struct{} // closed when the supervisor returns
	lastErr   string
	lastErrAt time.Time
	lastLog   time.Time
	started   bool
}

var _ assignor.Assignor = (*pluginAssignor)(nil)

func newPluginAssignor(c AssignorConfig) *pluginAssignor {
	c = c.withDefaults()
	p := &pluginAssignor{
		cfg:      c,
		fallback: assignor.Builtin(c.Fallback),
		timeout:  time.Duration(c.TimeoutMs) * time.Millisecond,
		log:      slog.New(slog.DiscardHandler),
		state:    PluginStopped,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	p.idle = sync.NewCond(&p.mu)
	return p
}

// Name is the configured name.
func (p *pluginAssignor) Name() string { return p.cfg.Name }

// UsesPartitionStats asks the group for end offsets and lag (consumer.StatsUser):
// a plugin may use them; built-ins do not.
func (p *pluginAssignor) UsesPartitionStats() bool { return true }

// UsesPartitionRacks asks the group for the racks of each partition's replicas
// (consumer.RackUser): a plugin may use them (of the built-ins, uniform does too).
func (p *pluginAssignor) UsesPartitionRacks() bool { return true }

// Assign asks the plugin, within the configured deadline, and checks its answer;
// on any failure it returns the fallback's assignment (see the file comment).
func (p *pluginAssignor) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	p.calls.Add(1)
	impl, release := p.acquire()
	if impl == nil {
		return p.useFallback(ctx, in, errPluginNotRunning)
	}
	out, err := p.call(ctx, impl, in)
	release()
	if err != nil {
		return p.useFallback(ctx, in, err)
	}
	return out, nil
}

// call runs one plugin call with the deadline and validates the answer.
func (p *pluginAssignor) call(ctx context.Context, impl assignor.Assignor, in assignor.Input) (out assignor.Assignment, err error) {
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	start := time.Now()
	defer func() {
		p.lastLatency.Store(int64(time.Since(start)))
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("plugin client panicked: %v", r)
		}
	}()
	out, err = impl.Assign(cctx, in)
	if err != nil {
		// gRPC's own deadline timer can fire a moment before cctx's: past the
		// deadline counts as a timeout too.
		deadline, _ := cctx.Deadline()
		if ctx.Err() == nil && (cctx.Err() != nil || !time.Now().Before(deadline)) {
			return nil, fmt.Errorf("no answer within %v: %w", p.timeout, err)
		}
		return nil, err
	}
	if err := assignor.Check(in, out); err != nil {
		return nil, fmt.Errorf("plugin answered an invalid assignment: %w", err)
	}
	return out, nil
}

// useFallback records why the plugin was not used and runs the fallback.
func (p *pluginAssignor) useFallback(ctx context.Context, in assignor.Input, why error) (assignor.Assignment, error) {
	p.fallbacks.Add(1)
	now := time.Now()
	p.mu.Lock()
	stopping := p.stopping
	down := errors.Is(why, errPluginNotRunning)
	if !down || !stopping {
		p.errs.Add(1)
		if !down || p.lastErr == "" { // keep why it is down (launch error, exit)
			p.lastErr, p.lastErrAt = why.Error(), now
		}
	}
	logIt := now.Sub(p.lastLog) >= pluginLogEvery
	if logIt {
		p.lastLog = now
	}
	p.mu.Unlock()
	if logIt && !stopping {
		p.log.Warn("assignor plugin not used; using the fallback assignor",
			"plugin", p.cfg.Name, "fallback", p.fallback.Name(), "err", why)
	}
	return p.fallback.Assign(ctx, in)
}

// acquire returns the running plugin's client and counts a call in flight; nil when
// the plugin is not running or Stop began.
func (p *pluginAssignor) acquire() (assignor.Assignor, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping || p.state != PluginRunning || p.impl == nil {
		return nil, nil
	}
	p.inflight++
	return p.impl, func() {
		p.mu.Lock()
		if p.inflight--; p.inflight == 0 {
			p.idle.Broadcast()
		}
		p.mu.Unlock()
	}
}

// start launches the plugin once (a failure is recorded, not returned) and starts
// its supervisor.
func (p *pluginAssignor) start(log *slog.Logger) {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return
	}
	p.started = true
	p.log = log
	p.state = PluginStarting
	p.mu.Unlock()
	first := make(chan struct{})
	go p.supervise(first)
	<-first
}

// launch starts the process and connects; on success the plugin is running.
func (p *pluginAssignor) launch() error {
	cmd := exec.Command(p.cfg.Plugin, p.cfg.Args...)
	dieWithBroker(cmd)
	cmd.Env = os.Environ()
	for k, v := range p.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cc := &plugin.ClientConfig{
		HandshakeConfig:  pluginsdk.Handshake,
		Plugins:          plugin.PluginSet{pluginsdk.PluginName: &pluginsdk.Plugin{}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     pluginStartTimeout,
		Logger:           newHCLog(p.log, p.cfg.Name, filepath.Base(p.cfg.Plugin)),
	}
	if p.cfg.SHA256 != "" {
		sum, _ := hex.DecodeString(p.cfg.SHA256) // checked by Validate
		cc.SecureConfig = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	c := plugin.NewClient(cc)
	impl, err := connect(c)
	if err != nil {
		c.Kill()
		p.mu.Lock()
		p.lastErr, p.lastErrAt = "launch: "+err.Error(), time.Now()
		p.mu.Unlock()
		return err
	}
	pid := 0
	if rc := c.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		c.Kill()
		return errors.New("stopping")
	}
	p.client, p.impl, p.pid, p.state = c, impl, pid, PluginRunning
	p.mu.Unlock()
	p.log.Info("assignor plugin running", "plugin", p.cfg.Name, "path", p.cfg.Plugin, "pid", pid)
	p.checkName(impl)
	return nil
}

// connect dispenses the assignor from a started client.
func connect(c *plugin.Client) (assignor.Assignor, error) {
	rpc, err := c.Client()
	if err != nil {
		return nil, err
	}
	raw, err := rpc.Dispense(pluginsdk.PluginName)
	if err != nil {
		return nil, err
	}
	impl, ok := raw.(pluginsdk.Assignor)
	if !ok {
		return nil, fmt.Errorf("plugin dispensed %T, not an assignor", raw)
	}
	return sdkAssignor{impl}, nil
}

// sdkAssignor is a dispensed plugin client seen as one of ours: the plugin SDK owns
// its contract types (it is its own module and imports nothing of the broker), so
// each call converts the Input to the SDK's types and the answer back. The
// conversion shares slices instead of copying them: the SDK's Client only reads the
// Input (to encode it) and builds the answer afresh.
type sdkAssignor struct{ c pluginsdk.Assignor }

func (s sdkAssignor) Name() string { return s.c.Name() }

func (s sdkAssignor) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	out, err := s.c.Assign(ctx, toSDKInput(in))
	if err != nil {
		if errors.Is(err, pluginsdk.ErrInvalidInput) {
			return nil, invalidInput{err}
		}
		return nil, err
	}
	return fromSDKAssignment(out), nil
}

// invalidInput is an error of the SDK that wraps its ErrInvalidInput, made to wrap
// ours too; its text is unchanged.
type invalidInput struct{ err error }

func (e invalidInput) Error() string   { return e.err.Error() }
func (e invalidInput) Unwrap() []error { return []error{e.err, assignor.ErrInvalidInput} }

// toSDKInput converts in to the plugin SDK's types, keeping nil and empty apart.
func toSDKInput(in assignor.Input) pluginsdk.Input {
	var out pluginsdk.Input
	if in.Members != nil {
		out.Members = make([]pluginsdk.Member, len(in.Members))
	}
	for i, m := range in.Members {
		out.Members[i] = pluginsdk.Member{ID: m.ID, InstanceID: m.InstanceID, Rack: m.Rack,
			Topics: m.Topics, Current: rekey[pluginsdk.TopicID](m.Current)}
	}
	if in.Topics != nil {
		out.Topics = make(map[pluginsdk.TopicID]pluginsdk.Topic, len(in.Topics))
	}
	for id, t := range in.Topics {
		out.Topics[pluginsdk.TopicID(id)] = pluginsdk.Topic{ID: pluginsdk.TopicID(t.ID), Name: t.Name,
			Partitions: t.Partitions, PartitionRacks: t.PartitionRacks,
			PartitionEndOffsets: t.PartitionEndOffsets, PartitionLag: t.PartitionLag}
	}
	return out
}

// fromSDKAssignment converts a plugin's answer to our types, keeping nil and empty
// apart.
func fromSDKAssignment(a pluginsdk.Assignment) assignor.Assignment {
	if a == nil {
		return nil
	}
	out := make(assignor.Assignment, len(a))
	for member, tps := range a {
		out[member] = rekey[assignor.TopicID](tps)
	}
	return out
}

// rekey converts a topic id → partitions map between the two TopicID types.
func rekey[To, From ~[16]byte](m map[From][]int32) map[To][]int32 {
	if m == nil {
		return nil
	}
	out := make(map[To][]int32, len(m))
	for id, ps := range m {
		out[To(id)] = ps
	}
	return out
}

// checkName warns when the plugin calls itself something else than its configured
// name (the configured name is what clients ask for and what is used).
func (p *pluginAssignor) checkName(impl assignor.Assignor) {
	got := make(chan string, 1)
	go func() {
		defer func() { _ = recover() }()
		got <- impl.Name()
	}()
	select {
	case n := <-got:
		if n != "" && n != p.cfg.Name {
			p.log.Warn("assignor plugin reports another name than configured; the configured name is used",
				"plugin", p.cfg.Name, "reported", n)
		}
	case <-time.After(p.timeout):
	}
}

// supervise launches the plugin (closing first after the first attempt), watches it
// and relaunches it after it exits. Every launch happens here, on one OS thread locked
// for the supervisor's life: the plugin's parent-death signal (dieWithBroker) fires
// when the thread that started it exits, and an unlocked goroutine's thread may be one
// the runtime lets go. The thread is unlocked (not ended) at return, so shutdown's
// graceful kill, which follows, still finds the plugin alive.
func (p *pluginAssignor) supervise(first chan<- struct{}) {
	defer close(p.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := p.launch()
	close(first)
	backoff := pluginBackoffMin
	failures := 0
	var upSince time.Time
	if err == nil {
		upSince = time.Now()
	}
	for {
		if err == nil { // running: wait for an exit or Stop
			if !p.waitExit() {
				return
			}
			p.mu.Lock()
			c := p.client
			p.client, p.impl, p.pid, p.state = nil, nil, 0, PluginRestarting
			p.lastErr, p.lastErrAt = "plugin process exited", time.Now()
			p.mu.Unlock()
			c.Kill() // reap and clean up
			p.restarts.Add(1)
			p.log.Warn("assignor plugin exited; restarting", "plugin", p.cfg.Name, "after", backoff)
			failures = 0
			if time.Since(upSince) >= pluginStableAfter {
				backoff = pluginBackoffMin
			}
		} else {
			failures++
			p.mu.Lock()
			if failures >= pluginFailedAfter {
				p.state = PluginFailed
			} else {
				p.state = PluginRestarting
			}
			p.mu.Unlock()
			if failures == 1 || failures == pluginFailedAfter {
				p.log.Warn("assignor plugin failed to start", "plugin", p.cfg.Name, "attempts", failures, "err", err, "retry_in", backoff)
			}
		}
		select {
		case <-p.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, pluginBackoffMax)
		if err = p.launch(); err == nil {
			upSince = time.Now()
		}
	}
}

// waitExit polls until the running plugin exits (true) or Stop (false).
func (p *pluginAssignor) waitExit() bool {
	t := time.NewTicker(pluginPollInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return false
		case <-t.C:
		}
		p.mu.Lock()
		c := p.client
		p.mu.Unlock()
		if c == nil || c.Exited() {
			return true
		}
	}
}

// shutdown refuses new calls, waits for the calls in flight (until ctx ends), stops
// the supervisor and kills the process.
func (p *pluginAssignor) shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return nil
	}
	p.stopping = true
	started := p.started
	close(p.stop)
	waited := make(chan struct{})
	go func() {
		p.mu.Lock()
		for p.inflight > 0 {
			p.idle.Wait()
		}
		p.mu.Unlock()
		close(waited)
	}()
	p.mu.Unlock()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		err = fmt.Errorf("assignor plugin %s: calls still in flight: %w", p.cfg.Name, ctx.Err())
	}
	if started {
		<-p.done // the supervisor returns at once (or after a launch under way)
	}
	p.mu.Lock()
	c := p.client
	p.client, p.impl, p.pid, p.state = nil, nil, 0, PluginStopped
	p.mu.Unlock()
	if c != nil {
		c.Kill() // closes the connection (ending a call still in flight) and waits for the exit
	}
	if err != nil {
		// the waiter goroutine ends when the killed call returns
		<-waited
	}
	return err
}

// stats returns the plugin's row.
func (p *pluginAssignor) stats() PluginStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PluginStats{
		Name:          p.cfg.Name,
		Path:          p.cfg.Plugin,
		Fallback:      p.fallback.Name(),
		State:         p.state,
		PID:           p.pid,
		Restarts:      p.restarts.Load(),
		Calls:         p.calls.Load(),
		Errors:        p.errs.Load(),
		Fallbacks:     p.fallbacks.Load(),
		LastLatencyMs: float64(p.lastLatency.Load()) / 1e6,
		LastError:     p.lastErr,
	}
	if !p.lastErrAt.IsZero() {
		s.LastErrorAt = p.lastErrAt.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// PluginStats returns the stats of every configured assignor plugin, in config order.
func (m *Module) PluginStats() []PluginStats {
	out := make([]PluginStats, 0, len(m.plugins))
	for _, p := range m.plugins {
		out = append(out, p.stats())
	}
	return out
}

// startPlugins launches every plugin; failures leave the plugin restarting or
// failed (the fallback serves) and never fail the broker's start.
func (m *Module) startPlugins() {
	var wg sync.WaitGroup
	for _, p := range m.plugins {
		wg.Add(1)
		go func() { defer wg.Done(); p.start(m.log.With("component", "assignor-plugin")) }()
	}
	wg.Wait()
}

// stopPlugins shuts every plugin down (see pluginAssignor.shutdown).
func (m *Module) stopPlugins(ctx context.Context) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, p := range m.plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.shutdown(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// servePlugins is GET /v1/plugins: {"plugins": [PluginStats...]}.
func (m *Module) servePlugins(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Plugins []PluginStats `json:"plugins"`
	}{m.PluginStats()})
}
