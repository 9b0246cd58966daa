package rate

import (
	"math"
	"time"
)

// sample is one window of a sensor: the total recorded in it and when it started, in
// nanoseconds since the sensor's base time.
type sample struct {
	start int64
	value float64
}

// Sensor is one sampled rate: a ring of Config.Samples samples, each covering
// Config.Window from its first record. Create one with NewSensor.
//
// A Sensor is not safe for concurrent use: the caller guards it (Sensors gives each of
// its sensors a lock).
type Sensor struct {
	p      *params
	base   time.Time // times are kept as nanoseconds since base, the first time seen
	based  bool      // base is set
	latest int64     // the latest time seen; an earlier now counts as this one
	cur    int       // ring index of the newest sample
	n      int       // live samples: ring[cur], ring[cur-1], ... ring[cur-n+1] (mod len)
	ring   []sample

	// The burst cap (only with Config.Burst > 0): a leaky bucket holding what was
	// recorded, drained at the limit of the latest call that gave one. level is its
	// content at levelAt; it is never negative, and it is 0 while there is no limit, so
	// a quota set later starts from an empty bucket.
	level    float64
	levelAt  int64   // when level was last drained, ns since base
	levelLim float64 // the drain rate, units per second; 0: none known yet
}

// NewSensor returns an empty sensor: rate 0, idle.
func NewSensor(c Config) *Sensor {
	s := &Sensor{}
	s.init(newParams(c))
	return s
}

// init readies a zero Sensor with the parameters p (shared, read only).
func (s *Sensor) init(p *params) {
	s.p = p
	s.ring = make([]sample, p.samples)
}

// at returns now as nanoseconds since the sensor's base, never earlier than a time
// already seen: with several callers, a now read just before another caller's later
// one lands in the current sample instead of moving time back.
func (s *Sensor) at(now time.Time) int64 {
	if !s.based {
		s.base, s.based = now, true
	}
	t := int64(now.Sub(s.base))
	if t < s.latest {
		return s.latest
	}
	s.latest = t
	return t
}

// purge drops the samples that started span or more before t. The live samples are
// ordered by start, oldest at the tail, so it stops at the first young one.
func (s *Sensor) purge(t int64) {
	for s.n > 0 && t-s.ring[s.oldest()].start >= s.p.span {
		s.n--
	}
}

// oldest is the ring index of the oldest live sample (meaningful when n > 0).
func (s *Sensor) oldest() int {
	i := s.cur - s.n + 1
	if i < 0 {
		i += len(s.ring)
	}
	return i
}

// Record adds v at now: to the newest sample if it started less than Window before now,
// else to a new sample starting at now, and to the burst bucket once a call gave a
// limit. v must be finite and not negative; other values are ignored.
func (s *Sensor) Record(v float64, now time.Time) {
	if !usable(v) {
		return
	}
	s.record(v, s.at(now))
}

func (s *Sensor) record(v float64, t int64) {
	if s.p.burst > 0 && s.levelLim > 0 {
		s.drain(t)
		s.level += v
	}
	s.purge(t)
	if s.n > 0 && t-s.ring[s.cur].start < s.p.window {
		s.ring[s.cur].value += v
		return
	}
	// A new sample, in the slot after cur. That slot is free: samples start at least a
	// window apart, so with all of them live the oldest started a full span before now
	// and was just purged. (Only a span saturated at the largest Duration breaks that;
	// then the oldest sample is overwritten.)
	s.cur++
	if s.cur == len(s.ring) {
		s.cur = 0
	}
	s.ring[s.cur] = sample{start: t, value: v}
	if s.n < len(s.ring) {
		s.n++
	}
}

// Unrecord takes v back from the newest sample, as for a fetch whose bytes were
// recorded but not sent. The sample does not go below zero; v is not carried into older
// samples. Nothing happens if there is no live sample or v is not finite and positive.
func (s *Sensor) Unrecord(v float64, now time.Time) {
	if !usable(v) {
		return
	}
	s.purge(s.at(now))
	if s.n == 0 {
		return
	}
	c := &s.ring[s.cur]
	c.value = math.Max(c.value-v, 0)
	if s.p.burst > 0 {
		s.drain(s.latest)
		s.level = math.Max(s.level-v, 0)
	}
}

