// Package metricstest reads a broker's /metrics for tests: Scrape fetches and parses
// the exposition (with Prometheus's own parser, so what a test reads is what a
// Prometheus server would), and Samples.Value finds one sample by name and labels.
//
//	s := metricstest.Scrape(t, b.AdminAddr)
//	lag, ok := s.Value("sluice_consumer_group_lag", "group", "g", "topic", "t", "partition", "0")
package metricstest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples are the metric families of one scrape, by name.
type Samples map[string]*dto.MetricFamily

// Scrape fetches http://admin/metrics and parses it; a failure fails the test.
func Scrape(t testing.TB, admin string) Samples {
	t.Helper()
	s, err := TryScrape(admin)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TryScrape is Scrape returning its error.
func TryScrape(admin string) (Samples, error) {
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return Samples(mfs), nil
}

// Value returns the value of the sample of family name whose labels include the
// given name/value pairs (a counter's, a gauge's, or a histogram's count), and
// whether there is one. With several matches it returns their sum.
func (s Samples) Value(name string, labels ...string) (float64, bool) {
	mf := s[name]
	if mf == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		found = true
		switch {
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, found
}

// Count returns how many samples family name has whose labels include the pairs.
func (s Samples) Count(name string, labels ...string) int {
	n := 0
	if mf := s[name]; mf != nil {
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				n++
			}
		}
	}
	return n
}

// LabelNames returns the label names of family name's first sample.
func (s Samples) LabelNames(name string) []string {
	mf := s[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return nil
	}
	var out []string
	for _, lp := range mf.GetMetric()[0].GetLabel() {
		out = append(out, lp.GetName())
	}
	return out
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		ok := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == pairs[i] && lp.GetValue() == pairs[i+1] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
