package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	// Every value lies in its bucket: above the previous bucket's high end, at most its
	// own, and the bucket is narrow (relative width < 2^-subBits).
	check := func(v int64) {
		t.Helper()
		i := bucketOf(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d, out of [0,%d)", v, i, histBuckets)
		}
		hi := bucketHigh(i)
		if v > hi {
			t.Fatalf("value %d above its bucket %d's high end %d", v, i, hi)
		}
		if i > 0 && bucketHigh(i-1) >= v {
			t.Fatalf("value %d not above bucket %d's high end %d", v, i-1, bucketHigh(i-1))
		}
		if v >= exactLimit && hi-v >= v>>subBits { // hi-v < v/128: integer maths, no rounding
			t.Fatalf("value %d in bucket [.., %d]: relative error %.4f", v, hi, float64(hi-v)/float64(v))
		}
	}
	for v := range int64(5000) {
		check(v)
	}
	r := rand.New(rand.NewPCG(1, 1))
	for range 100000 {
		check(r.Int64N(math.MaxInt64))
	}
	for s := range 63 {
		v := int64(1) << s
		check(v)
		check(v - 1)
		check(v + 1)
	}
	check(math.MaxInt64)
	for v := range int64(exactLimit) {
		if bucketHigh(bucketOf(v)) != v {
			t.Fatalf("small value %d is not exact", v)
		}
	}
}

func TestQuantileExactSmall(t *testing.T) {
	h := newHist()
	if h.Quantile(0.5) != 0 || h.Max() != 0 || h.Mean() != 0 || h.Summary() != nil {
		t.Fatal("empty histogram must report zeros and no summary")
	}
	for v := 1; v <= 100; v++ { // 1..100 ns, all exact buckets
		h.Record(time.Duration(v))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.999, 100}, {1, 100}, {0, 1}} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if h.Mean() != 50 { // 5050/100 = 50 (integer)
		t.Errorf("Mean = %v, want 50ns", h.Mean())
	}
	h.Record(-5 * time.Second) // clock step: counts as 0
	if h.Quantile(0) != 0 || h.Count() != 101 {
		t.Errorf("negative duration: min %v count %d, want 0 and 101", h.Quantile(0), h.Count())
	}
}

func TestQuantileAgainstSort(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for _, dist := range []string{"uniform", "lognormal", "bimodal"} {
		t.Run(dist, func(t *testing.T) {
			h := newHist()
			vals := make([]int64, 20000)
			for i := range vals {
				var v float64
				switch dist {
				case "uniform":
					v = r.Float64() * 50e6 // up to 50 ms
				case "lognormal":
					v = math.Exp(r.NormFloat64()*1.5 + 13) // ~0.4 ms median, long tail
				case "bimodal":
					v = 200e3
					if r.IntN(100) == 0 {
						v = 30e6
					}
				}
				vals[i] = int64(v)
				h.Record(time.Duration(vals[i]))
			}
			slices.Sort(vals)
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
				exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
				got := int64(h.Quantile(q))
				if got < exact || float64(got-exact) > float64(exact)/subCount+1 {
					t.Errorf("q=%v: got %d, exact %d (want within +%.2f%%)", q, got, exact, 100.0/subCount)
				}
			}
			if h.Max() != time.Duration(vals[len(vals)-1]) {
				t.Errorf("Max = %v, want %v", h.Max(), time.Duration(vals[len(vals)-1]))
			}
		})
	}
}

func TestHistConcurrent(t *testing.T) {
	h := newHist()
	const P, N = 8, 5000
	var wg sync.WaitGroup
	for p := range P {
		wg.Go(func() {
			for i := range N {
				h.Record(time.Duration(p*N+i) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	if h.Count() != P*N {
		t.Fatalf("Count = %d, want %d", h.Count(), P*N)
	}
	if want := time.Duration(P*N-1) * time.Microsecond; h.Max() != want {
		t.Fatalf("Max = %v, want %v", h.Max(), want)
	}
	if h.Quantile(0) != 0 {
		t.Fatalf("min = %v, want 0", h.Quantile(0))
	}
	s := h.Summary()
	if s.P50 < 19.8 || s.P50 > 20.2 { // the median of 0..39999 µs is ~20 ms
		t.Fatalf("p50 = %v ms, want ~20", s.P50)
	}
}
