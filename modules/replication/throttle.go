package replication

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/rate"
)

// Replication throttles (Kafka's KIP-73), so that moving a partition's data to a new
// replica does not take the bandwidth producers and in-sync followers need.
//
//   - Which replicas: the topic configs leader.replication.throttled.replicas and
//     follower.replication.throttled.replicas, "*" or partition:broker pairs. A broker
//     applies the pairs naming itself (Kafka's rule): on the leader side the pair is
//     the leader's, on the follower side the follower's. placement keeps the answer
//     for this broker, recomputed when the topic's config changes.
//   - How fast: the broker configs leader.replication.throttled.rate and
//     follower.replication.throttled.rate, bytes per second for all throttled replicas
//     of this broker together, measured over replication.quota.window.num samples of
//     replication.quota.window.size.seconds.
//   - Only replicas out of the ISR are throttled (an in-sync follower is never held
//     back, or a throttle could shrink the ISR under producers): on the leader a
//     fetching follower outside the committed ISR, on the follower itself while the
//     image's ISR does not list it.
//   - Leader side (fetch.go, readOne): while the leader's throttled rate is over its
//     limit, a throttled partition answers no records (its HW still goes out); what it
//     does send is counted. Follower side (fetcher.go): while the follower's rate is
//     over, throttled partitions are left out of the fetch; what comes back for them
//     is counted. Both check before and count after, as Kafka does, so a single fetch
//     may overshoot by up to replica.fetch.max.bytes per partition; the windowed rate
//     pays it back.

// replThrottle holds the two throttled rates of this broker.
type replThrottle struct {
	mu       sync.Mutex
	cfg      rate.Config
	leader   *rate.Sensor
	follower *rate.Sensor
}

// throttleSide names one of the two throttles.
type throttleSide bool

const (
	leaderSide   throttleSide = true
	followerSide throttleSide = false
)

// sensorLocked returns side's sensor for cfg, made anew when the window config changed.
func (t *replThrottle) sensorLocked(side throttleSide, cfg rate.Config) *rate.Sensor {
	if t.leader == nil || t.cfg != cfg {
		t.cfg = cfg
		t.leader, t.follower = rate.NewSensor(cfg), rate.NewSensor(cfg)
	}
	if side == leaderSide {
		return t.leader
	}
	return t.follower
}

// over reports how long side is over limit at now (0: not over, or no limit).
func (t *replThrottle) over(side throttleSide, rc *replicaConfig, now time.Time) time.Duration {
	limit := rc.throttleRate(side)
	if limit <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sensorLocked(side, rc.throttleWindow).Throttle(limit, now)
}

// record counts bytes replicated for throttled replicas on side. Nothing is counted
// while side has no limit (so setting one starts from a clean rate).
func (t *replThrottle) record(side throttleSide, rc *replicaConfig, bytes int64, now time.Time) {
	if bytes <= 0 || rc.throttleRate(side) <= 0 {
		return
	}
	t.mu.Lock()
	t.sensorLocked(side, rc.throttleWindow).Record(float64(bytes), now)
	t.mu.Unlock()
}

// rate is side's measured throttled rate in bytes per second (metrics).
func (t *replThrottle) rate(side throttleSide, rc *replicaConfig, now time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sensorLocked(side, rc.throttleWindow).Rate(now)
}

// throttleRate is side's limit in bytes per second; 0 is none.
func (rc *replicaConfig) throttleRate(side throttleSide) float64 {
	r := rc.followerRate
	if side == leaderSide {
		r = rc.leaderRate
	}
	return r
}

// replicationRate turns a *.replication.throttled.rate into a limit: Kafka's default
// (Long.MAX_VALUE) is none, 0 or more is that many bytes per second (0 stops
// throttled replication altogether).
func replicationRate(v int64) float64 {
	if v == math.MaxInt64 || v < 0 {
		return 0
	}
	return math.Max(float64(v), math.SmallestNonzeroFloat64)
}

// replicationWindow is the sampling of the replication throttles.
func replicationWindow(b *kconfig.Broker) rate.Config {
	return rate.Config{
		Samples: int(max(b.ReplicationQuotaWindowNum, 1)),
		Window:  time.Duration(max(b.ReplicationQuotaWindowSizeSeconds, 1)) * time.Second,
	}
}

// throttledReplica reports whether list (a *.replication.throttled.replicas value,
// canonical: "*" or "p:b,p:b") throttles partition on broker. It does not allocate.
func throttledReplica(list string, partition, broker int32) bool {
	if list == "" {
		return false
	}
	if list == "*" {
		return true
	}
	for list != "" {
		var e string
		e, list, _ = strings.Cut(list, ",")
		ps, bs, ok := strings.Cut(strings.TrimSpace(e), ":")
		if !ok {
			continue
		}
		p, err1 := strconv.ParseInt(strings.TrimSpace(ps), 10, 32)
		b, err2 := strconv.ParseInt(strings.TrimSpace(bs), 10, 32)
		if err1 == nil && err2 == nil && int32(p) == partition && int32(b) == broker {
			return true
		}
	}
	return false
}
