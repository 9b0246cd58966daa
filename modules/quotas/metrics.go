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
//	sluice_quota_client_throttle_ratio{quota,user,client_id}
//	                                               throttle seconds per second of the
//	                                               topClients most throttled groups
//	sluice_quota_sensors{quota}                    client groups measured
//	sluice_quota_client_rate{quota,user,client_id} rate of the topClients busiest groups
//	                                               (bytes/s, percent of a thread, partitions/s)
type quotaMetrics struct{ e *enforcer }

func newQuotaMetrics(mt *kernel.Metrics, e *enforcer) *quotaMetrics {
	qm := &quotaMetrics{e: e}
	if mt == nil {
		return qm
	}
	mt.Collect("sluice_quota_throttle_seconds_total", "Throttle time handed to clients, by quota type (produce, fetch, request, mutation, connection).",
		kernel.KindCounter, []string{"quota"}, func(emit func(float64, ...string)) {
			t := &e.throttled
			t.mu.Lock()
			defer t.mu.Unlock()
			for k, name := range kindNames {
				emit(t.seconds[k], name)
			}
		})
	mt.Collect("sluice_quota_throttled_responses_total", "Responses that throttled their client, by quota type.",
		kernel.KindCounter, []string{"quota"}, func(emit func(float64, ...string)) {
			t := &e.throttled
			t.mu.Lock()
			defer t.mu.Unlock()
			for k, name := range kindNames {
				emit(float64(t.n[k]), name)
			}
		})
	mt.Collect("sluice_quota_client_throttle_ratio", "Throttle seconds per second handed to the most throttled client groups (at most 20 per quota type), over the quota window: 1 means held all the time.",
		kernel.KindGauge, []string{"quota", "user", "client_id"}, func(emit func(float64, ...string)) {
			now := time.Now()
			for k, name := range kindNames {
				for _, r := range busiest(e.throttleTime, now, func(t throttleKey) bool { return t.kind == quotaKind(k) }) {
					emit(r.rate, name, r.g.g.User, r.g.g.ClientID)
				}
			}
		})
	mt.Collect("sluice_quota_sensors", "Client groups whose rates are measured, by quota type.",
		kernel.KindGauge, []string{"quota"}, func(emit func(float64, ...string)) {
			emit(float64(e.produce.Len()), "produce")
			emit(float64(e.fetch.Len()), "fetch")
			emit(float64(e.request.Len()), "request")
			emit(float64(e.conn.Len()), "connection")
		})
	mt.Collect("sluice_quota_client_rate", "Measured rate of the busiest client groups with a quota (at most 20 per quota type): bytes/s for produce and fetch, percent of a thread for request.",
		kernel.KindGauge, []string{"quota", "user", "client_id"}, func(emit func(float64, ...string)) {
			now := time.Now()
			for _, s := range []struct {
				name string
				s    *rate.Sensors[quota.Group]
			}{{"produce", e.produce}, {"fetch", e.fetch}, {"request", e.request}} {
				for _, r := range busiest(s.s, now, nil) {
					emit(r.rate, s.name, r.g.User, r.g.ClientID)
				}
			}
		})
	return qm
}

type groupRate[K comparable] struct {
	g    K
	rate float64
}

// busiest returns the topClients keys of s (those keep accepts; nil: all) with the
// highest rates at now.
func busiest[K comparable](s *rate.Sensors[K], now time.Time, keep func(K) bool) []groupRate[K] {
	var out []groupRate[K]
	s.Each(now, func(g K, r float64) {
		if r > 0 && (keep == nil || keep(g)) {
			out = append(out, groupRate[K]{g, r})
		}
	})
	slices.SortFunc(out, func(a, b groupRate[K]) int {
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
