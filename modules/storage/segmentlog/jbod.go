package segmentlog

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/kernel/diskguard"
)

// dirSet is the module's log directories (log.dirs, JBOD): one Store per directory,
// all under one segment-file budget. Invariants:
//
//   - A partition has one directory on this broker: OpenStore refuses a set in which
//     two directories hold the same partition (Kafka's "duplicate log directories"),
//     and a partition's place is fixed (where) from its first open until Remove, or
//     until AlterReplicaLogDirs moves it (move.go), which changes it in one step.
//   - A new partition goes to the preferred directory an AlterReplicaLogDirs named
//     for it, else to the online directory holding the fewest partitions (Kafka's
//     rule).
//   - A directory that failed (at start: it could not be opened; later: dirfail.go)
//     takes only its own partitions offline. While a directory that failed at start
//     is down, its contents are unknown, so a partition found in no healthy
//     directory is offline too (it may be in the failed one), new partitions
//     included, as Kafka does for replicas not known to be new: fix the directory,
//     or take it out of log.dirs, and restart (the replicas it held are then created
//     empty and fetched again from their leaders).
type dirSet struct {
	logger *slog.Logger
	files  *fileCache
	stores []*Store        // the directories that opened, in log.dirs order
	down   []kernel.LogDir // the directories that failed to open (Err set)

	// swapMus: Open and Remove of a partition hold its stripe (swapMu) shared, a
	// move's swap exclusively, so no open or removal sees a partition half moved
	// (move.go). Striped, so a swap's fsyncs hold up only the partitions that share
	// its stripe, not every open and removal of the broker.
	swapMus [swapStripes]sync.RWMutex

	mu        sync.Mutex
	where     map[kernel.TopicPartition]*Store
	count     map[*Store]int
	preferred map[kernel.TopicPartition]*Store
	// handles are the open partitions' kernel.Logs (handle.go): one per open log,
	// so a move can switch its holder to the copy.
	handles map[kernel.TopicPartition]*handle
	moves   map[kernel.TopicPartition]*move
	stopped bool           // stopMoves ran: no move starts
	wg      sync.WaitGroup // the moves' goroutines
}

// openDirSet opens every directory; one that fails to open is down (logged), as long
// as another one opens.
func openDirSet(paths []string, logger *slog.Logger) (*dirSet, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &dirSet{
		logger: logger, files: newFileCache(0, logger),
		where: map[kernel.TopicPartition]*Store{}, count: map[*Store]int{},
		preferred: map[kernel.TopicPartition]*Store{},
		handles:   map[kernel.TopicPartition]*handle{}, moves: map[kernel.TopicPartition]*move{},
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			d.closeAll()
			return nil, fmt.Errorf("log dir %s listed twice", p)
		}
		seen[p] = true
		s, err := openStore(p, logger, d.files)
		if err != nil {
			logger.Error("log dir failed to open: its partitions are offline", "dir", p, "err", err)
			d.down = append(d.down, kernel.LogDir{Path: p, Err: err, TotalBytes: -1, UsableBytes: -1})
			continue
		}
		d.stores = append(d.stores, s)
		for _, tp := range s.found {
			if other := d.where[tp]; other != nil {
				keep, err := d.settleMove(tp, other, s)
				if err != nil {
					d.stores = append(d.stores, s)
					d.closeAll()
					return nil, err
				}
				if keep == other {
					continue
				}
				d.count[other]--
			}
			d.where[tp] = s
			d.count[s]++
		}
		s.found = nil
	}
	if len(d.stores) == 0 {
		return nil, fmt.Errorf("no log dir could be opened: %w", errors.Join(errsOf(d.down)...))
	}
	return d, nil
}

// settleMove resolves a partition found in two log dirs: a move crashed between
// renaming its copy into place and deleting the old directory (move.go). The copy
// holds the marker and is kept; the other is deleted. Without a marker the two are
// not a move's (a copy made by hand): the broker refuses to start, as Kafka does.
func (d *dirSet) settleMove(tp kernel.TopicPartition, a, b *Store) (keep *Store, err error) {
	marked := func(s *Store) bool {
		_, err := os.Stat(filepath.Join(s.dir, tp.String(), movedMarker))
		return err == nil
	}
	ma, mb := marked(a), marked(b)
	if ma == mb {
		return nil, fmt.Errorf("partition %v is in two log dirs, %s and %s: remove one copy", tp, a.dir, b.dir)
	}
	keep, drop := a, b
	if mb {
		keep, drop = b, a
	}
	gone, err := drop.renameAway(tp)
	if err == nil && gone != "" {
		err = os.RemoveAll(gone)
	}
	if err != nil {
		return nil, fmt.Errorf("partition %v: delete the old copy of an interrupted move in %s: %w", tp, drop.dir, err)
	}
	drop.mu.Lock()
	drop.forgetRemovedLocked(tp)
	drop.mu.Unlock()
	if err := os.Remove(filepath.Join(keep.dir, tp.String(), movedMarker)); err != nil {
		return nil, err
	}
	d.logger.Warn("finished an interrupted replica move", "topic", tp.Topic, "partition", tp.Partition, "kept", keep.dir, "deleted_from", drop.dir)
	return keep, nil
}

