package rate

import (
	"math"
	"time"
)

// Defaults of Config, Kafka's quota.window.num and quota.window.size.seconds.
const (
	DefaultSamples = 11
	DefaultWindow  = time.Second
	// DefaultMax is the default bound on the number of sensors a Sensors holds.
	DefaultMax = 100_000
)

// Config is the sampling configuration (quota.window.num, quota.window.size.seconds).
// The zero value is Kafka's default: 11 samples of 1 s, throttles capped at 11 s.
// Samples == 0 is the default 11; any other value below 2 is 2.
type Config struct {
	Samples     int           // default 11; values < 2 mean 2
	Window      time.Duration // default 1s; <= 0 means default
	MaxThrottle time.Duration // default Samples*Window; <= 0 means default
	// Burst > 0 throttles by a leaky bucket instead of the sampled rate: the bucket
	// holds what was recorded and drains at the limit, and a client is throttled for
	// as long as the bucket needs to drain back to limit*Burst. So a client gets its
	// limit over any span, plus at most Burst's worth (and one request) at once. The
	// sampled rate is still measured (Rate). <= 0: Kafka's sampled throttle, which
	// lets a client that was idle, or whose burst just aged out of the window, send
	// (Samples-1)*Window of quota at once.
	Burst time.Duration
}

// params is a Config with its defaults applied and its derived spans, in nanoseconds.
// Sensors share one; it is never written after it is built.
type params struct {
	samples  int
	window   int64         // a sample's length
	span     int64         // samples*window: a sample this old is purged
	pad      int64         // (samples-1)*window: the shortest elapsed time a rate divides by
	maxDelay time.Duration // the throttle cap
	burst    float64       // Config.Burst in seconds; 0: no burst cap
}

// newParams applies c's defaults. Samples == 0 is the default 11 and any other value
// below 2 is 2: with one sample the rate would fall to 0 each time the sample rolls.
func newParams(c Config) *params {
	n := c.Samples
	switch {
	case n == 0:
		n = DefaultSamples
	case n < 2:
		n = 2
	}
	w := c.Window
	if w <= 0 {
		w = DefaultWindow
	}
	p := &params{
		samples: n,
		window:  int64(w),
		span:    mulSat(int64(n), int64(w)),
		pad:     mulSat(int64(n-1), int64(w)),
	}
	if c.Burst > 0 {
		p.burst = c.Burst.Seconds()
	}
	p.maxDelay = c.MaxThrottle
	if p.maxDelay <= 0 {
		p.maxDelay = time.Duration(p.span)
	}
	return p
}

// mulSat is a*b for a, b >= 0, saturating at math.MaxInt64.
func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// seconds converts nanoseconds to seconds.
func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// durationOf converts s seconds (>= 0, possibly +Inf) to a Duration, rounded to the
// nearest nanosecond, no longer than limit.
func durationOf(s float64, limit time.Duration) time.Duration {
	ns := math.Round(s * 1e9)
	if !(ns < float64(limit)) { // also +Inf and NaN
		return limit
	}
	if ns <= 0 {
		return 0
	}
	return time.Duration(ns)
}

// usable reports whether v may be recorded: finite and not negative.
func usable(v float64) bool { return v >= 0 && v <= math.MaxFloat64 }
