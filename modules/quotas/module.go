package quotas

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/internal/rate"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/quotas/quota"
)

// Info describes the quotas.window module.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: "quotas.window", New: func() kernel.Module { return &Module{MaxSensors: 100_000} }}
}

// Module is the "quotas.window" module: client quotas stored in the metadata log and
// enforced with sampled rate windows (see doc.go).
type Module struct {
	// MaxSensors bounds the rate sensors of one quota type (one per client group with a
	// quota); when full, idle ones go first. Default 100,000.
	MaxSensors int `yaml:"max_sensors"`

	log    *slog.Logger
	broker kernel.BrokerInfo
	meta   kernel.Metadata
	ext    kernel.ExtensionStore
	unsub  func()
	// stop ends the sweeper; done is closed when it returned.
	stop chan struct{}
	done chan struct{}

	buildMu sync.Mutex
	set     atomic.Pointer[state]
	enf     *enforcer
	metrics *quotaMetrics
}

// state is the quota set of one image's namespace map.
type state struct {
	built   bool // from an image (the initial empty state is not)
	version uint64
	ns      map[string][]byte
	set     *quota.Set
}

// Provision looks up the metadata log and claims the client quota APIs.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log, m.broker = ctx.Logger(), ctx.Broker()
	var err error
	if m.meta, err = kernel.LookupAs[kernel.Metadata](ctx, "metadata"); err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	if m.ext, err = kernel.LookupAs[kernel.ExtensionStore](ctx, "metadata"); err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	// The metadata module charges topic mutations; it cannot look this module up
	// (this module depends on it), so register with it.
	if h, ok := m.meta.(kernel.QuotasHook); ok {
		h.SetQuotas(m)
	}
	b := coordinator.BrokerConfig(m.broker, nil)
	cfg := rate.Config{
		Samples: int(b.QuotaWindowNum),
		Window:  time.Duration(b.QuotaWindowSizeSeconds) * time.Second,
		Burst:   time.Duration(b.SluiceQuotaBurstMs) * time.Millisecond,
	}
	m.enf = newEnforcer(cfg, m.MaxSensors, m.quotaSet)
	m.set.Store(&state{set: &quota.Set{}})
	m.metrics = newQuotaMetrics(ctx.Metrics(), m.enf)
	return kernel.ClaimAll(ctx, describeClientQuotasClaim(m), alterClientQuotasClaim(m))
}

// Validate checks the settings.
func (m *Module) Validate() error {
	if m.MaxSensors <= 0 {
		return fmt.Errorf("quotas: max_sensors must be > 0")
	}
	return nil
}

// Start follows the metadata images (each new quota namespace map rebuilds the set)
// and sweeps idle sensors.
func (m *Module) Start(context.Context) error {
	m.unsub = m.meta.Subscribe(m.refresh)
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go m.sweeper()
	return nil
}

// sweepEvery is how often sensors of clients gone quiet are dropped. Sensors are
// bounded without it (an insert into a full map makes room); sweeping keeps the
// sluice_quota_sensors gauge and the memory to the clients actually active.
const sweepEvery = 30 * time.Second

func (m *Module) sweeper() {
	defer close(m.done)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.enf.sweep(now)
		}
	}
}

// Stop unsubscribes and ends the sweeper.
func (m *Module) Stop(context.Context) error {
	if m.unsub != nil {
		m.unsub()
	}
	if m.stop != nil {
		close(m.stop)
		<-m.done
	}
	return nil
}

// refresh rebuilds the set when im is newer than the one it was built from and its
// quota namespace is another map. Called by the image subscription and by
// AlterClientQuotas (so its answer is visible at once); buildMu orders them.
func (m *Module) refresh(im *kernel.Image) {
	m.buildMu.Lock()
	defer m.buildMu.Unlock()
	cur := m.set.Load()
	if cur.built && cur.version >= im.Version {
		return
	}
	ns := im.Extensions[Namespace]
	if cur.built && sameMap(cur.ns, ns) {
		m.set.Store(&state{built: true, version: im.Version, ns: ns, set: cur.set})
		return
	}
	warned := false
	set := buildSet(ns, func(key string, err error) {
		if !warned {
			warned = true
			m.log.Warn("skipping unreadable client quota record", "key", key, "err", err)
		}
	})
	m.set.Store(&state{built: true, version: im.Version, ns: ns, set: set})
}

// quotaSet is the current set (possibly a newer image's than a request saw).
func (m *Module) quotaSet() *quota.Set { return m.set.Load().set }

var (
	_ kernel.Provisioner = (*Module)(nil)
	_ kernel.Validator   = (*Module)(nil)
	_ kernel.Starter     = (*Module)(nil)
	_ kernel.Stopper     = (*Module)(nil)
	_ kernel.Quotas      = (*Module)(nil)
)