func errsOf(dirs []kernel.LogDir) []error {
	out := make([]error, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, fmt.Errorf("%s: %w", d.Path, d.Err))
	}
	return out
}

func (d *dirSet) closeAll() {
	for _, s := range d.stores {
		if err := s.Close(); err != nil {
			d.logger.Warn("close log dir", "dir", s.dir, "err", err)
		}
	}
}

// swapStripes is how many locks the partitions' opens, removals and swaps share.
const swapStripes = 64

// swapMu returns tp's stripe of swapMus.
func (d *dirSet) swapMu(tp kernel.TopicPartition) *sync.RWMutex {
	h := uint32(2166136261) // FNV-1a over the topic, then the partition mixed in
	for i := 0; i < len(tp.Topic); i++ {
		h = (h ^ uint32(tp.Topic[i])) * 16777619
	}
	return &d.swapMus[(h^uint32(tp.Partition)*0x9e3779b1)%swapStripes]
}

// Open implements kernel.Storage.
func (d *dirSet) Open(tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig) (kernel.Log, error) {
	mu := d.swapMu(tp)
	mu.RLock()
	defer mu.RUnlock()
	s, err := d.place(tp)
	if err != nil {
		return nil, err
	}
	l, err := s.openWith(tp, topicID, cfg, nil)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.handles[tp]
	if h == nil || h.cur.Load() != l {
		h = newHandle(l)
		d.handles[tp] = h
	}
	return h, nil
}

// place returns the store of tp, choosing one for a new partition.
func (d *dirSet) place(tp kernel.TopicPartition) (*Store, error) {
	if !validTopic(tp.Topic) || tp.Partition < 0 {
		return nil, fmt.Errorf("open %v: invalid topic partition", tp)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.where[tp]
	if s == nil {
		s = d.holderLocked(tp)
	}
	if s == nil {
		if len(d.down) > 0 {
			return nil, fmt.Errorf("%v: %w: in no healthy log dir, and log dirs %v are offline (it may be in one of them)",
				tp, kernel.ErrLogOffline, d.downPaths())
		}
		if p := d.preferred[tp]; p != nil && p.failed() == nil {
			s = p
		} else {
			s = d.leastLoadedLocked()
		}
		if s == nil {
			return nil, fmt.Errorf("%v: %w: every log dir failed", tp, kernel.ErrLogOffline)
		}
		delete(d.preferred, tp)
		d.where[tp] = s
		d.count[s]++
	}
	if err := s.failed(); err != nil {
		return nil, fmt.Errorf("%v: %w: log dir %s failed: %w", tp, kernel.ErrLogOffline, s.dir, err)
	}
	return s, nil
}

// holderLocked finds the store holding tp when where does not say (a directory a
// stray pass left alone, say): open there, or its directory exists. d.mu held.
func (d *dirSet) holderLocked(tp kernel.TopicPartition) *Store {
	for _, s := range d.stores {
		if s.holds(tp) {
			d.where[tp] = s
			d.count[s]++
			return s
		}
	}
	return nil
}

// leastLoadedLocked is the healthy store with the fewest partitions (the first of
// equals, in log.dirs order); nil when every one failed. d.mu held.
func (d *dirSet) leastLoadedLocked() *Store {
	var best *Store
	for _, s := range d.stores {
		if s.failed() != nil {
			continue
		}
		if best == nil || d.count[s] < d.count[best] {
			best = s
		}
	}
	return best
}

func (d *dirSet) downPaths() []string {
	out := make([]string, 0, len(d.down))
	for _, l := range d.down {
		out = append(out, l.Path)
	}
	return out
}

// storeOf is the store holding tp, nil when none does.
func (d *dirSet) storeOf(tp kernel.TopicPartition) *Store {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.where[tp]; s != nil {
		return s
	}
	return d.holderLocked(tp)
}

// Remove implements kernel.Storage. A partition of a failed directory is only
// forgotten: nothing is written there any more (the next start's stray pass, or
// the operator, deletes it).
func (d *dirSet) Remove(tp kernel.TopicPartition) error {
	d.cancelMove(tp)
	mu := d.swapMu(tp)
	mu.RLock()
	defer mu.RUnlock()
	s := d.storeOf(tp)
	d.mu.Lock()
	delete(d.preferred, tp)
	delete(d.handles, tp)
	if s != nil && d.where[tp] == s {
		delete(d.where, tp)
		d.count[s]--
	}
	d.mu.Unlock()
	if s == nil {
		return nil
	}
	err := s.Remove(tp)
	if s.failed() != nil {
		return nil
	}
	return err
}

// Dirs implements kernel.Storage: the directories that opened, in log.dirs order,
// then those that failed to open.
func (d *dirSet) Dirs() []kernel.LogDir {
	out := make([]kernel.LogDir, 0, len(d.stores)+len(d.down))
	for _, s := range d.stores {
		out = append(out, s.Dirs()...)
	}
	d.mu.Lock()
	for tp, mv := range d.moves {
		f := mv.future.Load()
		if f == nil {
			continue
		}
		for i := range out {
			if out[i].Path == mv.to.dir && out[i].Err == nil {
				out[i].Partitions = append(out[i].Partitions, kernel.LogDirPartition{TP: tp, Size: f.Size(), IsFuture: true, OffsetLag: max(mv.lag.Load(), 0)})
			}
		}
	}
	d.mu.Unlock()
	return append(out, d.down...)
}

// status yields each directory and why it failed (nil: serving), without listing
// partitions.
func (d *dirSet) status() iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for _, s := range d.stores {
			if !yield(s.dir, s.failed()) {
				return
			}
		}
		for _, l := range d.down {
			if !yield(l.Path, l.Err) {
				return
			}
		}
	}
}

