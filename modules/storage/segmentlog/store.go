package segmentlog

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/kernel/diskguard"
)

// Store is the segment-log kernel.Storage over one log directory.
type Store struct {
	dir    string
	logger *slog.Logger
	now    func() time.Time
	// guard holds the directory to the free-space reserve on its own (set by the
	// module before the first open, nil when it has none): admit.
	guard *diskguard.Guard

	ckptMu sync.Mutex // serializes checkpoint writes; taken before mu

	// files bounds the descriptors of the segment files (fdcache.go).
	files *fileCache

	mu     sync.Mutex
	logs   map[kernel.TopicPartition]*Log
	closed bool
	// opening holds the partitions being opened or removed (outside mu, so that
	// opens of different partitions run in parallel). An Open of a partition in it
	// waits for that open (and takes its log) or removal; Remove waits for it too,
	// and Close waits for every one, so a partition is opened once, and a log whose
	// open finishes after Close began or before a Remove is closed or removed like
	// any other.
	opening map[kernel.TopicPartition]*pendingOpen
	// removed holds the partitions removed since the checkpoint files were last
	// written (their entries are still in the files). Remove leaves the rewrite to the
	// flush loop (or Close), so deleting thousands of partitions writes the files
	// about once a second, not once per partition; an Open of a partition in removed
	// writes the files first, so no entry of a removed incarnation is ever on disk
	// while a new one has data (openLog ignores the entries of a partition without
	// a directory, which covers a crash in between).
	removed map[kernel.TopicPartition]struct{}
	// From the checkpoint files, kept for partitions that are not open.
	recoveryPoints map[kernel.TopicPartition]int64
	logStarts      map[kernel.TopicPartition]int64
	hws            map[kernel.TopicPartition]int64
	// cleanerOffsets: each compacted partition's first dirty offset
	// (cleaner-offset-checkpoint, Kafka's name and format). Derived state: a lost or
	// unreadable file only makes the cleaner start over from the log start.
	cleanerOffsets map[kernel.TopicPartition]int64
	// unclean: partitions whose files may hold a torn or unflushed tail and that were
	// not recovered since: every partition directory when the store opened without a
	// clean-shutdown marker (until its log is opened, which recovers it), and any log
	// whose Close failed. The marker is written only when it is empty, so it never
	// vouches for a partition this run did not recover.
	unclean map[kernel.TopicPartition]bool

	// dirty: the checkpoints are behind in what must be written by the next flush pass
	// (log starts, removed partitions, unclean stops, a reopen that found other
	// offsets); rpDirty: only recovery points moved, written every
	// log.flush.offset.checkpoint.interval.ms (a recovery point on disk older than the
	// log's only makes a crash's recovery check more; each rewrite costs a line per
	// partition). lastCkpt is when both files were last written (unix ns).
	dirty    atomic.Bool
	rpDirty  atomic.Bool
	lastCkpt atomic.Int64

	// fs syncs the store's file system whole at an orderly stop (syncfs_linux.go); nil
	// where there is no such call, and unused once a partition directory turned out to
	// live on another file system (mixedFS): then each log fsyncs its own files.
	fs      *fsSync
	mixedFS atomic.Bool

	// found lists the partition directories OpenStore saw (for the dir set's
	// placement, which takes and clears it).
	found []kernel.TopicPartition

	// failure is set once the directory failed (dirfail.go); never cleared.
	failure atomic.Pointer[dirFailure]

	// crashAt, set by tests only, stops a clean at a named point as a crash would
	// (see clean.go). Nil in production.
	crashAt func(point string) bool

	// hwWritten is the content of replication-offset-checkpoint as last written (or
	// read at open), so that an unchanged set of high watermarks is not rewritten.
	// Guarded by ckptMu.
	hwWritten []byte
}

// OpenStore opens (creating if needed) the log directory dir. It reads the checkpoint
// files and consumes the clean-shutdown marker: until the store is closed cleanly
// again, a crash makes the next open recover every partition from its recovery point.
func OpenStore(dir string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return openStore(dir, logger, newFileCache(0, logger))
}

