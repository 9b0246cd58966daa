package segmentlog

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The file-handle cache bounds the descriptors a Store's segment files hold.
//
// Every segment file (.log, .index, .timeindex) is a *cfile: a path and, while it is
// open, a descriptor. A cfile is opened when an operation needs it and stays open until
// the cache needs the slot for another one, chosen by a clock (second chance) over the
// open cfiles. So a broker with 100,000 partitions and a limit of 20,000 descriptors
// keeps the recently used segments open, and appends and reads to the others reopen
// their files through the cache.
//
// Invariants:
//   - A cfile with pins > 0 is never closed by the cache: every operation pins it for
//     its duration (acquire/release), and a file handed to a response (a kernel.Chunk
//     sent with sendfile) stays pinned until the ReadResult is released (readHandle).
//     So a descriptor is never closed, nor its number reused, under a reader.
//   - open counts the cfiles with a descriptor; it exceeds budget only while every
//     open cfile is pinned (the budget is soft; the kernel's limit is the hard one).
//   - A cfile's path is what a reopen opens. A rename of the file goes through
//     cfile.rename, under cfile.mu, so a reopen never opens a stale name.
//   - A reopen never truncates, and never creates a .log: only the first open of a
//     new segment does (a missing index file is created empty, as it reads empty).
//     A new segment's index files are opened (created, truncated) at their first use
//     (newLazyFile), so an index that is never written is never created.
//   - dirty is set by every write (but a resize of an index's zero tail, truncateKeepClean)
//     and cleared only by a successful Sync or by openLog (markSynced); a cfile of
//     newLazyFile starts clean (it holds nothing until written), any other starts
//     dirty (its file may hold unsynced pages of an earlier run), so Sync of an
//     evicted, clean file needs no descriptor and an evicted dirty one is reopened
//     to be synced (fsync covers the inode's pages, whichever descriptor wrote them).
//
// Lock order: fileCache.mu, then the cfile.mu of the file being opened, then the
// cfile.mu of an eviction victim. The hit path takes only its own cfile.mu, and only
// the holder of fileCache.mu takes a second cfile.mu, so the order has no cycle. The
// cache locks nest inside Log.mu (operations run under it).

// errFDExhausted marks an operation that failed because the process or the system is
// out of file descriptors (EMFILE, ENFILE). It is an I/O failure like any other to
// the callers (KAFKA_STORAGE_ERROR at the response edge), never kernel.ErrCorrupt, so
// recovery does not truncate over it.
var errFDExhausted = errors.New("out of file descriptors")

// isFDExhausted reports whether err is EMFILE or ENFILE.
func isFDExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// defaultFileBudget is the number of segment files the cache keeps open when the
// broker config does not set sluice.log.open.files.max: half the soft RLIMIT_NOFILE,
// leaving the other half to sockets, the offset store, raft and the rest; at least 64.
func defaultFileBudget() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1 << 16
	}
	return max(int(min(rl.Cur, 1<<30)/2), 64)
}

// fileCache is one Store's set of open segment files.
type fileCache struct {
	budget int
	logger *slog.Logger
	// tails is the store's allowance for in-memory segment tails (tail.go): the other
	// thing that decides what a read costs.
	tails tailBudget

	mu   sync.Mutex
	ring []*cfile // the open cfiles; the clock hand sweeps it
	hand int
	// open is len(ring), readable without mu: a release that finds the cache over
	// its budget (after a burst of pinned files) closes the excess.
	open atomic.Int64
	hint atomic.Int64 // budget
	// heldByReads counts the .log pins held by ReadResults handed out (released when
	// the response is written). A read that would take it past half the budget copies
	// its bytes instead (reserveReadPins), so a fetch over tens of thousands of
	// partitions cannot pin every descriptor the process has.
	heldByReads atomic.Int64

	hits, misses, evictions, exhausted atomic.Int64
	failLog                            rateLog
}

func newFileCache(budget int, logger *slog.Logger) *fileCache {
	if budget <= 0 {
		budget = defaultFileBudget()
	}
	c := &fileCache{budget: max(budget, 4), logger: logger, failLog: rateLog{every: 10 * time.Second}}
	c.hint.Store(int64(c.budget))
	c.tails.left.Store(defaultTailBudget)
	return c
}

// budgetHint is budget, readable without mu.
func (c *fileCache) budgetHint() int { return int(c.hint.Load()) }

// setBudget changes the number of files kept open; a smaller one takes effect as
// files are opened.
func (c *fileCache) setBudget(n int) {
	if n <= 0 {
		n = defaultFileBudget()
	}
	c.mu.Lock()
	c.budget = max(n, 4)
	c.hint.Store(int64(c.budget))
	c.mu.Unlock()
}

// openCount is how many cfiles hold a descriptor.
func (c *fileCache) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ring)
}

