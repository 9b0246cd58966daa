package segmentlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/kernel"
)

// Reset implements kernel.Log (Kafka's truncateFullyAndStartAt): every segment goes, a
// fresh one starts at offset, and the producer state, the leader epochs and the high
// watermark start over there. The checkpoints are written before it returns.
//
// Crash safety. The steps, and what a crash after each leaves for the next open:
//
//  1. The leader-epoch-checkpoint is removed and the directory synced. A crash from
//     here on finds no file and rebuilds the epochs from the batch headers of whatever
//     segments are left, so they always describe the log recovery ends up with (a
//     stale file would describe the old log, and a lower epoch in the new one would
//     never be added over it). Before this step: the old log, untouched.
//  2. Every producer snapshot is removed. A snapshot at or above offset would
//     otherwise be taken for the new log's state once its end passes it. A crash
//     leaves the old log, whose state is replayed from its first segment (slower,
//     not wrong).
//  3. The segments are renamed to *.deleted, newest first (truncateFully). A crash
//     part way leaves a prefix of the old log: a log the replication protocol already
//     handles (like a truncation), and the next open deletes the *.deleted files.
//     With no segment left, the next open starts an empty log at the checkpointed
//     log start offset.
//  4. The new, empty segment is created at offset and the directory synced: from now
//     on the renames, the removals and the new file are durable. The next open finds
//     one empty segment at offset; its log start is max(checkpointed log start,
//     offset), so the new log is at offset unless offset is below the old log start
//     (then it is empty at the old log start: a consistent log too) until step 6.
//  5. An empty leader-epoch-checkpoint is written (a crash before it: step 1's
//     rebuild, which finds no batches).
//  6. The checkpoints (log start = recovery point = offset) are written.
//
// So a crash leaves the old log, a prefix of it, or an empty log; never old records
// with new state, or the other way round. The caller did not get an answer and resets
// again (a follower below the leader's log start stays below it).
func (l *Log) Reset(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: reset to %d", kernel.ErrInvalidOffset, offset)
	}
	if err := l.dirOfflineErr(); err != nil {
		return err
	}
	l.flushMu.Lock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.flushMu.Unlock()
		return kernel.ErrLogClosed
	}
	l.truncs.Add(1)
	err := l.resetLocked(offset)
	l.mu.Unlock()
	l.flushMu.Unlock()
	if err != nil {
		err = fmt.Errorf("reset %v to %d: %w", l.tp, offset, err)
	}
	return errors.Join(err, l.store.writeCheckpoints())
}

// resetLocked is Reset's steps 1-5 with flushMu and mu held.
func (l *Log) resetLocked(offset int64) error {
	if err := os.Remove(filepath.Join(l.dir, epochCheckpointFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.epochsDirty = true
	for len(l.snaps) > 0 {
		if err := os.Remove(filepath.Join(l.dir, snapshotName(l.snaps[0]))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		l.snaps = l.snaps[1:]
	}
	if err := l.truncateFully(offset); err != nil {
		return err
	}
	l.prod.Reset()
	l.firstDirty = offset
	l.txnUnsynced = l.txnUnsynced[:0]
	l.epochs.Clear()
	l.unflushed = 0
	l.hw.Store(offset)
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.dirDirty = false // flushMu is held: no Flush can be between its snapshot and its end
	return l.writeEpochs()
}