// openStore is OpenStore with the segment-file budget shared with the other log dirs.
func openStore(dir string, logger *slog.Logger, files *fileCache) (_ *Store, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	s := &Store{
		dir: dir, logger: logger, now: time.Now,
		files:   files,
		logs:    map[kernel.TopicPartition]*Log{},
		opening: map[kernel.TopicPartition]*pendingOpen{},
		removed: map[kernel.TopicPartition]struct{}{},
		unclean: map[kernel.TopicPartition]bool{},
	}
	if s.fs, err = openFSSync(dir); err != nil {
		return nil, fmt.Errorf("open log dir: %w", err)
	}
	defer func() {
		if err != nil && s.fs != nil {
			s.fs.close()
		}
	}()
	if s.recoveryPoints, err = readCheckpoint(filepath.Join(dir, recoveryCheckpointFile)); err != nil {
		return nil, err
	}
	if s.logStarts, err = readCheckpoint(filepath.Join(dir, logStartCheckpointFile)); err != nil {
		return nil, err
	}
	// High watermarks are derived state (the leader recomputes its own, a follower
	// learns the leader's): an unreadable file is logged and ignored, not fatal.
	hwPath := filepath.Join(dir, hwCheckpointFile)
	if s.hws, err = readCheckpoint(hwPath); err != nil {
		logger.Warn("ignoring unreadable high watermark checkpoint", "err", err)
		s.hws = map[kernel.TopicPartition]int64{}
	} else if b, err := os.ReadFile(hwPath); err == nil {
		s.hwWritten = b
	}
	if s.cleanerOffsets, err = readCheckpoint(filepath.Join(dir, cleanerCheckpointFile)); err != nil {
		logger.Warn("ignoring unreadable cleaner offset checkpoint", "err", err)
		s.cleanerOffsets = map[kernel.TopicPartition]int64{}
	}
	marker := filepath.Join(dir, cleanShutdownFile)
	clean := false
	if _, err := os.Stat(marker); err == nil {
		clean = true
		if err := os.Remove(marker); err != nil {
			return nil, fmt.Errorf("remove clean shutdown marker: %w", err)
		}
		if err := syncDir(dir); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("stat clean shutdown marker: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list log dir: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && (strings.HasSuffix(e.Name(), deleteDirSuffix) || isFutureDir(e.Name())) {
			// A Remove that did not finish: the directory was renamed away, so no
			// partition owns it any more. Or a move's copy whose swap did not
			// happen (move.go): the partition is still where it was.
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("remove leftover %s: %w", e.Name(), err)
			}
			continue
		}
		if tp, ok := parsePartitionDir(e); ok {
			s.found = append(s.found, tp)
			if !clean {
				s.unclean[tp] = true
			}
		}
	}
	return s, nil
}

// SetOpenFilesBudget sets how many segment files the store keeps open at most
// (sluice.log.open.files.max); n <= 0 means half the soft RLIMIT_NOFILE.
func (s *Store) SetOpenFilesBudget(n int) { s.files.setBudget(n) }

// OpenFiles is how many segment files hold a descriptor now.
func (s *Store) OpenFiles() int { return s.files.openCount() }

// pendingOpen is an open (or a removal's rename) in progress; done is closed when it
// finished.
type pendingOpen struct{ done chan struct{} }

