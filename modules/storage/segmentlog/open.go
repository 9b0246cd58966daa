package segmentlog

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/producers"
)

// openLog loads (or creates) the partition directory of tp. Unless clean, every
// segment from the one holding the recovery point on is recovered: validated batch by
// batch, cut at the first torn or corrupt batch (later segments are deleted), and
// re-indexed. Segments below it are trusted but their indexes are checked against the
// log and rebuilt when they disagree. ckpt holds the partition's checkpointed offsets.
func openLog(s *Store, tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig, ckpt checkpointed) (_ *Log, err error) {
	recoveryPoint, clean, ckptLogStart, ckptHW := ckpt.recoveryPoint, ckpt.clean, ckpt.logStart, ckpt.hw
	dir := filepath.Join(s.dir, tp.String())
	if ckpt.dir != "" {
		dir = ckpt.dir
	}
	if fi, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// A new partition. Checkpoint entries for it are left from a removed
		// incarnation (a crash between the Remove and its checkpoint write): not ours.
		clean, recoveryPoint, ckptLogStart, ckptHW = false, 0, 0, -1
	} else if err != nil {
		return nil, fmt.Errorf("open %v: %w", tp, err)
	} else if s.fs != nil && !s.fs.sameFS(fi) {
		// A mount point or a symlink elsewhere: the store's one sync at Close would
		// not cover it, so every log syncs its own files from now on.
		s.mixedFS.Store(true)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open %v: %w", tp, err)
	}
	stored, ok, err := readPartitionMetadata(dir)
	if err != nil {
		return nil, fmt.Errorf("open %v: %w", tp, err)
	}
	if ok && stored != topicID && topicID != ([16]byte{}) && stored != ([16]byte{}) {
		// The directory is left from an older incarnation of the topic (deleted and
		// re-created while this broker missed the deletion). The caller's id wins: the
		// old data is moved aside, never served as the new topic's, never deleted.
		stray := filepath.Join(s.dir, strayDirName(stored, tp.Partition))
		if err := os.Rename(dir, stray); err != nil {
			return nil, fmt.Errorf("open %v: move aside the log of topic id %x: %w", tp, stored, err)
		}
		if err := syncDir(s.dir); err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
		s.logger.Warn("partition directory belongs to an older topic id; moved aside", "topic", tp.Topic, "partition", tp.Partition, "stray_dir", stray)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
		ok, clean, recoveryPoint, ckptLogStart, ckptHW = false, false, 0, 0, -1
	}
	logger := s.logger.With("topic", tp.Topic, "partition", tp.Partition)
	wroteMetadata := false
	if !ok && topicID != ([16]byte{}) {
		if err := writePartitionMetadata(dir, topicID); err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
		wroteMetadata = true
	}
	ents, err := recoverSwaps(dir, logger)
	if err != nil {
		return nil, fmt.Errorf("open %v: %w", tp, err)
	}
	bases, err := listSegments(dir, ents)
	if err != nil {
		return nil, fmt.Errorf("open %v: %w", tp, err)
	}
	nowMs := s.now().UnixMilli()
	var segs []*segment
	defer func() {
		if err != nil {
			for _, sg := range segs {
				sg.unref()
			}
		}
	}()
	for _, b := range bases {
		sg, err := openSegment(s.files, dir, b, false, cfg.SegmentIndexBytes, nowMs, logger)
		if err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
		segs = append(segs, sg)
	}
	from := len(segs)
	if !clean {
		from = max(sort.Search(len(segs), func(i int) bool { return segs[i].base > recoveryPoint })-1, 0)
		if len(segs) == 0 {
			from = 0
		}
	}
	for i := 0; i < from; i++ {
		if err := segs[i].load(); err != nil {
			if !errors.Is(err, errRecover) {
				return nil, fmt.Errorf("open %v: %w", tp, err)
			}
			logger.Warn("index disagrees with the log; rebuilding", "base_offset", segs[i].base, "err", err)
			from = i
			break
		}
	}
	recovered := segs[from:]
	for i := from; i < len(segs); i++ {
		truncated, err := segs[i].recoverSegment(cfg.IndexIntervalBytes, cfg.SegmentIndexBytes)
		if err != nil {
			return nil, fmt.Errorf("open %v: recover: %w", tp, err)
		}
		if i > 0 && segs[i].size > 0 && segs[i-1].next > segs[i].base {
			// Overlaps its predecessor: not a log we wrote. Drop it and what follows.
			truncated = true
			i--
		}
		if truncated && i+1 < len(segs) {
			for _, later := range segs[i+1:] {
				logger.Warn("deleting segment after a torn tail", "base_offset", later.base)
				if err := later.markDeleted(); err != nil {
					return nil, fmt.Errorf("open %v: %w", tp, err)
				}
			}
			segs = segs[:i+1]
			recovered = segs[min(from, len(segs)):]
			break
		}
	}
	l := &Log{store: s, tp: tp, dir: dir, logger: logger, cfg: cfg, lastFlushMs: nowMs, prod: producers.New(), snapOffset: -1, epochsUnwritten: math.MaxInt64}
	l.hw.Store(ckptHW)
	if len(segs) == 0 {
		sg, err := openSegment(s.files, dir, max(ckptLogStart, 0), true, cfg.SegmentIndexBytes, nowMs, logger)
		if err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
		segs = append(segs, sg)
		l.markDirDirty()
	}
	if wroteMetadata {
		l.markDirDirty() // its directory entry is synced below
	}
	l.segs = segs
	for _, sg := range segs[:len(segs)-1] {
		if err := sg.seal(); err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
	}
	if err := l.active().activate(cfg.SegmentIndexBytes); err != nil {
		return nil, fmt.Errorf("open %v: %w", tp, err)
	}
	l.logStart.Store(max(ckptLogStart, segs[0].base))
	l.leo.Store(l.active().next)
	l.firstDirty = min(ckpt.firstDirty, l.leo.Load())
	if l.logStart.Load() > l.leo.Load() {
		logger.Warn("log start offset past the recovered log end; starting empty", "log_start_offset", l.logStart.Load(), "log_end_offset", l.leo.Load())
		if err := l.truncateFully(l.logStart.Load()); err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
		recovered = nil
	}
	for _, sg := range recovered {
		if err := sg.sync(); err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
	}
	if len(recovered) > 0 || l.dirDirty {
		if err := syncDir(dir); err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
		l.dirDirty = false
	}
	// The active segment's files are on stable storage now: recovered and synced
	// just above, or trusted (a clean stop, or below the recovery point, which moves
	// only after a sync); what open changed since is a resize of the index tails.
	l.active().markSynced()
	for _, sg := range segs[:len(segs)-1] {
		// Sealed and on stable storage (recovered ones were synced above).
		if err := sg.closeIndexFiles(); err != nil {
			return nil, fmt.Errorf("open %v: %w", tp, err)
		}
	}
	l.recoveryPoint = l.leo.Load()
	replayed, err := l.loadProducers()
	if err != nil {
		return nil, fmt.Errorf("open %v: producer state: %w", tp, err)
	}
	if replayed && !l.snapshotNeedless(l.leo.Load()) {
		// The log up to its end is on stable storage now (recovered segments were
		// synced above): a snapshot saves the next open this replay.
		if err := l.writeSnapshot(l.leo.Load(), true); err != nil {
			logger.Warn("producer snapshot after recovery failed", "err", err)
		}
	}
	// Leader epochs: the checkpoint file below the first recovered offset (where the
	// file invariant holds, see epochs.go), the batch headers from there.
	epochsFrom := l.leo.Load()
	if len(recovered) > 0 {
		epochsFrom = recovered[0].base
	}
	if err := l.loadEpochs(epochsFrom); err != nil {
		return nil, fmt.Errorf("open %v: leader epochs: %w", tp, err)
	}
	return l, nil
}

