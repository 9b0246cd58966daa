package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// result is what a run measured; it is printed as the summary and as the JSON line.
type result struct {
	Tool       string         `json:"tool"` // always "sluice-bench"
	Mode       string         `json:"mode"` // produce, consume, e2e
	Brokers    string         `json:"brokers"`
	Topic      string         `json:"topic"`
	Partitions int            `json:"partitions"`
	Config     map[string]any `json:"config"`

	Records       int64   `json:"records"` // produced and acknowledged, or consumed
	Bytes         int64   `json:"bytes"`   // keys + values of those records
	Seconds       float64 `json:"seconds"` // the measured span
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // 10^6 bytes
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`

	// Latency is send-to-acknowledgement for produce, produce-to-consume for e2e.
	Latency *latencySummary `json:"latency_ms,omitempty"`
	// AckLatency is e2e's send-to-acknowledgement.
	AckLatency *latencySummary `json:"ack_latency_ms,omitempty"`
	// Throttled is produce's throttle times from the brokers (throttle_time_ms), over the
	// whole run.
	Throttled *throttleStats `json:"throttled,omitempty"`

	// consume
	StartupSeconds float64 `json:"startup_seconds,omitempty"` // group: start to first assignment (join)
	// e2e
	TargetRate   float64 `json:"target_rate,omitempty"`
	SentRate     float64 `json:"sent_rate,omitempty"`
	Sent         int64   `json:"sent,omitempty"`
	Lost         int64   `json:"lost"`
	Duplicates   int64   `json:"duplicates"`
	Measured     int64   `json:"measured,omitempty"` // records after the warm-up, in Latency
	WarmupSecond float64 `json:"warmup_seconds,omitempty"`

	Broker *brokerStats `json:"broker,omitempty"`
	Client clientStats  `json:"client"`
}

type brokerStats struct {
	PID           int     `json:"pid"`
	CPUSeconds    float64 `json:"cpu_seconds"` // utime+stime during the measured span
	CPUSecPerGiB  float64 `json:"cpu_s_per_gib"`
	PeakRSSBytes  int64   `json:"peak_rss_bytes"` // VmHWM: peak since the broker started
	RSSBytes      int64   `json:"rss_bytes"`      // VmRSS at the end
	CPUUtilPerCPU float64 `json:"cpu_util"`       // CPU seconds / wall seconds (1 = one core)
}

type throttleStats struct {
	Responses int64   `json:"responses"` // responses with a throttle time
	Seconds   float64 `json:"seconds"`   // their throttle times added up
}

type clientStats struct {
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUSecPerGiB  float64 `json:"cpu_s_per_gib"`
	CPUUtilPerCPU float64 `json:"cpu_util"`
	GCCycles      uint64  `json:"gc_cycles"`
	GCPauseMaxMs  float64 `json:"gc_pause_max_ms"` // upper bound of the longest pause's bucket
	GCPauseSumMs  float64 `json:"gc_pause_total_ms"`
}

const gib = 1 << 30

func (r *result) finish(elapsed time.Duration, before, after sample) {
	r.Tool = "sluice-bench"
	r.Seconds = round(elapsed.Seconds(), 6)
	if s := elapsed.Seconds(); s > 0 {
		r.RecordsPerSec = round(float64(r.Records)/s, 1)
		r.MBPerSec = round(float64(r.Bytes)/s/1e6, 3)
	}
	perGiB := func(cpu float64) float64 {
		if r.Bytes == 0 {
			return 0
		}
		return round(cpu/(float64(r.Bytes)/gib), 3)
	}
	util := func(cpu float64) float64 {
		if elapsed <= 0 {
			return 0
		}
		return round(cpu/elapsed.Seconds(), 3)
	}
	cpu := after.clientCPU - before.clientCPU
	r.Client = clientStats{
		CPUSeconds:    round(cpu, 3),
		CPUSecPerGiB:  perGiB(cpu),
		CPUUtilPerCPU: util(cpu),
		GCCycles:      after.gcCycles - before.gcCycles,
		GCPauseMaxMs:  round(gcPauseMax(before.gcPauses, after.gcPauses)*1e3, 3),
		GCPauseSumMs:  round(gcPauseSum(before.gcPauses, after.gcPauses)*1e3, 3),
	}
	if after.broker != nil && before.broker != nil {
		bcpu := after.broker.cpu - before.broker.cpu
		r.Broker = &brokerStats{
			PID:           after.broker.pid,
			CPUSeconds:    round(bcpu, 3),
			CPUSecPerGiB:  perGiB(bcpu),
			PeakRSSBytes:  after.broker.hwm,
			RSSBytes:      after.broker.rss,
			CPUUtilPerCPU: util(bcpu),
		}
	}
}

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

func (r *result) writeSummary(w io.Writer) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s: %s, topic %s (%d partitions), brokers %s\n", r.Tool, r.Mode, r.Topic, r.Partitions, r.Brokers)
	fmt.Fprintf(&b, "  config: %s\n", configString(r.Config))
	switch r.Mode {
	case "quota":
		fmt.Fprintf(&b, "  %d entities given quotas in %.3fs, errors %d\n", r.Records, r.Seconds, r.Errors)
	case "e2e":
		fmt.Fprintf(&b, "  sent %d records in %.2fs (%.0f/s, target %.0f/s), received %d, lost %d, duplicates %d, errors %d\n",
			r.Sent, r.Seconds, r.SentRate, r.TargetRate, r.Records, r.Lost, r.Duplicates, r.Errors)
	default:
		fmt.Fprintf(&b, "  %d records, %.1f MB in %.3fs: %.0f records/s, %.2f MB/s, errors %d\n",
			r.Records, float64(r.Bytes)/1e6, r.Seconds, r.RecordsPerSec, r.MBPerSec, r.Errors)
	}
	if r.StartupSeconds > 0 {
		fmt.Fprintf(&b, "  group joined after %.3fs; throughput counts from there\n", r.StartupSeconds)
	}
	if r.FirstError != "" {
		fmt.Fprintf(&b, "  first error: %s\n", r.FirstError)
	}
	lat := func(name string, l *latencySummary) {
		if l != nil {
			fmt.Fprintf(&b, "  %s (ms, %d records): mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
				name, l.Count, l.Mean, l.P50, l.P90, l.P99, l.P999, l.Max)
		}
	}
	if r.Mode == "e2e" {
		lat("produce-to-consume latency", r.Latency)
		lat("produce ack latency", r.AckLatency)
	} else {
		lat("produce ack latency", r.Latency)
	}
	if t := r.Throttled; t != nil && t.Responses > 0 {
		fmt.Fprintf(&b, "  throttled by the broker: %d responses, %.3f s in all\n", t.Responses, t.Seconds)
	}
	c := r.Client
	fmt.Fprintf(&b, "  client: %.2f CPU-s (%.2f cores, %.2f CPU-s/GiB), %d GCs, longest pause <= %.3f ms\n",
		c.CPUSeconds, c.CPUUtilPerCPU, c.CPUSecPerGiB, c.GCCycles, c.GCPauseMaxMs)
	if br := r.Broker; br != nil {
		fmt.Fprintf(&b, "  broker pid %d: %.2f CPU-s (%.2f cores), %.3f CPU-s/GiB, peak RSS %.1f MiB, RSS now %.1f MiB\n",
			br.PID, br.CPUSeconds, br.CPUUtilPerCPU, br.CPUSecPerGiB, float64(br.PeakRSSBytes)/(1<<20), float64(br.RSSBytes)/(1<<20))
	}
	_, _ = w.Write(b.Bytes())
}

func configString(m map[string]any) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m[k])
	}
	return strings.Join(parts, " ")
}

// ---- samples of the client and the broker -------------------------------------------

type procSample struct {
	pid      int
	cpu      float64 // utime+stime seconds
	hwm, rss int64   // bytes
}

type sample struct {
	clientCPU float64
	gcCycles  uint64
	gcPauses  *metrics.Float64Histogram
	broker    *procSample
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every
// Linux architecture Go supports (the kernel exports it as a fixed ABI value).
const clockTicks = 100

// readProc reads a process's CPU time and memory from /proc.
func readProc(pid int) (*procSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, fmt.Errorf("broker pid %d: %w", pid, err)
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return nil, fmt.Errorf("broker pid %d: /proc/%d/stat: %w", pid, pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("broker pid %d: %w", pid, err)
	}
	hwm, rss := parseStatusMem(status)
	return &procSample{pid: pid, cpu: cpu, hwm: hwm, rss: rss}, nil
}

// parseStatCPU returns utime+stime in seconds from /proc/PID/stat. The command name (field
// 2) is in parentheses and may hold spaces and ')', so fields are counted after the last
// ')': state is field 3, utime 14, stime 15.
func parseStatCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want >= 13", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(ut+st) / clockTicks, nil
}

// parseStatusMem returns VmHWM and VmRSS in bytes from /proc/PID/status (0 if absent).
func parseStatusMem(status []byte) (hwm, rss int64) {
	for line := range strings.SplitSeq(string(status), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		f := strings.Fields(val)
		if len(f) < 1 {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if key == "VmHWM" {
			hwm = kb << 10
		} else {
			rss = kb << 10
		}
	}
	return hwm, rss
}

func takeSample(brokerPID int) (sample, error) {
	var s sample
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.clientCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	ms := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(ms)
	if ms[0].Value.Kind() == metrics.KindUint64 {
		s.gcCycles = ms[0].Value.Uint64()
	}
	if ms[1].Value.Kind() == metrics.KindFloat64Histogram {
		s.gcPauses = ms[1].Value.Float64Histogram()
	}
	if brokerPID > 0 {
		p, err := readProc(brokerPID)
		if err != nil {
			return s, err
		}
		s.broker = p
	}
	return s, nil
}

// gcPauseMax is the upper bound of the highest bucket whose count grew from a to b.
func gcPauseMax(a, b *metrics.Float64Histogram) float64 {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0
	}
	for i := len(b.Counts) - 1; i >= 0; i-- {
		if b.Counts[i] > a.Counts[i] {
			hi := b.Buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = b.Buckets[i]
			}
			return hi
		}
	}
	return 0
}

// gcPauseSum estimates the pauses' total from a to b with each bucket's midpoint.
func gcPauseSum(a, b *metrics.Float64Histogram) float64 {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0
	}
	var sum float64
	for i := range b.Counts {
		if d := b.Counts[i] - a.Counts[i]; d > 0 {
			lo, hi := b.Buckets[i], b.Buckets[i+1]
			if math.IsInf(lo, -1) {
				lo = 0
			}
			if math.IsInf(hi, 1) {
				hi = lo
			}
			sum += float64(d) * (lo + hi) / 2
		}
	}
	return sum
}

// ---- counters and progress -----------------------------------------------------------

// counters are a run's running totals, updated from promises and poll loops.
type counters struct {
	records atomic.Int64
	bytes   atomic.Int64
	errors  atomic.Int64
	errOnce sync.Once
	first   atomic.Pointer[string]
}

func (c *counters) fail(err error) {
	c.errors.Add(1)
	c.errOnce.Do(func() { s := err.Error(); c.first.Store(&s) })
}

func (c *counters) firstError() string {
	if p := c.first.Load(); p != nil {
		return *p
	}
	return ""
}

// progress prints a line to w every interval until ctx ends; the returned func stops it
// and waits.
func progress(ctx context.Context, w io.Writer, interval time.Duration, name string, c *counters) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		start := time.Now()
		last, lastRecs, lastBytes := start, int64(0), int64(0)
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				recs, byts := c.records.Load(), c.bytes.Load()
				d := now.Sub(last).Seconds()
				fmt.Fprintf(w, "%s: %6.1fs  %d records  %.0f records/s  %.2f MB/s  errors %d\n",
					name, now.Sub(start).Seconds(), recs, float64(recs-lastRecs)/d, float64(byts-lastBytes)/d/1e6, c.errors.Load())
				last, lastRecs, lastBytes = now, recs, byts
			}
		}
	}()
	return func() { cancel(); <-done }
}