// Open implements kernel.Storage. Opens of different partitions run in parallel; a
// second Open of a partition being opened waits for the first and returns its log.
func (s *Store) Open(tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig) (kernel.Log, error) {
	l, err := s.openWith(tp, topicID, cfg, nil)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// openWith is Open; with moved set it opens a partition directory a move just
// renamed into the store (move.go) with the offsets given, and refuses when the
// partition is open here already.
func (s *Store) openWith(tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig, moved *checkpointed) (*Log, error) {
	if !validTopic(tp.Topic) || tp.Partition < 0 {
		return nil, fmt.Errorf("open %v: invalid topic partition", tp)
	}
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, kernel.ErrLogClosed
		}
		if l, ok := s.logs[tp]; ok {
			s.mu.Unlock()
			if moved != nil {
				return nil, fmt.Errorf("move %v: already open in %s", tp, s.dir)
			}
			l.SetConfig(cfg)
			return l, nil
		}
		if p := s.opening[tp]; p != nil {
			s.mu.Unlock()
			<-p.done // then take its log, or try again if it failed
			s.mu.Lock()
			continue
		}
		if _, ok := s.removed[tp]; ok {
			s.mu.Unlock()
			if err := s.writeCheckpoints(); err != nil {
				return nil, fmt.Errorf("open %v: %w", tp, err)
			}
			s.mu.Lock()
			continue
		}
		break
	}
	p := &pendingOpen{done: make(chan struct{})}
	s.opening[tp] = p
	rp, hasRP := s.recoveryPoints[tp]
	hw, hasHW := s.hws[tp]
	if !hasHW {
		hw = -1
	}
	ckpt := checkpointed{recoveryPoint: rp, clean: hasRP && !s.unclean[tp], logStart: s.logStarts[tp], hw: hw, firstDirty: s.cleanerOffsets[tp]}
	if moved != nil {
		ckpt = *moved
	}
	s.mu.Unlock()

	// Nothing else touches tp's directory meanwhile: other Opens and Remove wait.
	l, err := openLog(s, tp, topicID, cfg, ckpt)

	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.opening, tp)
	close(p.done)
	if err != nil {
		return nil, err
	}
	s.logs[tp] = l
	delete(s.unclean, tp)
	// The files need rewriting only if they say something else of tp: after a clean
	// stop they do not, and at 100,000 reopening partitions the rewrite (once a
	// second, of every partition's entry) was a quarter of the startup's CPU.
	fileRP, inRP := s.recoveryPoints[tp]
	fileLS, inLS := s.logStarts[tp]
	if !inRP || !inLS || fileRP != l.recoveryPoint || fileLS != l.logStart.Load() { // l is not shared yet
		s.dirty.Store(true)
	}
	if s.closed {
		return nil, kernel.ErrLogClosed // Close (waiting for this open) closes it
	}
	return l, nil
}

// waitOpen waits until no open of tp is in progress. Called with mu held, which it
// releases while it waits.
func (s *Store) waitOpen(tp kernel.TopicPartition) {
	for {
		p := s.opening[tp]
		if p == nil {
			return
		}
		s.mu.Unlock()
		<-p.done
		s.mu.Lock()
	}
}

// validTopic rejects names that would escape the log directory.
func validTopic(t string) bool {
	return t != "" && t != "." && t != ".." && !strings.ContainsAny(t, "/\\\x00")
}

// forget drops a closed log from the open set, keeping its final offsets.
func (s *Store) forget(l *Log, clean bool) {
	s.mu.Lock()
	if s.logs[l.tp] == l {
		delete(s.logs, l.tp)
		rp, ls := l.offsets()
		s.recoveryPoints[l.tp], s.logStarts[l.tp] = rp, ls
		s.hws[l.tp] = l.HighWatermark()
		s.cleanerOffsets[l.tp] = l.cleanerOffset()
		if !clean {
			s.unclean[l.tp] = true
		}
	}
	s.mu.Unlock()
	s.dirty.Store(true)
}

// Remove implements kernel.Storage: it closes the log and deletes its directory. Files
// that an unreleased ReadResult points into stay readable until it is released. An
// open of tp in progress finishes first; Opens of tp wait for the Remove.
func (s *Store) Remove(tp kernel.TopicPartition) error {
	if !validTopic(tp.Topic) {
		return nil
	}
	s.mu.Lock()
	s.waitOpen(tp)
	if l, ok := s.logs[tp]; ok {
		l.closeForRemove()
		delete(s.logs, tp)
	}
	s.forgetRemovedLocked(tp)
	p := &pendingOpen{done: make(chan struct{})} // Opens of tp wait for the rename
	s.opening[tp] = p
	s.mu.Unlock()
	gone, err := s.renameAway(tp)
	s.mu.Lock()
	delete(s.opening, tp)
	close(p.done)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("remove %v: %w", tp, err)
	}
	if gone != "" {
		if err := os.RemoveAll(gone); err != nil {
			return fmt.Errorf("remove %v: %w", tp, err)
		}
	}
	return nil // the checkpoint files are rewritten later (see Store.removed)
}

// forgetRemovedLocked drops tp's checkpointed offsets and marks it removed (the
// checkpoint files are rewritten by the next flush pass; see Store.removed). Called
// with mu held.
func (s *Store) forgetRemovedLocked(tp kernel.TopicPartition) {
	delete(s.recoveryPoints, tp)
	delete(s.logStarts, tp)
	delete(s.hws, tp)
	delete(s.cleanerOffsets, tp)
	delete(s.unclean, tp)
	s.removed[tp] = struct{}{}
	s.dirty.Store(true)
}

