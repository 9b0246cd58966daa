package kernel

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
)

// Metrics is a small registry of counters and gauges written in the Prometheus text
// format at /metrics. Metric names are snake_case and start with "sluice_".
type Metrics struct {
	mu         sync.Mutex
	counters   map[string]*Counter
	gauges     map[string]func() float64
	collectors map[string]collector
	help       map[string]string
}

// collector is a metric family whose samples are listed at scrape time.
type collector struct {
	typ string
	fn  func(emit func(labels string, v float64))
}

// NewMetrics returns an empty registry.
func NewMetrics() *Metrics {
	return &Metrics{counters: map[string]*Counter{}, gauges: map[string]func() float64{},
		collectors: map[string]collector{}, help: map[string]string{}}
}

// Collect registers a metric family (typ "counter" or "gauge") whose samples fn lists
// at scrape time by calling emit once per sample, with its labels in Prometheus form
// without braces (`transform="redact",mode="inline"`, or "" for none). It suits label
// sets that come and go (one sample per deployed transform). fn runs outside the
// registry's lock. A second registration of name replaces it.
func (m *Metrics) Collect(name, help, typ string, fn func(emit func(labels string, v float64))) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.collectors[name] = collector{typ: typ, fn: fn}
	m.help[name] = help
}

// Counter is a monotonically increasing count.
type Counter struct{ v atomic.Int64 }

// Add adds n (n >= 0).
func (c *Counter) Add(n int64) { c.v.Add(n) }

// Value returns the count.
func (c *Counter) Value() int64 { return c.v.Load() }

// Counter returns the counter named name (with an optional label set in name, e.g.
// `sluice_requests_total{api="Produce"}`), creating it on first use.
func (m *Metrics) Counter(name, help string) *Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.counters[name]
	if !ok {
		c = &Counter{}
		m.counters[name] = c
		m.help[baseName(name)] = help
	}
	return c
}

// Gauge registers a gauge read by fn at scrape time. A second registration replaces it.
func (m *Metrics) Gauge(name, help string, fn func() float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gauges[name] = fn
	m.help[baseName(name)] = help
}

func baseName(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] == '{' {
			return name[:i]
		}
	}
	return name
}

// WriteText writes every metric in the Prometheus text exposition format.
func (m *Metrics) WriteText(w io.Writer) {
	m.mu.Lock()
	type line struct {
		name, typ string
		val       float64
	}
	var lines []line
	for n, c := range m.counters {
		lines = append(lines, line{n, "counter", float64(c.Value())})
	}
	gauges := make(map[string]func() float64, len(m.gauges))
	for n, fn := range m.gauges {
		gauges[n] = fn
	}
	collectors := make(map[string]collector, len(m.collectors))
	for n, c := range m.collectors {
		collectors[n] = c
	}
	help := make(map[string]string, len(m.help))
	for k, v := range m.help {
		help[k] = v
	}
	m.mu.Unlock()
	for n, fn := range gauges { // outside the lock: fn may take other locks
		lines = append(lines, line{n, "gauge", fn()})
	}
	for n, c := range collectors {
		c.fn(func(labels string, v float64) {
			name := n
			if labels != "" {
				name = n + "{" + labels + "}"
			}
			lines = append(lines, line{name, c.typ, v})
		})
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].name < lines[j].name })
	seen := map[string]bool{}
	for _, l := range lines {
		b := baseName(l.name)
		if !seen[b] {
			seen[b] = true
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", b, help[b], b, l.typ)
		}
		fmt.Fprintf(w, "%s %g\n", l.name, l.val)
	}
}
