package transforms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/transforms/wasm"
)

// ID is the module's ID.
const ID = "transforms.wasm"

// Info registers the module.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: ID, New: func() kernel.Module { return New() }}
}

// Module runs WASM record transforms: inline ones on the produce path (it is the
// replication module's kernel.ProduceTransformer), derived ones as background workers.
// Deployments live in the metadata log (namespace "transforms"); every broker runs what
// its image says.
type Module struct {
	// CacheDir holds compiled code between restarts; default <data dir>/transforms/cache.
	CacheDir string `yaml:"cache_dir"`
	// MemoryLimitPages is the default per-instance memory limit (64 KiB pages).
	MemoryLimitPages uint32 `yaml:"memory_limit_pages"`
	// TimeoutMs is the default deadline for one batch.
	TimeoutMs int64 `yaml:"timeout_ms"`
	// Instances is the number of instances per transform.
	Instances int `yaml:"instances"`
	// BreakerFailures consecutive failed batches pause a transform for BreakerPauseMs
	// (doubling while it keeps failing after a pause, up to 10 minutes).
	BreakerFailures int `yaml:"breaker_failures"`
	// BreakerPauseMs is the first pause of a transform that failed BreakerFailures
	// batches in a row.
	BreakerPauseMs int64 `yaml:"breaker_pause_ms"`
	// MaxUploadBytes bounds a deployed module's size (413 over it); 0 or more than
	// MaxBinaryBytes means MaxBinaryBytes. The kernel's admin_max_body_bytes and
	// admin_max_concurrent_uploads bound every admin upload too.
	MaxUploadBytes int64 `yaml:"max_upload_bytes"`

	log     *slog.Logger
	broker  kernel.BrokerInfo
	meta    kernel.Metadata
	ext     kernel.ExtensionStore
	creator kernel.TopicCreator
	parts   kernel.Partitions
	eos     eosAPIs // exactly-once derived transforms; zero without txn and groups
	now     func() time.Time

	engine *wasm.Engine

	// inline maps an input topic to its inline transform; replaced whole (copy on
	// write) so Bound is one atomic load and a map lookup.
	inline atomic.Pointer[map[string]*transform]

	mu      sync.Mutex
	running map[string]*transform // by name
	changed chan struct{}         // closed (and replaced) after every reconcile
	unsub   func()
	applyMu sync.Mutex // serializes reconcile
}

// New returns a module with default settings and no side effects.
func New() *Module {
	return &Module{
		MemoryLimitPages: 2048,
		TimeoutMs:        2000,
		Instances:        2,
		BreakerFailures:  5,
		BreakerPauseMs:   30_000,
	}
}

// Provision looks up metadata and replication and registers the produce hook.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log = ctx.Logger()
	m.broker = ctx.Broker()
	if m.now == nil {
		m.now = time.Now
	}
	var err error
	if m.meta, err = kernel.LookupAs[kernel.Metadata](ctx, "metadata"); err != nil {
		return fmt.Errorf("transforms: %w", err)
	}
	if m.ext, err = kernel.LookupAs[kernel.ExtensionStore](ctx, "metadata"); err != nil {
		return fmt.Errorf("transforms: deployments: %w", err)
	}
	m.creator, _ = kernel.LookupAs[kernel.TopicCreator](ctx, "metadata")
	hook, err := kernel.LookupAs[kernel.TransformHook](ctx, "replication")
	if err != nil {
		return fmt.Errorf("transforms: produce hook: %w", err)
	}
	if m.parts, err = kernel.LookupAs[kernel.Partitions](ctx, "replication"); err != nil {
		return fmt.Errorf("transforms: dead-letter and derived writes: %w", err)
	}
	m.eos = lookupEOS(ctx)
	empty := map[string]*transform{}
	m.inline.Store(&empty)
	m.running = map[string]*transform{}
	m.changed = make(chan struct{})
	hook.SetProduceTransformer(m)
	ctx.HandleHTTP("/v1/transforms", m.httpHandler())
	ctx.HandleHTTP("/v1/transforms/", m.httpHandler())
	if mt := ctx.Metrics(); mt != nil {
		m.registerMetrics(mt)
	}
	return nil
}

// Check runs Validate before anything is provisioned: the settings it checks need
// nothing else, so a bad value stops the broker before it touches its data dir.
func (m *Module) Check(kernel.CheckContext) error { return m.Validate() }

// Validate checks the settings.
func (m *Module) Validate() error {
	switch {
	case m.MemoryLimitPages == 0 || m.MemoryLimitPages > 65536:
		return errors.New("transforms: memory_limit_pages must be 1..65536")
	case m.TimeoutMs <= 0:
		return errors.New("transforms: timeout_ms must be > 0")
	case m.Instances <= 0:
		return errors.New("transforms: instances must be > 0")
	case m.BreakerFailures <= 0 || m.BreakerPauseMs <= 0:
		return errors.New("transforms: breaker_failures and breaker_pause_ms must be > 0")
	}
	return nil
}

