package rate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       Config
		samples int
		window  time.Duration
		max     time.Duration
	}{
		{name: "zero", c: Config{}, samples: 11, window: time.Second, max: 11 * time.Second},
		{name: "one sample", c: Config{Samples: 1}, samples: 2, window: time.Second, max: 2 * time.Second},
		{name: "negative", c: Config{Samples: -3, Window: -time.Second, MaxThrottle: -1}, samples: 2, window: time.Second, max: 2 * time.Second},
		{name: "set", c: Config{Samples: 5, Window: 2 * time.Second, MaxThrottle: 3 * time.Second}, samples: 5, window: 2 * time.Second, max: 3 * time.Second},
		{name: "huge", c: Config{Samples: 4, Window: math.MaxInt64 / 2}, samples: 4, window: math.MaxInt64 / 2, max: math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newParams(tc.c)
			if p.samples != tc.samples || time.Duration(p.window) != tc.window || p.maxDelay != tc.max {
				t.Errorf("got %d samples of %v, max %v; want %d of %v, max %v",
					p.samples, time.Duration(p.window), p.maxDelay, tc.samples, tc.window, tc.max)
			}
		})
	}
}

func TestRatePadding(t *testing.T) {
	s := NewSensor(Config{})
	if r := s.Rate(t0); r != 0 || !s.Idle(t0) {
		t.Fatalf("fresh sensor: rate %v, idle %v", r, s.Idle(t0))
	}
	s.Record(1000, t0)
	for _, tc := range []struct {
		d    time.Duration
		want float64
	}{
		{0, 100},                          // 1000 over the padded 10 s
		{5 * time.Second, 100},            // still padded
		{10 * time.Second, 100},           // exactly (Samples-1)*Window
		{ms(10500), 1000 / 10.5},          // elapsed beyond the padding
		{11*time.Second - 1, 1000 / 11.0}, // the last instant before the purge (to a ns)
	} {
		if r := s.Rate(at(tc.d)); math.Abs(r-tc.want) > 1e-6 {
			t.Errorf("rate at %v: %v, want %v", tc.d, r, tc.want)
		}
	}
}

func TestRateSteady(t *testing.T) {
	s := NewSensor(Config{})
	var d time.Duration
	for ; d < 20*time.Second; d += ms(100) {
		s.Record(100, at(d))
	}
	if r := s.Rate(at(d)); math.Abs(r-1000) > 10 {
		t.Errorf("rate after 20 s of 1000/s: %v, want 1000 within 1%%", r)
	}
	// The samples started at 0, 1, ... 19 s; at 20 s those of 10 to 19 s are live.
	if s.n != 10 {
		t.Errorf("%d live samples, want 10", s.n)
	}
}

func TestPurge(t *testing.T) {
	s := NewSensor(Config{})
	for d := time.Duration(0); d < 5*time.Second; d += ms(100) {
		s.Record(100, at(d))
	}
	last := 5*time.Second - ms(100)
	if s.Idle(at(last + 10*time.Second)) {
		t.Fatal("idle 10 s after the last record")
	}
	// The newest sample started at 4 s: it is purged at 15 s, 11 s after its start.
	if s.Idle(at(15*time.Second - 1)) {
		t.Fatal("idle before the newest sample is a span old")
	}
	if r := s.Rate(at(last + 12*time.Second)); r != 0 || !s.Idle(at(last+12*time.Second)) {
		t.Errorf("after 12 s of silence: rate %v, idle %v; want 0, true", r, s.Idle(at(last+12*time.Second)))
	}
	// Recording again starts afresh, padding included.
	s.Record(500, at(30*time.Second))
	if r := s.Rate(at(30 * time.Second)); r != 50 {
		t.Errorf("rate after a purge and one record of 500: %v, want 50", r)
	}
}

// A sample starts at its first record, not on a second boundary.
func TestSampleStartsAtFirstRecord(t *testing.T) {
	s := NewSensor(Config{})
	s.Record(1, at(ms(700)))
	s.Record(1, at(ms(1500))) // 800 ms after the sample's start: same sample
	if s.n != 1 {
		t.Fatalf("%d samples, want 1", s.n)
	}
	s.Record(1, at(ms(1700))) // a full window after: a new sample
	if s.n != 2 || s.ring[s.cur].start != int64(ms(1000)) {
		t.Fatalf("%d samples, newest at %v; want 2, 1s after the first record", s.n, time.Duration(s.ring[s.cur].start))
	}
	// Purged 11 s after 700 ms: at 11.7 s only the second sample (1) is left.
	if r := s.Rate(at(ms(11700))); r != 0.1 {
		t.Errorf("rate %v, want 0.1", r)
	}
}

