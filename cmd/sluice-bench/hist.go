package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// hist is a log-linear latency histogram over durations in nanoseconds, in the manner of
// HdrHistogram: values below 2^(subBits+1) ns have a bucket each; above that, every
// power-of-two range [2^e, 2^(e+1)) is split into 2^subBits equal buckets. A value is
// therefore reported with a relative error below 2^-subBits (0.8%): a percentile is the
// highest value its bucket holds, never less than the true one, and never above the
// largest value recorded.
//
// Record is safe for concurrent use (atomic adds; no lock on the hot path). Snapshot
// readers see each counter atomically but not all of them at one instant, which only
// matters while records are still arriving.
//
// Layout of the bucket index i for a value v (subBits = 7, so 128 sub-buckets):
//
//	v < 256:             i = v                      (exact)
//	v >= 256:            s = bits.Len64(v) - 8      (shift, >= 1)
//	                     i = 256 + (s-1)*128 + (v>>s - 128)
//
// and bucket i (>= 256) holds [m<<s, (m+1)<<s - 1] with m = 128 + (i-256)%128,
// s = (i-256)/128 + 1.
type hist struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // ns; wraps only after ~584 years of summed latency
	max    atomic.Int64
	min    atomic.Int64 // valid when n > 0; math.MaxInt64 initially
}

const (
	subBits     = 7
	subCount    = 1 << subBits             // 128 buckets per power of two
	exactLimit  = 2 * subCount             // 256: values below have their own bucket
	histBuckets = exactLimit + 56*subCount // shifts 1..56 cover every int64
)

func newHist() *hist {
	h := &hist{}
	h.min.Store(math.MaxInt64)
	return h
}

func bucketOf(v int64) int {
	if v < exactLimit {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	s := bits.Len64(uint64(v)) - (subBits + 1)
	return exactLimit + (s-1)*subCount + int(uint64(v)>>uint(s)) - subCount
}

// bucketHigh is the largest value bucket i holds.
func bucketHigh(i int) int64 {
	if i < exactLimit {
		return int64(i)
	}
	s := (i-exactLimit)/subCount + 1
	m := int64(subCount + (i-exactLimit)%subCount)
	return (m+1)<<uint(s) - 1
}

// Record adds one duration; negative durations (a clock step) count as 0.
func (h *hist) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(uint64(v))
	for cur := h.max.Load(); v > cur && !h.max.CompareAndSwap(cur, v); cur = h.max.Load() {
	}
	for cur := h.min.Load(); v < cur && !h.min.CompareAndSwap(cur, v); cur = h.min.Load() {
	}
}

// Count is the number of values recorded.
func (h *hist) Count() uint64 { return h.n.Load() }

// Quantile returns the value at quantile q (0 < q <= 1): the smallest bucket bound below
// which at least ceil(q*n) values lie, capped at the largest value recorded. It returns 0
// for an empty histogram.
func (h *hist) Quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min.Load())
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	max := h.max.Load()
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return time.Duration(min(bucketHigh(i), max))
		}
	}
	return time.Duration(max)
}

// Mean is the exact mean of the values recorded.
func (h *hist) Mean() time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Max is the largest value recorded (0 when empty).
func (h *hist) Max() time.Duration {
	if h.n.Load() == 0 {
		return 0
	}
	return time.Duration(h.max.Load())
}

// latencySummary is a histogram's figures in milliseconds, as the JSON line carries them.
type latencySummary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

func (h *hist) Summary() *latencySummary {
	if h.Count() == 0 {
		return nil
	}
	return &latencySummary{
		Count: h.Count(),
		Mean:  ms(h.Mean()),
		P50:   ms(h.Quantile(0.50)),
		P90:   ms(h.Quantile(0.90)),
		P99:   ms(h.Quantile(0.99)),
		P999:  ms(h.Quantile(0.999)),
		Max:   ms(h.Max()),
	}
}

// ms is d in milliseconds rounded to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