// renameAway renames tp's directory to a short "<16 hex>-delete" name, durably, and
// returns that path ("" when there was no directory). Renaming first means a crash
// part way through the deletion leaves no partial partition directory to be taken for
// the partition (or for a re-created topic of the same name); OpenStore removes what
// is left. The caller holds tp's place in opening.
func (s *Store) renameAway(tp kernel.TopicPartition) (string, error) {
	dir := filepath.Join(s.dir, tp.String())
	gone := filepath.Join(s.dir, fmt.Sprintf("%016x%s", rand.Uint64(), deleteDirSuffix))
	err := os.Rename(dir, gone)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	return gone, err
}

// Dirs implements kernel.Storage: the log dir with every partition directory in it.
func (s *Store) Dirs() []kernel.LogDir {
	d := kernel.LogDir{Path: s.dir, TotalBytes: -1, UsableBytes: -1}
	if d.Err = s.failed(); d.Err != nil {
		return []kernel.LogDir{d}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err == nil {
		d.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
		d.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
	}
	s.mu.Lock()
	open := make(map[kernel.TopicPartition]*Log, len(s.logs))
	for tp, l := range s.logs {
		open[tp] = l
	}
	s.mu.Unlock()
	ents, _ := os.ReadDir(s.dir)
	for _, e := range ents {
		tp, ok := parsePartitionDir(e)
		if !ok {
			continue
		}
		var size int64
		if l, ok := open[tp]; ok {
			size = l.Size()
		} else {
			size = dirLogBytes(filepath.Join(s.dir, e.Name()))
		}
		d.Partitions = append(d.Partitions, kernel.LogDirPartition{TP: tp, Size: size})
	}
	return []kernel.LogDir{d}
}

func parsePartitionDir(e os.DirEntry) (kernel.TopicPartition, bool) {
	if !e.IsDir() {
		return kernel.TopicPartition{}, false
	}
	name := e.Name()
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return kernel.TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return kernel.TopicPartition{}, false
	}
	return kernel.TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

func dirLogBytes(dir string) int64 {
	_, n := partitionDirInfo(dir)
	return n
}

// partitionDirInfo lists dir once: whether it holds a partition.metadata or a .log
// file (a partition's directory), and the size of its .log files.
func partitionDirInfo(dir string) (isPartition bool, logBytes int64) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name := e.Name()
		if name == partitionMetadataFile {
			isPartition = true
		}
		if strings.HasSuffix(name, logSuffix) {
			isPartition = true
			if fi, err := e.Info(); err == nil {
				logBytes += fi.Size()
			}
		}
	}
	return isPartition, logBytes
}

// openLogs returns the open logs.
func (s *Store) openLogs() []*Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.logs))
}

// Close closes every log cleanly, writes the checkpoints and the clean-shutdown
// marker. Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for len(s.opening) > 0 { // no new ones start once closed
		for _, p := range s.opening {
			s.mu.Unlock()
			<-p.done
			s.mu.Lock()
			break
		}
	}
	logs := make([]*Log, 0, len(s.logs))
	for _, l := range s.logs {
		logs = append(logs, l)
	}
	s.mu.Unlock()
	defer func() {
		if s.fs != nil {
			s.fs.close()
		}
	}()
	// One sync of the whole file system after every log wrote its last bytes, when
	// the store's partitions all live on it; each log's own fsyncs otherwise.
	deferSync := s.fs != nil && !s.mixedFS.Load()
	errs := make([]error, len(logs))
	parallelEach(len(logs), closeWorkers, func(i int) {
		if err := logs[i].close(deferSync); err != nil {
			errs[i] = fmt.Errorf("close %v: %w", logs[i].tp, err)
		}
	})
	err := errors.Join(errs...)
	if ferr := s.failed(); ferr != nil {
		// Nothing more is written to a failed dir: no checkpoints, no marker, so
		// the next start recovers its partitions as after a crash.
		if err != nil {
			s.logger.Warn("closed the logs of a failed log dir", "dir", s.dir, "err", err)
		}
		return nil
	}
	if err == nil && deferSync {
		if err = s.fs.sync(); err == nil {
			for _, l := range logs {
				l.closedDurably()
			}
		}
	}
	// On a failed close or sync no recovery point moved (with deferSync) and no
	// marker is written: the next open recovers what may not be durable.
	if err = errors.Join(err, s.writeCheckpoints(), s.writeHWCheckpoint()); err != nil {
		return err
	}
	s.mu.Lock()
	unclean := len(s.unclean)
	s.mu.Unlock()
	if unclean > 0 {
		// Partitions left unrecovered (not opened since a crash, or whose close
		// failed): no marker, so the next open recovers each from its recovery point.
		s.logger.Info("not writing the clean shutdown marker: partitions not recovered since a crash", "partitions", unclean)
		return nil
	}
	if err := writeFileAtomic(filepath.Join(s.dir, cleanShutdownFile), nil); err != nil {
		return fmt.Errorf("write clean shutdown marker: %w", err)
	}
	return nil
}