// cfile is a segment file that the cache opens on demand. Its fields are guarded by mu.
type cfile struct {
	c      *fileCache
	mu     sync.Mutex
	path   string
	flag   int      // for reopening: never O_TRUNC (nor O_CREATE for a .log)
	first  int      // when not 0, the flag of the first open (newLazyFile), then 0
	f      *os.File // nil while not open
	pins   int
	ref    bool // the clock's referenced bit
	slot   int  // index in c.ring while open
	dirty  bool
	closed bool // close was called; no more reopening
}

// newFile opens path with flag (the first open may create or truncate) and returns
// it as a cfile of the cache, open and unpinned, that reopens with reopen.
func (c *fileCache) newFile(path string, flag, reopen int) (*cfile, error) {
	cf := &cfile{c: c, path: path, flag: reopen &^ (os.O_TRUNC | os.O_EXCL), dirty: true}
	c.mu.Lock()
	defer c.mu.Unlock()
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if err := c.openLocked(cf, flag); err != nil {
		return nil, err
	}
	return cf, nil
}

// lazyFile returns a cfile of the cache for an existing path, not opened yet.
func (c *fileCache) lazyFile(path string, flag int) *cfile {
	return &cfile{c: c, path: path, flag: flag &^ (os.O_TRUNC | os.O_EXCL), dirty: true}
}

// newLazyFile returns a cfile of the cache, not opened yet and clean, that opens with
// first the first time it is used and with reopen after that: a file this process
// creates (first has O_CREATE) or one whose contents are on stable storage.
func (c *fileCache) newLazyFile(path string, first, reopen int) *cfile {
	return &cfile{c: c, path: path, first: first, flag: reopen &^ (os.O_TRUNC | os.O_EXCL)}
}

// openLocked opens cf (not open) with flag, evicting to stay within the budget, and
// adds it to the ring. Called with c.mu and cf.mu held.
func (c *fileCache) openLocked(cf *cfile, flag int) error {
	c.evictLocked(len(c.ring) + 1 - c.budget)
	f, err := os.OpenFile(cf.path, flag, 0o644)
	if err != nil && isFDExhausted(err) {
		// The budget was too generous for what else the process holds: give back
		// every idle descriptor and try once more.
		c.evictLocked(len(c.ring))
		f, err = os.OpenFile(cf.path, flag, 0o644)
	}
	if err != nil {
		if isFDExhausted(err) {
			c.exhausted.Add(1)
			if n, ok := c.failLog.allow(); ok {
				c.logger.Error("out of file descriptors opening a segment file; answering KAFKA_STORAGE_ERROR", "path", cf.path, "open_files", len(c.ring), "budget", c.budget, "suppressed", n, "err", err)
			}
			return fmt.Errorf("open %s: %w: %w", cf.path, errFDExhausted, err)
		}
		return err
	}
	c.misses.Add(1)
	cf.f, cf.ref, cf.slot = f, true, len(c.ring)
	c.ring = append(c.ring, cf)
	c.open.Store(int64(len(c.ring)))
	return nil
}

// evictLocked closes up to n idle (unpinned) files, sweeping the clock at most twice
// round. Called with c.mu held (and the opening cfile's mu, which is not in the ring).
func (c *fileCache) evictLocked(n int) {
	for steps := 2 * len(c.ring); n > 0 && steps > 0 && len(c.ring) > 0; steps-- {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		x := c.ring[c.hand]
		x.mu.Lock()
		if x.pins > 0 || x.ref {
			x.ref = false
			x.mu.Unlock()
			c.hand++
			continue
		}
		if err := x.f.Close(); err != nil {
			c.logger.Warn("close idle segment file", "path", x.path, "err", err)
		}
		x.f = nil
		c.removeLocked(x)
		x.mu.Unlock()
		c.evictions.Add(1)
		n--
	}
}

// removeLocked takes x out of the ring (swapping the last one into its slot). Called
// with c.mu and x.mu held.
func (c *fileCache) removeLocked(x *cfile) {
	last := len(c.ring) - 1
	if x.slot != last {
		y := c.ring[last]
		c.ring[x.slot] = y
		y.slot = x.slot // y.slot is only read and written under c.mu
	}
	c.ring[last] = nil
	c.ring = c.ring[:last]
	c.open.Store(int64(len(c.ring)))
}

// maxPinned is how many segment files one read may pin: a fetch over many tiny
// segments returns a prefix (the client fetches the rest next) rather than holding a
// large part of the budget. At least 64, so that ordinary reads are never cut short.
func (c *fileCache) maxPinned() int {
	return max(c.budgetHint()/8, 64)
}

