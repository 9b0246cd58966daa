package segmentlog

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/epochs"
)

// Leader epochs on disk: the partition's leader-epoch-checkpoint file (Kafka's text
// format, see internal/epochs), rewritten atomically (temp file, fsync, rename, fsync
// the directory) when the cache changes.
//
// What recovery relies on (the file invariant): every cache entry that starts below
// the recovery point is in the file, and every file entry that starts below it is in
// the cache, except for entries the log start cut (head truncations are written
// lazily; open applies the log start offset again). Entries at or above the recovery
// point may be missing from the file or stale; open rebuilds them from the batch
// headers. It holds because
//   - a new entry (an append that brings a newer epoch, AssignEpoch) starts at or
//     past the recovery point, or is written before AssignEpoch returns; Flush writes
//     the file before it moves the recovery point past an entry's start
//     (epochsUnwritten) or when an earlier write failed (epochsDirty), and fails if
//     it cannot; a clean Close writes it when an entry starts below the log end;
//   - Truncate only changes entries at or above the new log end, and it lowers the
//     recovery point to at most that;
//   - Reset removes the file (durably) before it changes the log, so a crash part way
//     through rebuilds the entries from whatever segments are left.
//
// All of this runs with mu held.

// writeEpochs writes the cache to the checkpoint file. On failure the file is stale
// and epochsDirty stays set, so Flush and Close try again.
func (l *Log) writeEpochs() error { return l.writeEpochsSync(true) }

// writeEpochsSync is writeEpochs; without sync it replaces the file (temp file and
// rename) with no fsync, for a close whose file system sync follows (Store.Close):
// should that sync fail or not happen, the store writes no clean-shutdown marker and
// moves no recovery point, and the next open finds the old file, the new one, or an
// unreadable one, which it rebuilds from the batch headers.
func (l *Log) writeEpochsSync(sync bool) error {
	l.epochsDirty = true
	path, data := filepath.Join(l.dir, epochCheckpointFile), epochs.Encode(l.epochs.Entries())
	var err error
	if sync {
		err = writeFileAtomic(path, data)
	} else {
		err = writeFileNoDirSync(path, data, false)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", epochCheckpointFile, err)
	}
	l.epochsDirty = false
	l.epochsUnwritten = math.MaxInt64
	return nil
}

// epochAdded records that the cache gained an entry starting at start, which is at or
// past the recovery point: the file needs it only when a Flush moves the recovery
// point past start or a clean Close leaves it below the log end. Until then a crash
// loses nothing: open rebuilds entries at or past the recovery point from the batch
// headers and drops those at or past the log end. So a partition becoming leader
// (AssignEpoch at its log end) writes no file, which at 100,000 partitions is
// 100,000 atomic file replacements saved.
func (l *Log) epochAdded(start int64) {
	l.epochsUnwritten = min(l.epochsUnwritten, start)
}

// epochsChanged writes the file after the cache changed, outside an operation that can
// still fail: a failed write is logged and left to Flush (which does not move the
// recovery point past entries the file lacks).
func (l *Log) epochsChanged() {
	if err := l.writeEpochs(); err != nil {
		l.logger.Warn("leader epoch checkpoint write failed; retrying at the next flush", "err", err)
	}
}

// loadEpochs rebuilds the cache at open: the checkpoint file's entries that start below
// from (the first offset recovery scanned; the log end after a clean shutdown), then
// every newer epoch in the batch headers from there to the log end, then the log start
// and log end applied (entries wholly below the log start go; entries at or past the
// log end, which no record carries, go too, as in Kafka). A missing or unreadable file
// is rebuilt from every batch header. The file is rewritten if the result differs from
// its entries below the log end.
func (l *Log) loadEpochs(from int64) error {
	path := filepath.Join(l.dir, epochCheckpointFile)
	b, err := os.ReadFile(path)
	var es []kernel.EpochEntry
	if err == nil {
		es, err = epochs.Decode(b)
	}
	first, leo := l.segs[0].base, l.leo.Load()
	if err == nil && len(b) == 0 && leo > first {
		// No writer of ours leaves an empty file, and Kafka's only at creation; with
		// records here it is a replacement torn by a crash (a close writes it without
		// fsync), so its entries are unknown, not absent.
		err = fmt.Errorf("%w: empty, for a log with records", epochs.ErrBadCheckpoint)
	}
	// A new, empty partition has no file yet: nothing to warn about, nothing to write
	// until its first epoch.
	fresh := errors.Is(err, os.ErrNotExist) && leo == first
	if err != nil {
		if !fresh {
			l.logger.Warn("leader epoch checkpoint unusable; rebuilding it from the batch headers", "err", err)
		}
		es, from = nil, first
	}
	// The file's entries that start below the log end: what the result is compared
	// with. Entries at or past it (an epoch assigned, never written in) are stale,
	// which the file invariant allows, so they alone do not make open rewrite the
	// file, as they would at every restart of a broker whose leaders assigned their
	// epochs and got no records.
	var kept []kernel.EpochEntry
	for _, e := range es {
		if e.StartOffset < leo {
			kept = append(kept, e)
		}
	}
	fileBelowEnd := string(epochs.Encode(kept))
	l.epochs.Load(es)
	l.epochs.TruncateFromEnd(from)
	if err := l.replayEpochs(from); err != nil {
		return err
	}
	l.epochs.TruncateFromStart(l.logStart.Load())
	l.epochs.TruncateFromEnd(leo)
	if (err != nil && !(fresh && l.epochs.Len() == 0)) || (err == nil && string(epochs.Encode(l.epochs.Entries())) != fileBelowEnd) {
		l.epochsChanged()
	}
	return nil
}