// checkpointed is what the log dir's checkpoint files say about one partition.
type checkpointed struct {
	recoveryPoint int64
	clean         bool // the recovery point can be trusted (clean shutdown)
	logStart      int64
	hw            int64  // -1: none
	firstDirty    int64  // the cleaner's progress; 0: none
	dir           string // the directory, when not the partition's own (a move's copy)
}

// listSegments removes leftovers (*.deleted, *.tmp, indexes without a log) and returns
// the base offsets of the segments, ascending. ents is dir's listing if the caller has
// a current one, nil to list it.
func listSegments(dir string, ents []os.DirEntry) ([]int64, error) {
	if ents == nil {
		var err error
		if ents, err = os.ReadDir(dir); err != nil {
			return nil, err
		}
	}
	logs := map[string]bool{}
	var bases []int64
	for _, e := range ents {
		name := e.Name()
		if stem, ok := strings.CutSuffix(name, logSuffix); ok {
			if b, ok := parseBase(stem); ok {
				logs[stem] = true
				bases = append(bases, b)
			}
		}
	}
	for _, e := range ents {
		name := e.Name()
		remove := strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, ".tmp")
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if stem, ok := strings.CutSuffix(name, suf); ok && !logs[stem] {
				remove = true
			}
		}
		if remove {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// parseBase parses a 20-digit segment file stem.
func parseBase(stem string) (int64, bool) {
	if len(stem) != 20 {
		return 0, false
	}
	b, err := strconv.ParseInt(stem, 10, 64)
	return b, err == nil && b >= 0
}