// RemoveStrays implements kernel.StrayRemover over the healthy directories.
func (d *dirSet) RemoveStrays(clusterID string, nodeID int32, keep func(kernel.TopicPartition, [16]byte) bool) (kernel.StrayResult, error) {
	var total kernel.StrayResult
	var errs []error
	for _, s := range d.stores {
		if s.failed() != nil {
			continue
		}
		res, err := s.RemoveStrays(clusterID, nodeID, func(tp kernel.TopicPartition, id [16]byte) bool {
			if keep(tp, id) {
				return true
			}
			d.mu.Lock()
			if d.where[tp] == s {
				delete(d.where, tp)
				d.count[s]--
			}
			d.mu.Unlock()
			return false
		})
		total.Kept += res.Kept
		total.Removed += res.Removed
		total.MovedAside += res.MovedAside
		total.Bytes += res.Bytes
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.dir, err))
		}
	}
	return total, errors.Join(errs...)
}

// healthy returns the stores whose directory has not failed.
func (d *dirSet) healthy() []*Store {
	return slices.DeleteFunc(slices.Clone(d.stores), func(s *Store) bool { return s.failed() != nil })
}

// openLogs returns the open logs of the healthy directories.
func (d *dirSet) openLogs() []*Log {
	var out []*Log
	for _, s := range d.healthy() {
		out = append(out, s.openLogs()...)
	}
	return out
}

// Close stops the moves and closes every store.
func (d *dirSet) Close() error {
	d.stopMoves()
	var errs []error
	for _, s := range d.stores {
		if err := s.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.dir, err))
		}
	}
	return errors.Join(errs...)
}

// holds reports whether tp is open or being opened in s, or has a directory there.
func (s *Store) holds(tp kernel.TopicPartition) bool {
	s.mu.Lock()
	_, open := s.logs[tp]
	_, opening := s.opening[tp]
	s.mu.Unlock()
	if open || opening {
		return true
	}
	fi, err := os.Stat(filepath.Join(s.dir, tp.String()))
	return err == nil && fi.IsDir()
}

// admit is kernel.SpaceLog's AdmitWrite for a log of s: nil without a guard.
func (s *Store) admit(n int64) error {
	if s.guard == nil {
		return nil
	}
	if err := s.guard.Admit(n); err != nil {
		return fmt.Errorf("log dir %s: %w", s.dir, err)
	}
	return nil
}

// guardDirs gives each directory that opened a free-space guard at reserve (0: none)
// and samples it once; run keeps sampling them (diskguard.Run) until ctx ends.
func (d *dirSet) guardDirs(reserve int64, logger *slog.Logger) {
	if reserve <= 0 {
		return
	}
	for _, s := range d.stores {
		g := diskguard.New(s.dir, reserve, logger.With("log_dir", s.dir))
		if _, err := g.Sample(); err != nil {
			logger.Warn("sample a log dir's free space", "dir", s.dir, "err", err)
		}
		s.guard = g
	}
}

// runGuards samples every directory's guard each interval until ctx ends.
func (d *dirSet) runGuards(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	for _, s := range d.stores {
		if s.guard != nil {
			wg.Go(func() { s.guard.Run(ctx, interval) })
		}
	}
	wg.Wait()
}