// replayEpochs adds the newer epochs of the batches from offset from (a batch boundary
// or a segment base) to the log end, reading headers only.
func (l *Log) replayEpochs(from int64) error {
	if from >= l.leo.Load() {
		return nil
	}
	return l.walkHeaders(from, "rebuild leader epochs", func(s *segment, pos int64, h *recordbatch.Header) error {
		if h.BaseOffset >= from {
			// Cannot fail: the entries kept start below from, and offsets increase
			// (recovery and segment loading checked them).
			_, _ = l.epochs.Assign(h.PartitionLeaderEpoch, h.BaseOffset)
		}
		return nil
	})
}

// walkHeaders calls fn with the header of every batch from the one at or after offset
// from (a batch boundary or a segment base; the offset index finds where to start in
// its segment) to the log end, with its segment and file position. It reads headers
// only; fn's errors and read errors come back prefixed with what and the position.
func (l *Log) walkHeaders(from int64, what string, fn func(s *segment, pos int64, h *recordbatch.Header) error) error {
	var hdr [recordbatch.HeaderSize]byte
	for i, s := range l.segs {
		if i+1 < len(l.segs) && l.segs[i+1].base <= from {
			continue
		}
		pos := int64(0)
		if from > s.base {
			pos = s.oidx.lookup(from)
		}
		for pos < s.size {
			h, err := s.readHeader(hdr[:], pos)
			if err == nil {
				err = fn(s, pos, &h)
			}
			if err != nil {
				return fmt.Errorf("%s at %d of segment %d: %w", what, pos, s.base, err)
			}
			pos += int64(h.Size())
		}
	}
	return nil
}

// AssignEpoch implements kernel.Log. Besides the documented rules, a start offset
// below the log start is kernel.ErrInvalidOffset (the cache's entries never start
// below it). The checkpoint file is written before it returns when startOffset is
// below the recovery point, else when the recovery point passes it (epochAdded).
func (l *Log) AssignEpoch(epoch int32, startOffset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return kernel.ErrLogClosed
	}
	if err := l.dirOfflineErr(); err != nil {
		return err
	}
	if epoch < 0 || epoch <= l.epochs.LatestEpoch() {
		return nil
	}
	if start, leo := l.logStart.Load(), l.leo.Load(); startOffset > leo || startOffset < start {
		return fmt.Errorf("%w: epoch %d at %d, log %d..%d", kernel.ErrInvalidOffset, epoch, startOffset, start, leo)
	}
	if _, err := l.epochs.Assign(epoch, startOffset); err != nil {
		return err
	}
	if startOffset >= l.recoveryPoint {
		l.epochAdded(startOffset)
		return nil
	}
	if err := l.writeEpochs(); err != nil {
		// The entry stays (the file is written again at the next flush); the caller
		// learns that it is not durable yet.
		return fmt.Errorf("assign leader epoch %d: %w", epoch, err)
	}
	return nil
}

// Epochs implements kernel.Log.
func (l *Log) Epochs() []kernel.EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Entries()
}

// EndOffsetForEpoch implements kernel.Log.
func (l *Log) EndOffsetForEpoch(requested int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.EndOffsetFor(requested, l.leo.Load())
}

// SetHighWatermark implements kernel.Log: one atomic store (called on every HW move).
// The store's checkpoint loop persists it.
func (l *Log) SetHighWatermark(hw int64) { l.hw.Store(hw) }

// HighWatermark implements kernel.Log, without a lock.
func (l *Log) HighWatermark() int64 {
	return min(max(l.hw.Load(), l.logStart.Load()), l.leo.Load())
}

// lowerHW clamps the recorded high watermark to leo (the log end after a truncation),
// so records appended later at those offsets are not taken as replicated. A concurrent
// SetHighWatermark wins or is clamped; either is a value the replication module set.
func (l *Log) lowerHW(leo int64) {
	for {
		hw := l.hw.Load()
		if hw <= leo || l.hw.CompareAndSwap(hw, leo) {
			return
		}
	}
}