// Start creates the engine and follows deployments in the metadata image.
func (m *Module) Start(ctx context.Context) error {
	dir := m.CacheDir
	if dir == "" {
		dir = filepath.Join(m.broker.DataDir, "transforms", "cache")
	}
	eng, err := wasm.NewEngine(ctx, dir)
	if err != nil {
		return fmt.Errorf("transforms: %w", err)
	}
	m.engine = eng
	// The first reconcile runs here, before the broker serves: a produce never
	// slips past a deployed transform because its module was still compiling.
	m.reconcile(m.meta.Image())
	unsub := m.meta.Subscribe(m.reconcile)
	m.mu.Lock()
	m.unsub = unsub
	m.mu.Unlock()
	return nil
}

// Stop stops following deployments and closes every transform.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	unsub := m.unsub
	m.unsub = nil
	m.mu.Unlock()
	if unsub != nil {
		unsub()
	}
	empty := map[string]*transform{}
	m.inline.Store(&empty)
	m.mu.Lock()
	ts := m.running
	m.running = map[string]*transform{}
	m.mu.Unlock()
	for _, t := range ts {
		t.close(ctx)
	}
	if m.engine != nil {
		return m.engine.Close(ctx)
	}
	return nil
}

// reconcile makes the running transforms match the image's deployments.
func (m *Module) reconcile(im *kernel.Image) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	want := im.Extensions[Namespace]
	m.mu.Lock()
	cur := make(map[string]*transform, len(m.running))
	for k, v := range m.running {
		cur[k] = v
	}
	m.mu.Unlock()
	next := make(map[string]*transform, len(want))
	for name, v := range want {
		d, err := DecodeHeader(v)
		if err != nil {
			m.log.Error("unreadable transform deployment", "transform", name, "err", err)
			continue
		}
		if t := cur[name]; t != nil && t.dep.SHA256 == d.SHA256 && t.sameSettings(d) {
			next[name] = t
			continue
		}
		t := m.start(d, v)
		next[name] = t
	}
	inline := map[string]*transform{}
	for _, t := range next {
		if t.dep.Mode == ModeInline {
			inline[t.dep.Input] = t
		}
	}
	m.inline.Store(&inline)
	m.mu.Lock()
	m.running = next
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	for name, t := range cur {
		if next[name] != t {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.close(ctx)
			cancel()
			m.log.Info("transform stopped", "transform", name)
		}
	}
}

// start compiles and starts one deployment. A deployment that fails to compile is
// kept, in state "failed", so list says why and produces follow its policy.
func (m *Module) start(d *Deployment, v []byte) *transform {
	t := newTransform(m, d)
	bin, err := DecodeBinary(v, d)
	if err == nil {
		err = t.open(bin)
	}
	if err != nil {
		t.setFailed(err)
		m.log.Error("transform cannot run", "transform", d.Name, "err", err)
		return t
	}
	m.log.Info("transform running", "transform", d.Name, "mode", d.Mode, "input", d.Input,
		"outputs", d.Outputs, "policy", d.Policy, "abi", t.prog.ABI(), "sha256", d.SHA256[:12])
	if d.Mode == ModeDerived {
		t.startDerived()
	}
	return t
}

// Bound implements kernel.ProduceTransformer.
func (m *Module) Bound(topic string) bool {
	p := m.inline.Load()
	if p == nil {
		return false
	}
	_, ok := (*p)[topic]
	return ok
}

// TransformProduce implements kernel.ProduceTransformer.
func (m *Module) TransformProduce(ctx context.Context, tp kernel.TopicPartition, src kernel.ProduceSource, records []byte) ([]byte, error) {
	p := m.inline.Load()
	if p == nil {
		return records, nil
	}
	t := (*p)[tp.Topic]
	if t == nil {
		return records, nil
	}
	return t.transformProduce(ctx, tp, src, records)
}

// inlineOwner returns the name of the inline transform of topic, or "".
func (m *Module) inlineOwner(topic string) string {
	p := m.inline.Load()
	if p == nil {
		return ""
	}
	if t := (*p)[topic]; t != nil {
		return t.dep.Name
	}
	return ""
}

// waitRunning waits until this broker runs the deployment of name deployed at
// deployedAtMs (or, with deployedAtMs < 0, runs no transform of that name): deploy and
// delete answer once the change is live here, so a produce right after a deploy is
// transformed.
func (m *Module) waitRunning(ctx context.Context, name string, deployedAtMs int64) error {
	for {
		m.mu.Lock()
		t, ch := m.running[name], m.changed
		m.mu.Unlock()
		if (deployedAtMs < 0 && t == nil) || (t != nil && t.dep.DeployedAtMs == deployedAtMs) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (m *Module) list() []*transform {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.running))
}