// reserveReadPins reserves n pins for a ReadResult that keeps them until it is
// released, and reports whether it may: at most half the budget is held by results at
// once (at least maxPinned, so one ordinary read always fits). A false answer reserves
// nothing; the caller copies the bytes out and unpins at once.
func (c *fileCache) reserveReadPins(n int) bool {
	limit := int64(max(c.budgetHint()/2, c.maxPinned()))
	if c.heldByReads.Add(int64(n)) <= limit {
		return true
	}
	c.heldByReads.Add(-int64(n))
	return false
}

// unreserveReadPins gives back what reserveReadPins reserved.
func (c *fileCache) unreserveReadPins(n int) { c.heldByReads.Add(-int64(n)) }

// trim closes idle files while more than the budget are open.
func (c *fileCache) trim() {
	c.mu.Lock()
	c.evictLocked(len(c.ring) - c.budget)
	c.mu.Unlock()
}

// acquire returns cf's descriptor, opening it if needed, pinned until release.
func (cf *cfile) acquire() (*os.File, error) {
	cf.mu.Lock()
	if cf.f != nil {
		cf.pins++
		cf.ref = true
		f := cf.f
		cf.mu.Unlock()
		cf.c.hits.Add(1)
		return f, nil
	}
	cf.mu.Unlock()
	c := cf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if cf.closed {
		return nil, fmt.Errorf("%s: %w", cf.path, os.ErrClosed)
	}
	if cf.f == nil {
		flag := cf.flag
		if cf.first != 0 {
			flag = cf.first
		}
		if err := c.openLocked(cf, flag); err != nil {
			return nil, err
		}
		cf.first = 0
	}
	cf.pins++
	return cf.f, nil
}

// release drops a pin taken by acquire.
func (cf *cfile) release() {
	cf.mu.Lock()
	cf.pins--
	idle := cf.pins == 0
	cf.mu.Unlock()
	if idle && int(cf.c.open.Load()) > cf.c.budgetHint() {
		cf.c.trim()
	}
}

// close closes the descriptor for good (the segment is gone or closed). Nothing may
// hold a pin.
func (cf *cfile) close() error {
	c := cf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	cf.mu.Lock()
	defer cf.mu.Unlock()
	cf.closed = true
	if cf.f == nil {
		return nil
	}
	err := cf.f.Close()
	cf.f = nil
	c.removeLocked(cf)
	return err
}

// rename renames the file and makes reopens use the new name. A missing file is
// renamed in name only (as os.Rename's callers here ignore ErrNotExist).
func (cf *cfile) rename(to string) error {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	err := os.Rename(cf.path, to)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		cf.path = to
	}
	return err
}

// setPath makes reopens use to, which the caller has renamed the file to.
func (cf *cfile) setPath(to string) {
	cf.mu.Lock()
	cf.path = to
	cf.mu.Unlock()
}

// Name is the file's current path.
func (cf *cfile) Name() string {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	return cf.path
}

// ReadAt is pread through the cache.
func (cf *cfile) ReadAt(b []byte, off int64) (int, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	return f.ReadAt(b, off)
}

// WriteAt is pwrite through the cache.
func (cf *cfile) WriteAt(b []byte, off int64) (int, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	cf.markDirty()
	return f.WriteAt(b, off)
}

// Truncate is ftruncate through the cache.
func (cf *cfile) Truncate(size int64) error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	cf.markDirty()
	return f.Truncate(size)
}

// truncateKeepClean is Truncate without marking the file dirty, for a resize whose
// loss in a crash is harmless (indexFile.resize).
func (cf *cfile) truncateKeepClean(size int64) error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	return f.Truncate(size)
}

// markClean records that the file holds nothing unsynced (see segment.markSynced).
func (cf *cfile) markClean() {
	cf.mu.Lock()
	cf.dirty = false
	cf.mu.Unlock()
}

// Stat is fstat through the cache.
func (cf *cfile) Stat() (os.FileInfo, error) {
	f, err := cf.acquire()
	if err != nil {
		return nil, err
	}
	defer cf.release()
	return f.Stat()
}

// Sync fsyncs the file if it was written since the last Sync.
func (cf *cfile) Sync() error {
	cf.mu.Lock()
	if !cf.dirty {
		cf.mu.Unlock()
		return nil
	}
	cf.dirty = false
	cf.mu.Unlock()
	f, err := cf.acquire()
	if err == nil {
		err = f.Sync()
		cf.release()
	}
	if err != nil {
		cf.markDirty()
	}
	return err
}

func (cf *cfile) markDirty() {
	cf.mu.Lock()
	cf.dirty = true
	cf.mu.Unlock()
}

// rateLog lets one line through per window and counts the ones it held back.
type rateLog struct {
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether to log now, and how many lines were held back since the last.
func (r *rateLog) allow() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.suppressed++
		return 0, false
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	return n, true
}
