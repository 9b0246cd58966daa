package telemetry

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/clientmetrics"
	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/internal/ratelog"
	"github.com/sluicehq/sluice/kernel"
)

// Info describes the telemetry.otlp module.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: "telemetry.otlp", New: func() kernel.Module { return New() }}
}

// New returns a module with default settings.
func New() *Module {
	return &Module{MaxClients: 10_000, MaxSeries: 10_000, MaxDecompressedBytes: 4 << 20, now: time.Now}
}

// Module is the "telemetry.otlp" module (see doc.go).
type Module struct {
	// MaxClients bounds the client instances the broker remembers (default 10,000).
	MaxClients int `yaml:"max_clients"`
	// MaxSeries bounds the sluice_client_metric series of all clients (default
	// 10,000).
	MaxSeries int `yaml:"max_series"`
	// MaxDecompressedBytes bounds one push's metrics once decompressed (default 4 MiB:
	// clients push kilobytes, and decoding allocates a few times the payload).
	MaxDecompressedBytes int `yaml:"max_decompressed_bytes"`

	log    *slog.Logger
	logLim ratelog.Limiter // bad pushes and subscriptions log through it
	broker kernel.BrokerInfo
	meta   kernel.Metadata
	now    func() time.Time

	subs atomic.Pointer[subsCache]

	mu      sync.Mutex
	clients map[[16]byte]*client
	series  int // the series of every client

	pushes, refused, dropped *kernel.Counter
}

// subsCache is the subscriptions of one image version.
type subsCache struct {
	version uint64
	subs    []clientmetrics.Subscription
	raw     map[string][]byte // each subscription's stored value (for the id hash)
}

// client is one client instance as the broker knows it. Guarded by Module.mu.
type client struct {
	id         [16]byte
	info       clientmetrics.Client
	sub        subscription
	lastGet    time.Time // zero: none yet
	lastPush   time.Time
	lastErr    int16 // the last push's code
	terminated bool
	seen       time.Time
	series     map[seriesKey]float64
}

type seriesKey struct{ metric, attrs string }

// subscription is what the matching subscriptions ask of a client.
type subscription struct {
	id         int32
	metrics    []string // prefixes; [""] is every metric; empty: none
	intervalMs int32
}

// Provision looks up the metadata module and claims the telemetry APIs.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log, m.broker = ctx.Logger(), ctx.Broker()
	m.logLim = ratelog.Limiter{N: 5, Every: time.Minute}
	var err error
	if m.meta, err = kernel.LookupAs[kernel.Metadata](ctx, "metadata"); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	m.clients = map[[16]byte]*client{}
	m.pushes, m.refused, m.dropped = &kernel.Counter{}, &kernel.Counter{}, &kernel.Counter{}
	if mt := ctx.Metrics(); mt != nil {
		m.registerMetrics(mt)
	}
	return kernel.ClaimAll(ctx, getTelemetrySubscriptionsClaim(m), pushTelemetryClaim(m))
}

// Validate checks the settings.
func (m *Module) Validate() error {
	switch {
	case m.MaxClients <= 0:
		return errors.New("telemetry: max_clients must be > 0")
	case m.MaxSeries <= 0:
		return errors.New("telemetry: max_series must be > 0")
	case m.MaxDecompressedBytes <= 0:
		return errors.New("telemetry: max_decompressed_bytes must be > 0")
	}
	return nil
}

// maxBytes is telemetry.max.bytes.
func (m *Module) maxBytes() int64 {
	return coordinator.BrokerConfig(m.broker, m.meta.Image()).TelemetryMaxBytes
}

// subscriptions returns the current image's subscriptions, parsed once per version.
func (m *Module) subscriptions() *subsCache {
	im := m.meta.Image()
	if c := m.subs.Load(); c != nil && c.version == im.Version {
		return c
	}
	subs, bad := clientmetrics.Load(im)
	if len(bad) > 0 {
		m.warn("skipping unreadable client metrics subscriptions", "names", bad)
	}
	c := &subsCache{version: im.Version, subs: subs, raw: im.Extensions[clientmetrics.Namespace]}
	m.subs.Store(c)
	return c
}

// subscriptionFor evaluates the subscriptions for a client: the union of the matching
// ones' metrics, the shortest of their intervals, and an id that hashes their names
// and configs (so it changes when they do).
func (c *subsCache) subscriptionFor(cl clientmetrics.Client) subscription {
	h := fnv.New32a()
	out := subscription{intervalMs: clientmetrics.DefaultIntervalMs}
	all := false
	matched := 0
	var metrics []string
	for i := range c.subs {
		s := &c.subs[i]
		if !s.Matches(cl) {
			continue
		}
		if matched == 0 || s.IntervalMs < out.intervalMs {
			out.intervalMs = s.IntervalMs
		}
		matched++
		_, _ = h.Write([]byte(s.Name))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write(c.raw[s.Name])
		_, _ = h.Write([]byte{0})
		for _, p := range s.Metrics {
			if p == "" {
				all = true
			}
			metrics = append(metrics, p)
		}
	}
	switch {
	case all:
		out.metrics = []string{""}
	case len(metrics) > 0:
		slices.Sort(metrics)
		out.metrics = slices.Compact(metrics)
	}
	out.id = int32(h.Sum32())
	return out
}

// clientInfo is what subscriptions select on for a request's client.
func clientInfo(req *kernel.Request, id [16]byte) clientmetrics.Client {
	c := clientmetrics.Client{InstanceID: formatUUID(id), ClientID: req.ClientID}
	if req.Conn != nil {
		c.SoftwareName, c.SoftwareVersion = req.Conn.ClientSoftwareName, req.Conn.ClientSoftwareVersion
		c.SourceAddress = req.Conn.Host()
		if a, ok := req.Conn.Remote.(*net.TCPAddr); ok {
			c.SourcePort = strconv.Itoa(a.Port)
		}
	}
	return c
}

// formatUUID is id in the 8-4-4-4-12 hex form.
func formatUUID(id [16]byte) string {
	const hexdig = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexdig[b>>4], hexdig[b&15])
	}
	return string(out)
}

// lookupLocked returns the client instance id, creating it (and making room) when
// absent; created says it was. Call with m.mu held.
func (m *Module) lookupLocked(id [16]byte, info clientmetrics.Client, now time.Time) (c *client, created bool) {
	if c := m.clients[id]; c != nil {
		c.seen = now
		return c, false
	}
	if len(m.clients) >= m.MaxClients {
		m.expireLocked(now)
	}
	if len(m.clients) >= m.MaxClients {
		var oldest *client
		for _, c := range m.clients {
			if oldest == nil || c.seen.Before(oldest.seen) {
				oldest = c
			}
		}
		m.dropLocked(oldest)
	}
	c = &client{id: id, info: info, seen: now, series: map[seriesKey]float64{}}
	m.clients[id] = c
	return c, true
}

// expireLocked forgets the instances not heard from for three push intervals.
func (m *Module) expireLocked(now time.Time) {
	for _, c := range m.clients {
		if now.Sub(c.seen) > 3*time.Duration(max(c.sub.intervalMs, clientmetrics.MinIntervalMs))*time.Millisecond {
			m.dropLocked(c)
		}
	}
}

func (m *Module) dropLocked(c *client) {
	m.series -= len(c.series)
	delete(m.clients, c.id)
}

// warn logs through the rate limit.
func (m *Module) warn(msg string, args ...any) {
	if ok, dropped := m.logLim.Allow(m.now()); ok {
		m.log.Warn(msg, append(args, "dropped_lines", dropped)...)
	}
}
