package rate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func admit(t *testing.T, b *TokenBucket, cost, rate float64, now time.Time, wantOK bool, wantWait time.Duration) {
	t.Helper()
	ok, wait := b.Admit(cost, rate, now)
	if ok != wantOK || wait != wantWait {
		t.Errorf("Admit(%v, %v, +%v) = %v, %v; want %v, %v", cost, rate, now.Sub(t0), ok, wait, wantOK, wantWait)
	}
}

func TestTokenBucketBurst(t *testing.T) {
	b := NewTokenBucket(Config{})     // burst: rate * 11 s
	admit(t, b, 110, 10, t0, true, 0) // full: 110, down to 0
	admit(t, b, 5, 10, t0, true, 0)   // 0 is not negative: admitted, down to -5
	admit(t, b, 1, 10, t0, false, 500*time.Millisecond)
	admit(t, b, 1, 10, at(ms(499)), false, time.Millisecond)
	admit(t, b, 1, 10, at(ms(500)), true, 0) // back to 0: admitted, -1
	if w := b.Record(0, 10, at(ms(500))); w != 100*time.Millisecond {
		t.Errorf("wait %v, want 100ms", w)
	}
	// Long idle: back to the burst, no more.
	admit(t, b, 110, 10, at(time.Hour), true, 0)
	admit(t, b, 1, 10, at(time.Hour), true, 0)
	admit(t, b, 1, 10, at(time.Hour), false, 100*time.Millisecond)
}

func TestTokenBucketWholeRequest(t *testing.T) {
	b := NewTokenBucket(Config{Samples: 2, Window: time.Second}) // burst: rate * 2 s
	admit(t, b, 1000, 5, t0, true, 0)                            // 10 tokens, the whole 1000 is taken
	if w := b.Record(0, 5, t0); w != 198*time.Second {
		t.Errorf("wait %v, want 198s", w)
	}
	admit(t, b, 1, 5, at(100*time.Second), false, 98*time.Second)
	admit(t, b, 1, 5, at(198*time.Second), true, 0)
}

func TestTokenBucketRecord(t *testing.T) {
	b := NewTokenBucket(Config{})
	if w := b.Record(200, 10, t0); w != 9*time.Second { // 110 - 200 = -90
		t.Errorf("wait %v, want 9s", w)
	}
	if w := b.Record(10, 10, at(time.Second)); w != 9*time.Second { // -90 + 10 - 10
		t.Errorf("wait %v, want 9s", w)
	}
	if w := b.Record(0, 10, at(20*time.Second)); w != 0 {
		t.Errorf("wait %v, want 0", w)
	}
}

func TestTokenBucketRateChange(t *testing.T) {
	b := NewTokenBucket(Config{})
	admit(t, b, 0, 10, t0, true, 0) // 110 tokens at 10/s
	// Lowered to 1/s: the burst is 11, the tokens above it are gone.
	admit(t, b, 11, 1, at(time.Second), true, 0)
	admit(t, b, 1, 1, at(time.Second), true, 0) // -1
	admit(t, b, 1, 1, at(time.Second), false, time.Second)
	// Raised to 100/s: the debt is paid at the new rate.
	admit(t, b, 1, 100, at(time.Second+ms(10)), true, 0)
	// The time since the last call accrues at the rate of this call.
	b = NewTokenBucket(Config{})
	admit(t, b, 110, 10, t0, true, 0)                  // 0 at 10/s
	admit(t, b, 1000, 1000, at(ms(500)), true, 0)      // +500 at 1000/s: -500
	admit(t, b, 1, 1, at(ms(600)), false, ms(499_900)) // +0.1 at 1/s: -499.9
}

func TestTokenBucketNoQuota(t *testing.T) {
	b := NewTokenBucket(Config{})
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		admit(t, b, 1e9, rate, t0, true, 0)
		if w := b.Record(1e9, rate, t0); w != 0 {
			t.Errorf("Record under rate %v: %v", rate, w)
		}
	}
	// Nothing was taken.
	admit(t, b, 110, 10, t0, true, 0)
	admit(t, b, 1, 10, t0, true, 0)
}

func TestTokenBucketBadCostAndTime(t *testing.T) {
	b := NewTokenBucket(Config{})
	for _, c := range []float64{-100, math.NaN(), math.Inf(1), math.Inf(-1)} {
		admit(t, b, c, 10, at(time.Second), true, 0)
	}
	admit(t, b, 110, 10, at(time.Second), true, 0) // still full: 110
	admit(t, b, 10, 10, t0, true, 0)               // an earlier time accrues nothing: -10
	admit(t, b, 1, 10, t0, false, time.Second)
	admit(t, b, 1, 10, at(2*time.Second), true, 0) // a second after the latest time seen
}

// A client refused with a wait is admitted when it comes back after exactly that wait.
func TestTokenBucketWaitIsEnough(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := NewTokenBucket(Config{})
	now := t0
	refused := 0
	for range 10000 {
		rate := 1 + rng.Float64()*50
		now = now.Add(time.Duration(rng.Int64N(int64(ms(200)))))
		ok, wait := b.Admit(rng.Float64()*100, rate, now)
		if ok {
			continue
		}
		refused++
		if wait <= 0 {
			t.Fatalf("refused with wait %v", wait)
		}
		now = now.Add(wait)
		if ok, w := b.Admit(rng.Float64()*100, rate, now); !ok {
			t.Fatalf("refused again after the wait %v: %v", wait, w)
		}
	}
	if refused < 1000 {
		t.Fatalf("only %d refusals", refused)
	}
}

func TestTokenBucketWaitEdges(t *testing.T) {
	b := NewTokenBucket(Config{})
	admit(t, b, 110+1e-12, 10, t0, true, 0)               // -1e-12: repaid in 0.1 ps
	admit(t, b, 1, 10, t0, true, 0)                       // counts as zero: admitted
	admit(t, b, 1, 10, t0, false, 100*time.Millisecond+1) // -1-1e-12: rounded up
	// A wait beyond the largest Duration saturates.
	b = NewTokenBucket(Config{})
	admit(t, b, 1, 1e-300, t0, true, 0)
	admit(t, b, 1, 1e-300, t0, false, math.MaxInt64)
}
