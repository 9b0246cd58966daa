package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/interbroker"
	"github.com/sluicehq/sluice/kernel"
)

// ModuleID is the console's module id.
const ModuleID = "console.web"

// Info returns the module's registration.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: ModuleID, New: func() kernel.Module { return &Module{} }}
}

// Module is the web console. Its exported fields are its config section.
type Module struct {
	// Disabled turns the console off: no page and no /v1/console endpoints.
	Disabled bool `yaml:"disabled"`
	// RefreshMs is how often the page reloads what it shows (default 5000).
	RefreshMs int `yaml:"refresh_ms"`
	// LagSampleMs is how often the lag of a group read in the last 10 minutes is
	// sampled for its chart (default 10000).
	LagSampleMs int `yaml:"lag_sample_ms"`
	// LagSamples is how many lag samples are kept per group (default 360: an hour
	// at the default interval).
	LagSamples int `yaml:"lag_samples"`

	log     *slog.Logger
	broker  kernel.BrokerInfo
	authz   kernel.Authorizer
	offsets kernel.ReplicaOffsets // nil: no time lag
	leaders kernel.LeaderOffsets  // nil: time lag from local replicas only

	mu      sync.Mutex
	cl      *kgo.Client // made at first use; nil until then and after Stop
	adm     *kadm.Client
	stopped bool

	lags *lagHistory
	page page

	stop chan struct{}
	wg   sync.WaitGroup
}

const (
	defaultRefreshMs   = 5000
	defaultLagSampleMs = 10_000
	defaultLagSamples  = 360
)

// requestTimeout bounds the cluster requests behind one endpoint.
const requestTimeout = 10 * time.Second

func (m *Module) applyDefaults() {
	if m.RefreshMs == 0 {
		m.RefreshMs = defaultRefreshMs
	}
	if m.LagSampleMs == 0 {
		m.LagSampleMs = defaultLagSampleMs
	}
	if m.LagSamples == 0 {
		m.LagSamples = defaultLagSamples
	}
}

// Check checks the settings before anything is provisioned (kernel.Checker).
func (m *Module) Check(kernel.CheckContext) error { return m.Validate() }

// Validate checks the settings.
func (m *Module) Validate() error {
	m.applyDefaults()
	switch {
	case m.RefreshMs < 500:
		return fmt.Errorf("console: refresh_ms must be at least 500, got %d", m.RefreshMs)
	case m.LagSampleMs < 1000:
		return fmt.Errorf("console: lag_sample_ms must be at least 1000, got %d", m.LagSampleMs)
	case m.LagSamples < 2 || m.LagSamples > 100_000:
		return fmt.Errorf("console: lag_samples must be between 2 and 100000, got %d", m.LagSamples)
	}
	return nil
}

// Provision registers the page and the endpoints.
func (m *Module) Provision(ctx kernel.Context) error {
	m.applyDefaults()
	m.log, m.broker = ctx.Logger(), ctx.Broker()
	m.authz = kernel.AllowAll{}
	if a, err := kernel.LookupAs[kernel.Authorizer](ctx, "auth"); err == nil {
		m.authz = a
	}
	m.offsets, _ = kernel.LookupAs[kernel.ReplicaOffsets](ctx, "replication")
	m.leaders, _ = kernel.LookupAs[kernel.LeaderOffsets](ctx, "replication")
	m.lags = newLagHistory(m.LagSamples)
	m.stop = make(chan struct{})
	if m.Disabled {
		return nil
	}
	ctx.HandleHTTP("GET /{$}", http.HandlerFunc(m.servePage))
	ctx.HandleHTTP("GET /console/{file}", http.HandlerFunc(m.serveAsset))
	ctx.HandleHTTP("GET /v1/console/cluster", m.api(m.cluster))
	ctx.HandleHTTP("GET /v1/console/topics", m.api(m.topics))
	ctx.HandleHTTP("GET /v1/console/topics/{topic}", m.api(m.topic))
	ctx.HandleHTTP("GET /v1/console/topics/{topic}/records", m.api(m.records))
	ctx.HandleHTTP("GET /v1/console/groups", m.api(m.groups))
	ctx.HandleHTTP("GET /v1/console/groups/{group}", m.api(m.group))
	return nil
}

// Start starts the lag sampler.
func (m *Module) Start(context.Context) error {
	if m.Disabled {
		return nil
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.sampleLoop()
	}()
	return nil
}

// Stop stops the sampler and closes the client.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	if !m.stopped {
		m.stopped = true
		close(m.stop)
	}
	cl := m.cl
	m.cl, m.adm = nil, nil
	m.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
	return kernel.WaitGroup(ctx, &m.wg)
}

// errUnavailable: the console cannot reach the cluster (stopped, or no credentials).
var errUnavailable = errors.New("console: the cluster client is unavailable")

// client returns the cluster client, made at first use: seeded with this broker's
// inter-broker listener, with the broker's TLS and SASL settings for it.
func (m *Module) client() (*kadm.Client, *kgo.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return nil, nil, errUnavailable
	}
	if m.cl != nil {
		return m.adm, m.cl, nil
	}
	sec, err := interbroker.New(m.broker, m.log.With("component", "tls"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	seed := ""
	for _, l := range m.broker.Listeners {
		if l.Name == sec.Listener || seed == "" {
			host := l.Host
			if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
				host = "127.0.0.1"
			}
			seed = net.JoinHostPort(host, strconv.Itoa(int(l.Port)))
			if l.Name == sec.Listener {
				break
			}
		}
	}
	if seed == "" {
		return nil, nil, fmt.Errorf("%w: the broker has no listener", errUnavailable)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seed), kgo.ClientID("sluice-console"), kgo.RequestTimeoutOverhead(requestTimeout), kgo.RetryTimeout(requestTimeout)}
	if sec.TLS() {
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: requestTimeout}, Config: sec.ClientTLS(host)}
			return d.DialContext(ctx, network, addr)
		}))
	}
	mech, err := sec.Mechanism()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	m.cl, m.adm = cl, kadm.NewClient(cl)
	m.adm.SetTimeoutMillis(int32(requestTimeout.Milliseconds()))
	return m.adm, m.cl, nil
}

var (
	_ kernel.Provisioner = (*Module)(nil)
	_ kernel.Validator   = (*Module)(nil)
	_ kernel.Checker     = (*Module)(nil)
	_ kernel.Starter     = (*Module)(nil)
	_ kernel.Stopper     = (*Module)(nil)
)
