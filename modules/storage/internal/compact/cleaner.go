package compact

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Log is what the cleaner needs of a log whose cleanup.policy includes compact.
type Log interface {
	// Cleanable reports how dirty the log is at nowMs, and whether it wants a pass:
	// its dirty ratio reached min.cleanable.dirty.ratio, or max.compaction.lag.ms
	// passed for its oldest dirty record (Due).
	Cleanable(nowMs int64) (Candidate, bool)
	// Clean runs one pass with env's map and throttle.
	Clean(ctx context.Context, env *Env) (Result, error)
	// Name names the log in log lines ("topic-partition").
	Name() string
}

// Candidate is how dirty a log is.
type Candidate struct {
	DirtyRatio float64
	DirtyBytes int64
	Due        bool // max.compaction.lag.ms passed: clean whatever the ratio
}

// Env is what one pass gets from the cleaner thread that runs it.
type Env struct {
	Map   *OffsetMap
	NowMs int64
	// Throttle waits until n more bytes of cleaner I/O are allowed
	// (log.cleaner.io.max.bytes.per.second, shared by the threads).
	Throttle func(ctx context.Context, n int) error
}

// Result is what one pass did.
type Result struct {
	Stats
	FirstDirty int64 // the log's first dirty offset after the pass
	MapKeys    int   // distinct keys in the offset map
	MapBytes   int   // memory of the offset map's table
}

// Config is the cleaner's broker configuration (Kafka's log.cleaner.* names).
type Config struct {
	Threads             int     // log.cleaner.threads
	BackoffMs           int64   // log.cleaner.backoff.ms
	DedupeBufferSize    int64   // log.cleaner.dedupe.buffer.size, shared by the threads
	LoadFactor          float64 // log.cleaner.io.buffer.load.factor
	IOMaxBytesPerSecond float64 // log.cleaner.io.max.bytes.per.second
}

// Totals are the cleaner's counters since it started.
type Totals struct {
	Passes, Errors int64
	Stats
	MaxMapBytes int64 // the largest offset map table any pass used
	// LastPassMs is the duration of the latest pass.
	LastPassMs int64
}

// Cleaner runs cfg.Threads goroutines that pick the dirtiest log due for cleaning and
// clean it, one pass at a time; with nothing to do a thread waits log.cleaner.backoff.ms.
// A log is cleaned by one thread at a time. A pass that fails is logged (once per
// failure) and the log is left alone for ten backoffs: the broker never stops for a log
// it cannot clean.
type Cleaner struct {
	cfg     Config
	logger  *slog.Logger
	now     func() time.Time
	limiter *rate.Limiter

	mu     sync.Mutex
	busy   map[Log]bool
	failed map[Log]int64 // until when (ms) a failed log is skipped
	last   map[Log]lastPass

	totalsMu sync.Mutex
	totals   Totals

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ioBurst is the most cleaner I/O one throttle wait covers.
const ioBurst = 1 << 20

// NewCleaner returns a stopped cleaner.
func NewCleaner(cfg Config, logger *slog.Logger, now func() time.Time) *Cleaner {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	cfg.Threads = max(cfg.Threads, 0)
	lim := rate.NewLimiter(rate.Inf, ioBurst)
	if r := cfg.IOMaxBytesPerSecond; r > 0 && r < math.MaxFloat64/2 {
		lim = rate.NewLimiter(rate.Limit(r), ioBurst)
	}
	return &Cleaner{cfg: cfg, logger: logger, now: now, limiter: lim, busy: map[Log]bool{}, failed: map[Log]int64{}, last: map[Log]lastPass{}}
}

// Start starts the threads over the logs that logs returns (called each time a
// thread looks for work).
func (c *Cleaner) Start(logs func() []Log) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	for range c.cfg.Threads {
		c.wg.Add(1)
		go c.thread(ctx, logs)
	}
}

// Stop stops the threads (a pass in progress is abandoned, leaving the log as it was)
// and waits for them.
func (c *Cleaner) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// Totals returns the counters.
func (c *Cleaner) Totals() Totals {
	c.totalsMu.Lock()
	defer c.totalsMu.Unlock()
	return c.totals
}

func (c *Cleaner) thread(ctx context.Context, logs func() []Log) {
	defer c.wg.Done()
	per := c.cfg.DedupeBufferSize / int64(max(c.cfg.Threads, 1))
	m := NewOffsetMap(per, c.cfg.LoadFactor)
	backoff := time.Duration(max(c.cfg.BackoffMs, 1)) * time.Millisecond
	for ctx.Err() == nil {
		l := c.pick(logs())
		if l == nil {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		c.run(ctx, l, m)
	}
}

// pick marks and returns the dirtiest log that wants cleaning (a due one first).
func (c *Cleaner) pick(logs []Log) Log {
	nowMs := c.now().UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Forget logs that are gone (removed, closed), so the maps stay bounded by the
	// partitions served.
	if len(c.last)+len(c.failed) > 0 {
		live := make(map[Log]bool, len(logs))
		for _, l := range logs {
			live[l] = true
		}
		for l := range c.last {
			if !live[l] {
				delete(c.last, l)
			}
		}
		for l := range c.failed {
			if !live[l] {
				delete(c.failed, l)
			}
		}
	}
	var best Log
	var bestC Candidate
	for _, l := range logs {
		if c.busy[l] || c.failed[l] > nowMs {
			continue
		}
		cand, ok := l.Cleanable(nowMs)
		if !ok {
			continue
		}
		if best == nil || (cand.Due && !bestC.Due) || (cand.Due == bestC.Due && cand.DirtyRatio > bestC.DirtyRatio) {
			best, bestC = l, cand
		}
	}
	if best != nil {
		c.busy[best] = true
		delete(c.failed, best)
	}
	return best
}

func (c *Cleaner) run(ctx context.Context, l Log, m *OffsetMap) (Result, error) {
	start := c.now()
	env := &Env{Map: m, NowMs: start.UnixMilli(), Throttle: c.throttle}
	res, err := l.Clean(ctx, env)
	took := c.now().Sub(start)
	c.mu.Lock()
	delete(c.busy, l)
	failed := err != nil && ctx.Err() == nil
	if failed {
		c.failed[l] = c.now().UnixMilli() + 10*max(c.cfg.BackoffMs, 1000)
	}
	c.last[l] = lastPass{atMs: start.UnixMilli(), firstDirty: res.FirstDirty, failed: failed}
	c.mu.Unlock()
	c.totalsMu.Lock()
	c.totals.Passes++
	c.totals.Stats.Add(res.Stats)
	c.totals.MaxMapBytes = max(c.totals.MaxMapBytes, int64(res.MapBytes))
	c.totals.LastPassMs = took.Milliseconds()
	if err != nil && ctx.Err() == nil {
		c.totals.Errors++
	}
	c.totalsMu.Unlock()
	switch {
	case err != nil && ctx.Err() == nil:
		c.logger.Warn("log cleaner: pass failed; the log is skipped for a while", "log", l.Name(), "err", err)
	case err == nil && res.BytesRead > 0:
		c.logger.Debug("log cleaner: pass done", "log", l.Name(), "bytes_read", res.BytesRead, "bytes_written", res.BytesWritten,
			"records_removed", res.RecordsRemoved, "first_dirty_offset", res.FirstDirty, "took", took)
	}
	return res, err
}

func (c *Cleaner) throttle(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, ioBurst)
		if err := c.limiter.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// lastPass is what the cleaner remembers of a log's latest pass (metrics).
type lastPass struct {
	atMs       int64
	firstDirty int64
	failed     bool
}
