package quotas

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/rate"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/quotas/quota"
)

// topClients bounds the per-client series: each quota type shows only the clients with
// the highest rates, so a broker with 100,000 throttled client ids still exports a
// handful of series.
const topClients = 20

// quotaMetrics exports the enforcer's figures (docs/metrics.md):
//
//	sluice_quota_throttle_seconds_total{quota}     throttle time handed out
//	sluice_quota_throttled_responses_total{quota}  responses with a throttle
//	sluice_quota_sensors{quota}                    client groups measured
//	sluice_quota_client_rate{quota,user,client_id} rate of the topClients busiest groups
//	                                               (bytes/s, percent of a thread, partitions/s)
type quotaMetrics struct{ e *enforcer }

func newQuotaMetrics(mt *kernel.Metrics, e *enforcer) *quotaMetrics {
	qm := &quotaMetrics{e: e}
	if mt == nil {
		return qm
	}
	mt.Collect("sluice_quota_throttle_seconds_total", "Throttle time handed to clients, by quota type (produce, fetch, request, mutation).",
		kernel.KindCounter, []string{"quota"}, func(emit func(float64, ...string)) {
			t := &e.throttled
			t.mu.Lock()
			defer t.mu.Unlock()
			emit(t.produce, "produce")
			emit(t.fetch, "fetch")
			emit(t.request, "request")
			emit(t.mutation, "mutation")
		})
	mt.Collect("sluice_quota_throttled_responses_total", "Responses that throttled their client, by quota type.",
		kernel.KindCounter, []string{"quota"}, func(emit func(float64, ...string)) {
			t := &e.throttled
			t.mu.Lock()
			defer t.mu.Unlock()
			emit(float64(t.nProduce), "produce")
			emit(float64(t.nFetch), "fetch")
			emit(float64(t.nRequest), "request")
			emit(float64(t.nMutate), "mutation")
		})
	mt.Collect("sluice_quota_sensors", "Client groups whose rates are measured, by quota type.",
		kernel.KindGauge, []string{"quota"}, func(emit func(float64, ...string)) {
			emit(float64(e.produce.Len()), "produce")
			emit(float64(e.fetch.Len()), "fetch")
			emit(float64(e.request.Len()), "request")
		})
	mt.Collect("sluice_quota_client_rate", "Measured rate of the busiest client groups with a quota (at most 20 per quota type): bytes/s for produce and fetch, percent of a thread for request.",
		kernel.KindGauge, []string{"quota", "user", "client_id"}, func(emit func(float64, ...string)) {
			now := time.Now()
			for _, s := range []struct {
				name string
				s    *rate.Sensors[quota.Group]
			}{{"produce", e.produce}, {"fetch", e.fetch}, {"request", e.request}} {
				for _, r := range busiest(s.s, now) {
					emit(r.rate, s.name, r.g.User, r.g.ClientID)
				}
			}
		})
	return qm
}

type groupRate struct {
	g    quota.Group
	rate float64
}

// busiest returns the topClients groups of s with the highest rates at now.
func busiest(s *rate.Sensors[quota.Group], now time.Time) []groupRate {
	var out []groupRate
	s.Each(now, func(g quota.Group, r float64) {
		if r > 0 {
			out = append(out, groupRate{g, r})
		}
	})
	slices.SortFunc(out, func(a, b groupRate) int {
		switch {
		case a.rate > b.rate:
			return -1
		case a.rate < b.rate:
			return 1
		}
		return 0
	})
	return out[:min(len(out), topClients)]
}
