package quotas

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/rate"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/quotas/quota"
)

// enforcer holds the clients' rates, one sampled sensor per quota type and client
// group (quota.Group: the clients one configured quota covers together), and answers
// the kernel's throttle questions (kernel.Quotas). With no quota configured every call
// returns at once: nothing is measured.
type enforcer struct {
	cfg     rate.Config
	set     func() *quota.Set
	produce *rate.Sensors[quota.Group]
	fetch   *rate.Sensors[quota.Group]
	request *rate.Sensors[quota.Group]

	mu      sync.Mutex
	buckets map[quota.Group]*rate.TokenBucket // controller_mutation_rate (KIP-599)
	maxBkts int

	throttled throttleCounts
}

// throttleCounts are the throttle times handed out, by quota type, in seconds.
type throttleCounts struct {
	mu                                  sync.Mutex
	produce, fetch, request, mutation   float64
	nProduce, nFetch, nRequest, nMutate int64
}

func newEnforcer(cfg rate.Config, maxSensors int, set func() *quota.Set) *enforcer {
	return &enforcer{
		cfg: cfg, set: set,
		produce: rate.NewSensors[quota.Group](cfg, maxSensors),
		fetch:   rate.NewSensors[quota.Group](cfg, maxSensors),
		request: rate.NewSensors[quota.Group](cfg, maxSensors),
		buckets: map[quota.Group]*rate.TokenBucket{},
		maxBkts: maxSensors,
	}
}

// limit resolves key for c; ok false when no quota applies.
func (e *enforcer) limit(key string, c kernel.QuotaClient) (float64, quota.Group, bool) {
	s := e.set()
	if s == nil || s.Len() == 0 {
		return 0, quota.Group{}, false
	}
	return s.Resolve(key, c.User, c.ClientID)
}

func (e *enforcer) count(kind *float64, n *int64, d time.Duration) time.Duration {
	if d > 0 {
		e.throttled.mu.Lock()
		*kind += d.Seconds()
		*n++
		e.throttled.mu.Unlock()
	}
	return d
}

func (e *enforcer) requestThrottle(c kernel.QuotaClient, handling time.Duration, now time.Time) time.Duration {
	lim, g, ok := e.limit(quota.RequestPercentage, c)
	if !ok || handling <= 0 {
		return 0
	}
	// request_percentage is a share of one thread: a second of work per second is
	// 100%, so the sensor records percent-seconds.
	d := e.request.RecordAndThrottle(g, handling.Seconds()*100, lim, now)
	return e.count(&e.throttled.request, &e.throttled.nRequest, d)
}

func (e *enforcer) produceThrottle(c kernel.QuotaClient, bytes int64, now time.Time) time.Duration {
	lim, g, ok := e.limit(quota.ProducerByteRate, c)
	if !ok || bytes <= 0 {
		return 0
	}
	d := e.produce.RecordAndThrottle(g, float64(bytes), lim, now)
	return e.count(&e.throttled.produce, &e.throttled.nProduce, d)
}

func (e *enforcer) fetchThrottle(c kernel.QuotaClient, now time.Time) time.Duration {
	lim, g, ok := e.limit(quota.ConsumerByteRate, c)
	if !ok {
		return 0
	}
	d := e.fetch.Throttle(g, lim, now)
	return e.count(&e.throttled.fetch, &e.throttled.nFetch, d)
}

func (e *enforcer) fetchRecord(c kernel.QuotaClient, bytes int64, now time.Time) time.Duration {
	lim, g, ok := e.limit(quota.ConsumerByteRate, c)
	if !ok || bytes <= 0 {
		return 0
	}
	d := e.fetch.RecordAndThrottle(g, float64(bytes), lim, now)
	return e.count(&e.throttled.fetch, &e.throttled.nFetch, d)
}

func (e *enforcer) admitMutation(c kernel.QuotaClient, cost int, strict bool, now time.Time) (bool, time.Duration) {
	lim, g, ok := e.limit(quota.ControllerMutationRate, c)
	if !ok || cost <= 0 {
		return true, 0
	}
	e.mu.Lock()
	b := e.buckets[g]
	if b == nil {
		if len(e.buckets) >= e.maxBkts {
			clear(e.buckets) // forgetting history only ever lets clients through
		}
		b = rate.NewTokenBucket(e.cfg)
		e.buckets[g] = b
	}
	var (
		admitted = true
		wait     time.Duration
	)
	if strict {
		admitted, wait = b.Admit(float64(cost), lim, now)
	} else {
		wait = b.Record(float64(cost), lim, now)
	}
	e.mu.Unlock()
	return admitted, e.count(&e.throttled.mutation, &e.throttled.nMutate, wait)
}

// The kernel.Quotas methods.

// RequestThrottle implements kernel.Quotas.
func (m *Module) RequestThrottle(c kernel.QuotaClient, _ int16, handling time.Duration, now time.Time) time.Duration {
	return m.enf.requestThrottle(c, handling, now)
}

// ProduceThrottle implements kernel.Quotas.
func (m *Module) ProduceThrottle(c kernel.QuotaClient, bytes int64, now time.Time) time.Duration {
	return m.enf.produceThrottle(c, bytes, now)
}

// FetchThrottle implements kernel.Quotas.
func (m *Module) FetchThrottle(c kernel.QuotaClient, now time.Time) time.Duration {
	return m.enf.fetchThrottle(c, now)
}

// FetchRecord implements kernel.Quotas.
func (m *Module) FetchRecord(c kernel.QuotaClient, bytes int64, now time.Time) time.Duration {
	return m.enf.fetchRecord(c, bytes, now)
}

// AdmitMutation implements kernel.Quotas.
func (m *Module) AdmitMutation(c kernel.QuotaClient, cost int, strict bool, now time.Time) (bool, time.Duration) {
	return m.enf.admitMutation(c, cost, strict, now)
}