// closeWorkers is how many logs Close closes at once: each close is mostly waiting
// for file writes (and, without a whole-file-system sync, for fsyncs, which the file
// system commits together when they overlap).
const closeWorkers = 16

// parallelEach calls fn(0) .. fn(n-1) on up to workers goroutines and returns when
// every call returned.
func parallelEach(n, workers int, fn func(i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// checkpointsDue reports whether a flush pass at now should write the checkpoints:
// something urgent changed, or recovery points moved and rpEvery passed since the last
// write.
func (s *Store) checkpointsDue(now time.Time, rpEvery time.Duration) bool {
	return s.dirty.Load() || s.rpDirty.Load() && now.UnixNano()-s.lastCkpt.Load() >= int64(rpEvery)
}

// writeCheckpoints writes both checkpoint files from the open logs and the remembered
// offsets of the others.
func (s *Store) writeCheckpoints() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.dirty.Store(false)
	s.rpDirty.Store(false)
	s.lastCkpt.Store(time.Now().UnixNano())
	s.mu.Lock()
	removed := s.removed
	s.removed = map[kernel.TopicPartition]struct{}{}
	rps := make(map[kernel.TopicPartition]int64, len(s.recoveryPoints)+len(s.logs))
	lss := make(map[kernel.TopicPartition]int64, len(s.logStarts)+len(s.logs))
	for tp, v := range s.recoveryPoints {
		rps[tp] = v
	}
	for tp, v := range s.logStarts {
		lss[tp] = v
	}
	for tp, l := range s.logs {
		rps[tp], lss[tp] = l.offsets()
	}
	s.mu.Unlock()
	err := writeFileAtomic(filepath.Join(s.dir, recoveryCheckpointFile), formatCheckpoint(rps))
	if err != nil {
		err = fmt.Errorf("write recovery point checkpoint: %w", err)
	} else if err = writeFileAtomic(filepath.Join(s.dir, logStartCheckpointFile), formatCheckpoint(lss)); err != nil {
		err = fmt.Errorf("write log start checkpoint: %w", err)
	}
	if err != nil {
		s.dirty.Store(true)
		s.mu.Lock()
		for tp := range removed { // their entries may still be on disk
			s.removed[tp] = struct{}{}
		}
		s.mu.Unlock()
	}
	return err
}

// writeCleanerCheckpoint writes cleaner-offset-checkpoint: the first dirty offset of
// every compacted partition (open or remembered).
func (s *Store) writeCleanerCheckpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.mu.Lock()
	offs := maps.Clone(s.cleanerOffsets)
	for tp, l := range s.logs {
		if o := l.cleanerOffset(); o > 0 {
			offs[tp] = o
		}
	}
	s.mu.Unlock()
	if err := writeFileAtomic(filepath.Join(s.dir, cleanerCheckpointFile), formatCheckpoint(offs)); err != nil {
		return fmt.Errorf("write cleaner offset checkpoint: %w", err)
	}
	return nil
}

