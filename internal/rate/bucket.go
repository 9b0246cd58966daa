package rate

import (
	"math"
	"time"
)

// TokenBucket is KIP-599's controller mutation quota: tokens accrue at rate per second
// up to a burst of rate*Samples*Window; a mutation is admitted when the bucket is not
// negative before it, and then its whole cost is taken, which may drive the bucket
// negative; the wait is how long until the bucket is back to zero. The bucket starts
// full (Kafka's bucket starts empty at time 0, which fills it by the first use).
//
// The rate is given to each call and may change between calls: the time since the
// previous call accrues at the rate of this call, and the bucket is then capped at this
// call's burst. So lowering the rate drops the tokens above the new burst at once, and
// a debt (negative tokens) is paid back at the new rate. A rate <= 0, NaN or +Inf is no
// quota: everything is admitted, nothing taken, and the wait is 0.
//
// A TokenBucket is not safe for concurrent use: the caller guards it.
type TokenBucket struct {
	burstSecs float64 // Samples*Window in seconds: the burst is rate*burstSecs
	tokens    float64
	last      time.Time // the latest time seen
	started   bool      // tokens and last are set
}

// NewTokenBucket returns a full bucket (it fills on first use) with the burst window
// of c (Samples*Window; MaxThrottle is unused: the wait is not capped).
func NewTokenBucket(c Config) *TokenBucket {
	return &TokenBucket{burstSecs: seconds(newParams(c).span)}
}

// Admit reports whether a mutation of cost may proceed at now under rate; if so it
// takes the cost and wait is 0. When refused, nothing is taken and wait is the time
// until the bucket is back to zero. cost must be finite and not negative (else it
// counts as 0).
func (b *TokenBucket) Admit(cost, rate float64, now time.Time) (ok bool, wait time.Duration) {
	if !limited(rate) {
		return true, 0
	}
	b.refill(rate, now)
	if w := b.wait(rate); w > 0 {
		return false, w
	}
	b.take(cost)
	return true, 0
}

// Record takes cost at now under rate without checking (for permissive callers, such
// as older request versions) and returns the wait: the time until the bucket is back to
// zero, 0 if it is not negative. Record(0, ...) reads the wait without taking anything.
func (b *TokenBucket) Record(cost, rate float64, now time.Time) time.Duration {
	if !limited(rate) {
		return 0
	}
	b.refill(rate, now)
	b.take(cost)
	return b.wait(rate)
}

// limited reports whether rate is a quota: positive and finite.
func limited(rate float64) bool { return rate > 0 && rate <= math.MaxFloat64 }

// refill accrues the tokens since the previous call at rate, up to rate's burst. A now
// earlier than one already seen accrues nothing.
func (b *TokenBucket) refill(rate float64, now time.Time) {
	burst := rate * b.burstSecs
	if !b.started {
		b.tokens, b.last, b.started = burst, now, true
		return
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens += rate * seconds(int64(d))
		b.last = now
	}
	b.tokens = math.Min(b.tokens, burst)
}

func (b *TokenBucket) take(cost float64) {
	if usable(cost) {
		b.tokens -= cost
	}
}

// wait is the time until the bucket is back to zero at rate, rounded up to the
// nanosecond. A deficit repaid in under half a nanosecond counts as none: the clock
// cannot tell it apart from zero, and without this the rounding of the accrual could
// refuse a client that waited exactly the wait it was given.
func (b *TokenBucket) wait(rate float64) time.Duration {
	if b.tokens >= 0 {
		return 0
	}
	ns := -b.tokens / rate * 1e9
	if ns < 0.5 {
		return 0
	}
	if !(ns < math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(ns))
}
