package kernel

import (
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Metrics is the broker's Prometheus registry, served at /metrics on the admin
// listener. Metric names are snake_case, start with "sluice_" and carry their unit
// (`_seconds`, `_bytes`, `_total` for counters), as Prometheus names them.
//
// Modules get it from their Context. The helpers below cover the common shapes
// (an atomic counter, a gauge read at scrape time, a family whose labelled samples
// are listed at scrape time); anything else (a histogram, a vector) is a
// client_golang collector registered on Registerer.
//
// Cardinality is the registering code's responsibility: per-partition families must
// be bounded (or switchable to per-topic aggregates) by configuration.
type Metrics struct {
	reg *prometheus.Registry

	mu       sync.Mutex
	counters map[string]*Counter
	replace  map[string]prometheus.Collector // Gauge and Collect families by name
}

// NewMetrics returns an empty registry.
func NewMetrics() *Metrics {
	return &Metrics{reg: prometheus.NewRegistry(), counters: map[string]*Counter{}, replace: map[string]prometheus.Collector{}}
}

// Registerer is where a module registers collectors of its own (histograms, vectors).
// A second registration of the same name fails, as client_golang's does.
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }

// Counter is a monotonically increasing count: one atomic add on the hot path.
type Counter struct{ v atomic.Int64 }

// Add adds n (n >= 0).
func (c *Counter) Add(n int64) { c.v.Add(n) }

// Value returns the count.
func (c *Counter) Value() int64 { return c.v.Load() }

// Counter returns the counter named name, creating and registering it on first use.
func (m *Metrics) Counter(name, help string) *Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.counters[name]; ok {
		return c
	}
	c := &Counter{}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(c.Value()) }))
	m.counters[name] = c
	return c
}

// Gauge registers a gauge read by fn at scrape time. A second registration of name
// replaces the first.
func (m *Metrics) Gauge(name, help string, fn func() float64) {
	m.swap(name, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

// Kind is the Prometheus type of a family registered with Collect.
type Kind int

const (
	KindGauge Kind = iota
	KindCounter
)

// Collect registers a family whose samples fn lists at scrape time, calling emit once
// per sample with its value and the values of labels, in order. It suits label sets
// that come and go (one sample per deployed transform, per group and partition). fn
// runs at every scrape, outside the registry's lock. A second registration of name
// replaces the first. A sample with the wrong number of label values is reported as
// a scrape error for that sample (never a panic).
func (m *Metrics) Collect(name, help string, kind Kind, labels []string, fn func(emit func(v float64, labelValues ...string))) {
	vt := prometheus.GaugeValue
	if kind == KindCounter {
		vt = prometheus.CounterValue
	}
	m.swap(name, &funcCollector{desc: prometheus.NewDesc(name, help, labels, nil), vt: vt, fn: fn})
}

// swap registers c under name, unregistering what name had before.
func (m *Metrics) swap(name string, c prometheus.Collector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.replace[name]; ok {
		m.reg.Unregister(old)
	}
	m.reg.MustRegister(c)
	m.replace[name] = c
}

// funcCollector is a Collect family.
type funcCollector struct {
	desc *prometheus.Desc
	vt   prometheus.ValueType
	fn   func(emit func(float64, ...string))
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	c.fn(func(v float64, lvs ...string) {
		mt, err := prometheus.NewConstMetric(c.desc, c.vt, v, lvs...)
		if err != nil {
			mt = prometheus.NewInvalidMetric(c.desc, err)
		}
		ch <- mt
	})
}

// Handler serves the registry in Prometheus's text format (or OpenMetrics, when the
// scraper asks for it), gzipped when the scraper accepts it. A collector's error
// leaves that sample out and is logged, the rest is served.
func (m *Metrics) Handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promLogger{log},
	})
}

// promLogger is promhttp's error log on slog.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	if l.log != nil {
		l.log.Warn("metrics scrape", "err", v)
	}
}

// WriteText writes every metric in the Prometheus text exposition format (tests,
// tools). A collector's error is returned after the rest is written.
func (m *Metrics) WriteText(w io.Writer) error {
	mfs, gerr := m.reg.Gather()
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return err
		}
	}
	return gerr
}