func TestRingWraps(t *testing.T) {
	s := NewSensor(Config{Samples: 3, Window: time.Second})
	for i := range 100 {
		s.Record(float64(i), at(time.Duration(i)*time.Second))
		if s.n > 3 {
			t.Fatalf("%d live samples after %d records, more than 3", s.n, i+1)
		}
	}
	// Live at 99 s: the samples of 97, 98 and 99 s; elapsed 2 s (= the padding).
	if r := s.Rate(at(99 * time.Second)); r != (97+98+99)/2.0 {
		t.Errorf("rate %v, want %v", r, (97+98+99)/2.0)
	}
}

func TestThrottleFormula(t *testing.T) {
	type rec struct {
		d time.Duration
		v float64
	}
	for _, tc := range []struct {
		name  string
		c     Config
		recs  []rec
		limit float64
		now   time.Duration
		want  time.Duration
	}{
		{name: "under", recs: []rec{{0, 500}}, limit: 100, want: 0},
		{name: "at the limit", recs: []rec{{0, 1000}}, limit: 100, want: 0},
		// rate 2000/10 s = 200; (200-100)/100 * 10 s.
		{name: "twice the limit, padded", recs: []rec{{0, 2000}}, limit: 100, want: 10 * time.Second},
		{name: "1.5x, padded", recs: []rec{{0, 1500}}, limit: 100, want: 5 * time.Second},
		// Measured later, still inside the padding: the same.
		{name: "padded, later", recs: []rec{{0, 1500}}, limit: 100, now: 4 * time.Second, want: 5 * time.Second},
		// rate 2000/10.5 s; (2000/10.5 - 100)/100 * 10.5 s = 9.5 s.
		{name: "beyond the padding", recs: []rec{{0, 1000}, {ms(10500), 1000}}, limit: 100, now: ms(10500), want: ms(9500)},
		// The first sample purged: 1000/10 s = 100: not over.
		{name: "after a purge", recs: []rec{{0, 5000}, {ms(10500), 1000}}, limit: 100, now: 11 * time.Second, want: 0},
		// Samples=2 of 500 ms: padding 500 ms; 100/0.5 s = 200; 0.5 s.
		{name: "short windows", c: Config{Samples: 2, Window: ms(500)}, recs: []rec{{0, 100}}, limit: 100, want: ms(500)},
		{name: "fractional", recs: []rec{{0, 1001}}, limit: 100, want: ms(10)},
		{name: "cap", recs: []rec{{0, 1e6}}, limit: 1, want: 11 * time.Second},
		{name: "configured cap", c: Config{MaxThrottle: 3 * time.Second}, recs: []rec{{0, 1e6}}, limit: 1, want: 3 * time.Second},
		{name: "limit zero", recs: []rec{{0, 1e6}}, limit: 0, want: 0},
		{name: "limit negative", recs: []rec{{0, 1e6}}, limit: -1, want: 0},
		{name: "limit NaN", recs: []rec{{0, 1e6}}, limit: math.NaN(), want: 0},
		{name: "limit infinite", recs: []rec{{0, 1e6}}, limit: math.Inf(1), want: 0},
		{name: "limit tiny", recs: []rec{{0, 1}}, limit: 1e-300, want: 11 * time.Second},
		{name: "nothing recorded", limit: 1, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSensor(tc.c)
			for _, r := range tc.recs {
				s.Record(r.v, at(r.d))
			}
			if got := s.Throttle(tc.limit, at(tc.now)); got != tc.want {
				t.Errorf("Throttle: %v, want %v", got, tc.want)
			}
			// RecordAndThrottle of the last record gives the same.
			if n := len(tc.recs); n > 0 && tc.now == tc.recs[n-1].d {
				s2 := NewSensor(tc.c)
				var got time.Duration
				for _, r := range tc.recs {
					got = s2.RecordAndThrottle(r.v, tc.limit, at(r.d))
				}
				if got != tc.want {
					t.Errorf("RecordAndThrottle: %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// The throttle is the silence after which the rate is the limit again, when the window
// only stretches meanwhile: no sample is purged and the elapsed time is past the padding.
func TestThrottleIsTheSilenceThatReachesTheLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewSensor(Config{MaxThrottle: time.Hour})
	const limit = 1000.0
	checked := 0
	var now time.Duration
	for range 20000 {
		now += time.Duration(rng.Int64N(int64(ms(300))))
		d := s.RecordAndThrottle(rng.Float64()*300, limit, at(now))
		if d == 0 {
			continue
		}
		next := now
		if rng.IntN(2) == 0 {
			next += d // obey the throttle half the time
		}
		tn := int64(at(now).Sub(s.base))
		oldest := s.ring[s.oldest()].start
		if tn-oldest < s.p.pad || oldest+s.p.span <= tn+int64(d) {
			now = next
			continue // padded now, or a purge before the silence ends
		}
		c := *s // measure a copy: Rate would move s's clock past the next record
		c.ring = slices.Clone(s.ring)
		if r := c.Rate(at(now + d)); math.Abs(r-limit) > 1e-6 {
			t.Fatalf("at %v: rate %v after the throttle %v, want %v", now, r, d, limit)
		}
		checked++
		now = next
	}
	if checked < 1000 {
		t.Fatalf("only %d throttles checked", checked)
	}
}

func TestUnrecord(t *testing.T) {
	s := NewSensor(Config{})
	s.Unrecord(10, t0) // nothing to take from
	if !s.Idle(t0) {
		t.Fatal("Unrecord on an empty sensor made a sample")
	}
	s.Record(100, t0)
	s.Unrecord(30, t0)
	if r := s.Rate(t0); r != 7 {
		t.Errorf("rate after 100-30: %v, want 7", r)
	}
	s.Unrecord(1000, t0)
	if r := s.Rate(t0); r != 0 {
		t.Errorf("rate after taking more than recorded: %v, want 0", r)
	}
	if s.Idle(t0) {
		t.Error("a floored sample still exists: not idle")
	}

	// Only the newest sample is taken from.
	s = NewSensor(Config{})
	s.Record(100, t0)
	s.Record(50, at(time.Second))
	s.Unrecord(80, at(time.Second))
	if r := s.Rate(at(time.Second)); r != 10 {
		t.Errorf("rate after unrecording 80 from a newest sample of 50: %v, want 100/10", r)
	}
	s.Record(20, at(time.Second))
	if r := s.Rate(at(time.Second)); r != 12 {
		t.Errorf("rate after recording 20 more: %v, want 120/10", r)
	}
	// Bad values change nothing.
	for _, v := range []float64{-5, math.NaN(), math.Inf(1)} {
		s.Unrecord(v, at(time.Second))
	}
	if r := s.Rate(at(time.Second)); r != 12 {
		t.Errorf("rate after bad unrecords: %v, want 12", r)
	}
}

func TestRecordIgnoresBadValues(t *testing.T) {
	s := NewSensor(Config{})
	for _, v := range []float64{-1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		s.Record(v, t0)
		if d := s.RecordAndThrottle(v, 1, t0); d != 0 {
			t.Errorf("RecordAndThrottle(%v): %v", v, d)
		}
	}
	if !s.Idle(t0) || s.Rate(t0) != 0 {
		t.Errorf("bad values were recorded: idle %v, rate %v", s.Idle(t0), s.Rate(t0))
	}
	// Zero is a value: it opens a sample.
	s.Record(0, t0)
	if s.Idle(t0) {
		t.Error("a record of 0 left the sensor idle")
	}
}

// A now earlier than one already seen counts as the latest seen.
func TestTimeGoingBack(t *testing.T) {
	s := NewSensor(Config{})
	s.Record(100, at(5*time.Second))
	s.Record(100, at(time.Second)) // before the sensor's first record
	s.Record(100, at(ms(5500)))
	s.Record(100, at(ms(5200)))
	if s.n != 1 {
		t.Errorf("%d samples, want 1", s.n)
	}
	if r := s.Rate(at(2 * time.Second)); r != 40 {
		t.Errorf("rate %v, want 400/10", r)
	}
	// The base is the first time seen, so earlier times are negative offsets.
	s = NewSensor(Config{})
	s.Rate(at(time.Hour))
	s.Record(100, t0)
	if r := s.Rate(at(time.Hour)); r != 10 {
		t.Errorf("rate %v, want 10", r)
	}
}

// The monotonic clock is used when both times carry it.
func TestMonotonicTimes(t *testing.T) {
	s := NewSensor(Config{})
	now := time.Now()
	s.Record(100, now)
	s.Record(100, now.Add(ms(500)))
	if r := s.Rate(now.Add(ms(600))); r != 20 {
		t.Errorf("rate %v, want 20", r)
	}
}

// The burst bucket: what was recorded drains at the limit, and a client is throttled
// for as long as it takes to drain back to limit*Burst.
func TestSensorBurst(t *testing.T) {
	const lim = 100.0
	s := NewSensor(Config{Burst: time.Second})
	if d := s.RecordAndThrottle(100, lim, at(0)); d != 0 {
		t.Fatalf("a burst's worth: throttled %v, want 0", d)
	}
	if d := s.RecordAndThrottle(50, lim, at(0)); d != ms(500) {
		t.Fatalf("half a second over the burst: throttled %v, want 500ms", d)
	}
	// The sampled rate alone (150 over 10 s) would not throttle at all.
	if r := s.Rate(at(0)); r != 15 {
		t.Fatalf("rate %v, want 15 (still measured)", r)
	}
	if d := s.Throttle(lim, at(ms(250))); d != ms(250) {
		t.Fatalf("a quarter second later: %v, want 250ms", d)
	}
	if d := s.Throttle(lim, at(ms(500))); d != 0 {
		t.Fatalf("after the throttle: %v, want 0", d)
	}
	// Unrecord takes back from the bucket, not below empty.
	s.RecordAndThrottle(80, lim, at(ms(500))) // 100 + 80
	s.Unrecord(30, at(ms(500)))
	if d := s.Throttle(lim, at(ms(500))); d != ms(500) {
		t.Fatalf("after unrecording 30 of 80: %v, want 500ms", d)
	}
	// A lower limit drains slower from the call that gives it: 150 at 50/s is 2 s
	// from a cap of 50.
	if d := s.Throttle(50, at(ms(500))); d != 2*time.Second {
		t.Fatalf("at half the limit: %v, want 2s", d)
	}
	if d := s.Throttle(50, at(ms(1500))); d != time.Second {
		t.Fatalf("a second later at half the limit: %v, want 1s", d)
	}
	// No limit empties the bucket: a quota set later starts afresh.
	if d := s.RecordAndThrottle(1000, 0, at(ms(1500))); d != 0 {
		t.Fatalf("no limit: %v", d)
	}
	if d := s.RecordAndThrottle(100, lim, at(ms(1500))); d != 0 {
		t.Fatalf("after the quota came back: %v, want 0", d)
	}
}

// A sensor whose samples aged out is idle only once its bucket is empty too, so a
// Sensors never forgets a throttle it still owes.
func TestSensorBurstIdle(t *testing.T) {
	const lim = 1.0
	s := NewSensor(Config{Samples: 2, Window: time.Second, MaxThrottle: time.Hour, Burst: time.Second})
	if d := s.RecordAndThrottle(10, lim, at(0)); d != 9*time.Second {
		t.Fatalf("throttled %v, want 9s", d)
	}
	if got, want := s.expiry(), int64(10*time.Second); got != want {
		t.Errorf("expiry %v, want %v (the bucket empties after the samples age out)", time.Duration(got), time.Duration(want))
	}
	if s.Idle(at(3 * time.Second)) {
		t.Error("idle at 3 s with 7 in the bucket")
	}
	if d := s.Throttle(lim, at(3*time.Second)); d != 6*time.Second {
		t.Errorf("at 3 s, samples gone: throttled %v, want 6s", d)
	}
	if !s.Idle(at(10 * time.Second)) {
		t.Error("not idle at 10 s, bucket empty and samples gone")
	}
	// A record with no limit known yet does not fill the bucket.
	u := NewSensor(Config{Burst: time.Second})
	u.Record(1e9, at(0))
	if !u.Idle(at(11 * time.Second)) {
		t.Error("a sensor never given a limit is not idle after its samples aged out")
	}
}
