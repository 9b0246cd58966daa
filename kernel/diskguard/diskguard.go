package diskguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrLow: the data dir's free space is below the reserve; the write was refused.
var ErrLow = errors.New("data dir free space below the reserve")

// State is where free space stands against the reserve (see the package doc).
type State int32

const (
	Writable State = iota
	Low
	Critical
)

func (s State) String() string {
	switch s {
	case Writable:
		return "writable"
	case Low:
		return "low"
	}
	return "critical"
}

// reminderEvery bounds the "still low" log lines.
const reminderEvery = time.Minute

// Guard is the free-space monitor of one data dir.
type Guard struct {
	dir     string
	reserve int64
	log     *slog.Logger
	statfs  func(dir string) (int64, error)
	now     func() time.Time

	free atomic.Int64 // free bytes at the last sample, less those admitted since
	// low is the watched dir with the least free space at the last sample (dir or
	// one of extra): the one messages name.
	low atomic.Pointer[string]
	// extra are directories outside dir that are sampled too (Watch), each judged
	// against the same reserve; copy on write under sampleMu.
	extra    []string
	sampleMu sync.Mutex   // Sample and Watch
	state    atomic.Int32 // a State
	// errs[s] is the error Admit/Critical return in state s (built at each change, so
	// the hot path allocates nothing).
	errs atomic.Pointer[[3]error]

	mu       sync.Mutex // state changes and their log lines
	lastNote time.Time  // the last "still low" line
}

// New returns a guard of dir that keeps reserve bytes free (0: off). It has not
// sampled yet: call Sample before relying on it.
func New(dir string, reserve int64, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{dir: dir, reserve: max(reserve, 0), log: log, statfs: statfsFree, now: time.Now}
	g.free.Store(1<<62 - 1)
	g.low.Store(&g.dir)
	g.errs.Store(&[3]error{})
	return g
}

// SetStatfs replaces the free-space source (tests and benchmarks).
func (g *Guard) SetStatfs(fn func(dir string) (int64, error)) { g.statfs = fn }

// statfsFree is the bytes an unprivileged process may still write on dir's file system.
func statfsFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Dir is the watched directory; Reserve the configured reserve.
func (g *Guard) Dir() string    { return g.dir }
func (g *Guard) Reserve() int64 { return g.reserve }

// Free is the free space as of the last sample, less the bytes admitted since.
func (g *Guard) Free() int64 { return g.free.Load() }

// State is the current level.
func (g *Guard) State() State { return State(g.state.Load()) }

// Admit counts n bytes about to be written by a client write and returns nil, or an
// error wrapping ErrLow when free space is below the reserve (the write must not
// happen). A refused write is not counted.
func (g *Guard) Admit(n int64) error {
	if s := State(g.state.Load()); s != Writable {
		return g.errs.Load()[s]
	}
	if g.reserve == 0 {
		return nil
	}
	if g.free.Add(-n) < g.reserve {
		g.change(g.free.Load())
	}
	return nil
}

// Critical returns nil, or an error wrapping ErrLow when free space is below half the
// reserve: the broker's own small writes (the offsets store, metadata) must stop.
func (g *Guard) Critical() error {
	if State(g.state.Load()) == Critical {
		return g.errs.Load()[Critical]
	}
	return nil
}

// Sample reads the free space now and updates the state (logging a change). It
// returns the free bytes: the least of the data dir's and each watched dir's.
func (g *Guard) Sample() (int64, error) {
	g.sampleMu.Lock()
	defer g.sampleMu.Unlock()
	free, err := g.statfs(g.dir)
	if err != nil {
		return 0, err
	}
	low := &g.dir
	for i := range g.extra {
		f, err := g.statfs(g.extra[i])
		if err != nil {
			return 0, err
		}
		if f < free {
			free, low = f, &g.extra[i]
		}
	}
	g.low.Store(low)
	g.free.Store(free)
	g.change(free)
	return free, nil
}