// drain empties the burst bucket by what its limit let out since levelAt, to t.
func (s *Sensor) drain(t int64) {
	if d := t - s.levelAt; d > 0 && s.levelLim > 0 {
		s.level = math.Max(s.level-s.levelLim*seconds(d), 0)
	}
	if t > s.levelAt {
		s.levelAt = t
	}
}

// limitTo drains the burst bucket to t at the limit it had, then makes limit its
// drain rate: a call's limit counts from that call on. No limit empties it.
func (s *Sensor) limitTo(limit float64, t int64) {
	if s.p.burst <= 0 {
		return
	}
	s.drain(t)
	if !limited(limit) {
		s.level, s.levelLim = 0, 0
		return
	}
	s.levelLim = limit
}

// measure returns the total of the live samples and the elapsed time the rate divides
// by, in seconds, at t (purged first). ok is false when there is no live sample.
func (s *Sensor) measure(t int64) (total, elapsed float64, ok bool) {
	s.purge(t)
	if s.n == 0 {
		return 0, 0, false
	}
	for i, j := 0, s.cur; i < s.n; i++ {
		total += s.ring[j].value
		if j--; j < 0 {
			j = len(s.ring) - 1
		}
	}
	e := t - s.ring[s.oldest()].start
	if e < s.p.pad {
		e = s.p.pad
	}
	return total, seconds(e), true
}

// Rate is the rate at now, in units per second: the total of the live samples over the
// time since the oldest one started, but at least (Samples-1)*Window. 0 when there is
// no live sample.
func (s *Sensor) Rate(now time.Time) float64 {
	total, elapsed, ok := s.measure(s.at(now))
	if !ok {
		return 0
	}
	return total / elapsed
}

// Throttle is the throttle time at now for limit (no recording): 0 when the rate is at
// or below limit, else (rate-limit)/limit*elapsed, at most MaxThrottle. limit <= 0 or
// NaN: 0.
func (s *Sensor) Throttle(limit float64, now time.Time) time.Duration {
	t := s.at(now)
	s.limitTo(limit, t)
	if !(limit > 0) {
		return 0
	}
	return s.throttle(limit, t)
}

// throttle is the sampled rate's throttle, or with a burst cap the bucket's.
func (s *Sensor) throttle(limit float64, t int64) time.Duration {
	if s.p.burst > 0 {
		// The time for the bucket to drain back to limit*Burst.
		if over := s.level - limit*s.p.burst; over > 0 {
			return durationOf(over/limit, s.p.maxDelay)
		}
		return 0
	}
	total, elapsed, ok := s.measure(t)
	if !ok || total/elapsed <= limit {
		return 0
	}
	// (rate-limit)/limit*elapsed with rate*elapsed = total, one rounding fewer.
	return durationOf((total-limit*elapsed)/limit, s.p.maxDelay)
}

// RecordAndThrottle records v and returns the throttle time for limit, as Kafka does
// (record first, then check).
func (s *Sensor) RecordAndThrottle(v, limit float64, now time.Time) time.Duration {
	t := s.at(now)
	s.limitTo(limit, t)
	if usable(v) {
		s.record(v, t)
	}
	if !(limit > 0) {
		return 0
	}
	return s.throttle(limit, t)
}

// Idle reports whether the sensor has no live sample and an empty burst bucket at now:
// its rate is 0 and dropping it forgets nothing.
func (s *Sensor) Idle(now time.Time) bool {
	t := s.at(now)
	s.purge(t)
	if s.p.burst > 0 {
		s.drain(t)
	}
	return s.n == 0 && s.level == 0
}

// expiry is when the sensor becomes idle, in its nanoseconds, if nothing more is
// recorded: a span after its newest sample started, or when its burst bucket is
// empty, whichever is later. math.MinInt64 when it is idle.
func (s *Sensor) expiry() int64 {
	e := int64(math.MinInt64)
	if s.n > 0 {
		e = s.ring[s.cur].start + s.p.span
	}
	if s.level > 0 && s.levelLim > 0 {
		ns := s.level / s.levelLim * 1e9
		end := int64(math.MaxInt64)
		if ns < float64(math.MaxInt64-s.levelAt) {
			end = s.levelAt + int64(math.Ceil(ns))
		}
		e = max(e, end)
	}
	return e
}
