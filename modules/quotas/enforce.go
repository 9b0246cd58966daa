package quotas

import (
	"net/netip"
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
	conn    *rate.Sensors[netip.Addr] // connection_creation_rate, by client address

	mu      sync.Mutex
	buckets map[quota.Group]*rate.TokenBucket // controller_mutation_rate (KIP-599)
	maxBkts int

	throttled throttleCounts
	// throttleTime measures each client group's throttle seconds per second (the
	// share of time it is held), for the busiest groups' metrics.
	throttleTime *rate.Sensors[throttleKey]
}

// quotaKind is a quota type, as the metrics name it.
type quotaKind uint8

const (
	kindProduce quotaKind = iota
	kindFetch
	kindRequest
	kindMutation
	kindConnection
	nKinds
)

var kindNames = [nKinds]string{"produce", "fetch", "request", "mutation", "connection"}

// throttleCounts are the throttle times handed out, by quota type, in seconds, and
// how many responses carried one.
type throttleCounts struct {
	mu      sync.Mutex
	seconds [nKinds]float64
	n       [nKinds]int64
}

// throttleKey is one client group's throttle time sensor: its quota type and group.
type throttleKey struct {
	kind quotaKind
	g    quota.Group
}

// newEnforcer builds the sensors. The byte-rate and request sensors take cfg's burst
// (sluice.quota.burst.ms); connection_creation_rate keeps Kafka's sampled throttle,
// where a short storm of connections within the window's allowance is expected.
func newEnforcer(cfg rate.Config, maxSensors int, set func() *quota.Set) *enforcer {
	sampled := cfg
	sampled.Burst = 0
	return &enforcer{
		cfg: cfg, set: set,
		produce: rate.NewSensors[quota.Group](cfg, maxSensors),
		fetch:   rate.NewSensors[quota.Group](cfg, maxSensors),
		request: rate.NewSensors[quota.Group](cfg, maxSensors),
		conn:    rate.NewSensors[netip.Addr](sampled, maxSensors),
		buckets: map[quota.Group]*rate.TokenBucket{},
		maxBkts: maxSensors,

		throttleTime: rate.NewSensors[throttleKey](sampled, maxSensors),
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

// count notes a throttle of d handed to group g for a quota of kind, and returns d.
func (e *enforcer) count(kind quotaKind, g quota.Group, d time.Duration, now time.Time) time.Duration {
	if d > 0 {
		e.throttled.mu.Lock()
		e.throttled.seconds[kind] += d.Seconds()
		e.throttled.n[kind]++
		e.throttled.mu.Unlock()
		if kind != kindConnection { // addresses are not client groups
			e.throttleTime.RecordAndThrottle(throttleKey{kind, g}, d.Seconds(), 0, now)
		}
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
	return e.count(kindRequest, g, d, now)
}

func (e *enforcer) produceThrottle(c kernel.QuotaClient, bytes int64, now time.Time) time.Duration {
	lim, g, ok := e.limit(quota.ProducerByteRate, c)
	if !ok || bytes <= 0 {
		return 0
	}
	d := e.produce.RecordAndThrottle(g, float64(bytes), lim, now)
	return e.count(kindProduce, g, d, now)
}

func (e *enforcer) fetchThrottle(c kernel.QuotaClient, now time.Time) time.Duration {
	lim, g, ok := e.limit(quota.ConsumerByteRate, c)
	if !ok {
		return 0
	}
	d := e.fetch.Throttle(g, lim, now)
	return e.count(kindFetch, g, d, now)
}

func (e *enforcer) fetchRecord(c kernel.QuotaClient, bytes int64, now time.Time) time.Duration {
	lim, g, ok := e.limit(quota.ConsumerByteRate, c)
	if !ok || bytes <= 0 {
		return 0
	}
	d := e.fetch.RecordAndThrottle(g, float64(bytes), lim, now)
	return e.count(kindFetch, g, d, now)
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
	return admitted, e.count(kindMutation, g, wait, now)
}

// admitConnection charges a new connection from ip (KIP-612) and returns its throttle.
func (e *enforcer) admitConnection(ip netip.Addr, now time.Time) time.Duration {
	s := e.set()
	if s == nil || s.Len() == 0 || !ip.IsValid() {
		return 0
	}
	lim, ok := s.ResolveIP(ip.Unmap().String())
	if !ok {
		return 0
	}
	d := e.conn.RecordAndThrottle(ip.Unmap(), 1, lim, now)
	return e.count(kindConnection, quota.Group{}, d, now)
}

// sweep drops the sensors of client groups idle at now.
func (e *enforcer) sweep(now time.Time) {
	e.conn.Sweep(now)
	e.produce.Sweep(now)
	e.fetch.Sweep(now)
	e.request.Sweep(now)
	e.throttleTime.Sweep(now)
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

// AdmitConnection implements kernel.Quotas.
func (m *Module) AdmitConnection(ip netip.Addr, now time.Time) time.Duration {
	return m.enf.admitConnection(ip, now)
}

// AdmitMutation implements kernel.Quotas.
func (m *Module) AdmitMutation(c kernel.QuotaClient, cost int, strict bool, now time.Time) (bool, time.Duration) {
	return m.enf.admitMutation(c, cost, strict, now)
}