// Watch adds dir, a directory outside the data dir that the broker also writes (the
// offsets store's dir: option, possibly another file system), to what is sampled:
// from now on the least free space of all of them is what the levels judge, and
// messages name the directory that has it. dir need not exist yet (its nearest
// existing parent is sampled). It samples at once and returns Sample's error.
func (g *Guard) Watch(dir string) error {
	dir = existingParent(dir)
	g.sampleMu.Lock()
	for _, d := range g.extra {
		if d == dir {
			g.sampleMu.Unlock()
			_, err := g.Sample()
			return err
		}
	}
	g.extra = append(slices.Clip(g.extra), dir)
	g.sampleMu.Unlock()
	_, err := g.Sample()
	return err
}

// existingParent is dir, or its nearest ancestor that exists.
func existingParent(dir string) string {
	dir = filepath.Clean(dir)
	for {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return dir
		}
		dir = up
	}
}

// Low is the watched directory with the least free space at the last sample.
func (g *Guard) Low() string { return *g.low.Load() }

// Run samples every interval until ctx ends. A failing statfs is logged (at most once a
// minute) and leaves the state as it was.
func (g *Guard) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := g.Sample(); err != nil && g.now().Sub(lastErr) >= reminderEvery {
			lastErr = g.now()
			g.log.Error("data dir free space unknown", "data_dir", g.dir, "err", err)
		}
	}
}

// level is the state free bytes put the guard in.
func (g *Guard) level(free int64) State {
	switch {
	case g.reserve == 0 || free >= g.reserve:
		return Writable
	case free >= g.reserve/2:
		return Low
	}
	return Critical
}

// change moves to free's level, logging the change (or, while low, a reminder at most
// once a minute).
func (g *Guard) change(free int64) {
	want := g.level(free)
	g.mu.Lock()
	defer g.mu.Unlock()
	old := State(g.state.Load())
	if want == old {
		if want != Writable && g.now().Sub(g.lastNote) >= reminderEvery {
			g.lastNote = g.now()
			g.log.Warn("data dir still low on space; client writes refused", g.args(free)...)
		}
		return
	}
	if want != Writable {
		msg := fmt.Errorf("%w: %s has %d bytes free, reserve %d (sluice.data.dir.reserve.bytes): free space there (delete topics or records, or grow the volume)", ErrLow, g.what(), free, g.reserve)
		g.errs.Store(&[3]error{nil, msg, msg})
	}
	g.state.Store(int32(want))
	g.lastNote = g.now()
	switch {
	case want == Writable:
		g.log.Info("data dir has space again; writes resume", g.args(free)...)
	case want == Critical:
		g.log.Error("data dir almost full: client writes and the broker's own writes are refused", g.args(free)...)
	case old == Writable:
		g.log.Warn("data dir low on space: produce and offset commits are refused (KAFKA_STORAGE_ERROR); reads, DeleteTopics and DeleteRecords still work", g.args(free)...)
	default:
		g.log.Warn("data dir low on space (no longer critical): produce and offset commits are still refused", g.args(free)...)
	}
}

// what names the directory that is low: "data dir D", or "directory X (outside the
// data dir D)".
func (g *Guard) what() string {
	if low := g.Low(); low != g.dir {
		return fmt.Sprintf("directory %s (outside the data dir %s)", low, g.dir)
	}
	return "data dir " + g.dir
}

func (g *Guard) args(free int64) []any {
	if low := g.Low(); low != g.dir {
		return []any{"data_dir", g.dir, "low_dir", low, "free_bytes", free, "reserve_bytes", g.reserve,
			"hint", "free space on that directory's file system or grow it"}
	}
	return []any{"data_dir", g.dir, "free_bytes", free, "reserve_bytes", g.reserve,
		"hint", "free space on the data dir's file system: delete topics or records (kafka-delete-records), lower retention, or grow the volume"}
}