// writeHWCheckpoint writes replication-offset-checkpoint (Kafka's checkpoint format)
// with the high watermark of every partition in the log dir: the open logs' (clamped
// to their offsets) and the remembered ones of the others. Nothing is written when the
// content did not change since the last write. The module's loop calls it every
// replica.high.watermark.checkpoint.interval.ms; Close calls it last.
func (s *Store) writeHWCheckpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.mu.Lock()
	hws := make(map[kernel.TopicPartition]int64, len(s.hws)+len(s.logs))
	for tp, v := range s.hws {
		hws[tp] = v
	}
	for tp, l := range s.logs {
		hws[tp] = l.HighWatermark()
	}
	s.mu.Unlock()
	data := formatCheckpoint(hws)
	if bytes.Equal(data, s.hwWritten) {
		return nil
	}
	if err := writeFileAtomic(filepath.Join(s.dir, hwCheckpointFile), data); err != nil {
		return fmt.Errorf("write high watermark checkpoint: %w", err)
	}
	s.hwWritten = data
	return nil
}

// formatCheckpoint renders Kafka's checkpoint text: version, count, "topic partition
// offset" lines (sorted, for stable files).
func formatCheckpoint(m map[kernel.TopicPartition]int64) []byte {
	tps := make([]kernel.TopicPartition, 0, len(m))
	size := 16
	for tp := range m {
		tps = append(tps, tp)
		size += len(tp.Topic) + 24
	}
	slices.SortFunc(tps, func(a, b kernel.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	// Appended by hand: at 100,000 partitions the file is rewritten about once a
	// second while partitions open, and fmt was most of its cost.
	b := make([]byte, 0, size)
	b = strconv.AppendInt(b, checkpointVersion, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(len(tps)), 10)
	b = append(b, '\n')
	for _, tp := range tps {
		b = append(b, tp.Topic...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(tp.Partition), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, m[tp], 10)
		b = append(b, '\n')
	}
	return b
}

// readCheckpoint parses a checkpoint file; a missing file is empty.
func readCheckpoint(path string) (map[kernel.TopicPartition]int64, error) {
	m := map[kernel.TopicPartition]int64{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	count := -1
	for sc.Scan() {
		line++
		text := sc.Text()
		switch line {
		case 1:
			if text != strconv.Itoa(checkpointVersion) {
				return nil, fmt.Errorf("%s: unsupported version %q", path, text)
			}
			continue
		case 2:
			if count, err = strconv.Atoi(text); err != nil || count < 0 {
				return nil, fmt.Errorf("%s: bad count %q", path, text)
			}
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: malformed line %q", path, line, text)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: malformed line %q", path, line, text)
		}
		m[kernel.TopicPartition{Topic: f[0], Partition: int32(p)}] = off
	}
	if count != len(m) {
		return nil, fmt.Errorf("%s: %d entries, header says %d", path, len(m), count)
	}
	return m, nil
}

// writeFileAtomic writes data to path via a temporary file: write, fsync, rename,
// fsync the directory.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// partition.metadata: "version: 0\ntopic_id: <base64url, unpadded>\n".
// writePartitionMetadata writes dir's partition.metadata, which is absent or torn
// (readPartitionMetadata found no topic id in it), so there is nothing to keep and
// the file is written in place: one creation and one fsync, not a temporary file,
// a rename and a directory sync per new partition. The caller syncs dir before the
// partition is used (openLog's syncDir, for the new directory entry). A crash part
// way leaves the file empty or torn, which reads as absent and is written again.
func writePartitionMetadata(dir string, topicID [16]byte) error {
	data := fmt.Sprintf("version: 0\ntopic_id: %s\n", base64.RawURLEncoding.EncodeToString(topicID[:]))
	f, err := os.OpenFile(filepath.Join(dir, partitionMetadataFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readPartitionMetadata reads dir's topic id. ok is false when the file is absent or
// torn (no whole topic_id line: a crash while writePartitionMetadata ran); a whole
// line that does not hold a topic id is an error, as the directory cannot be told
// apart from another topic's.
func readPartitionMetadata(dir string) (id [16]byte, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile))
	if errors.Is(err, os.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	text := string(data)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i] // what follows the last newline is torn
	} else {
		text = ""
	}
	for _, line := range strings.Split(text, "\n") {
		if v, found := strings.CutPrefix(line, "topic_id: "); found {
			b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil || len(b) != 16 {
				return id, false, fmt.Errorf("%s: bad topic_id %q", partitionMetadataFile, v)
			}
			copy(id[:], b)
			return id, true, nil
		}
	}
	return id, false, nil
}
