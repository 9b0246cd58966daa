package segmentlog

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// Moving a replica between log dirs (AlterReplicaLogDirs, Kafka's future replicas).
//
// A move copies the partition's log into a future directory in the destination,
// "<topic>-<partition>.<32 hex>-future", while the partition keeps serving from its
// current log: batches are read from the current log and appended to the copy (a
// follower append: offsets, producer state and transaction index come with them)
// until the copy has caught up. Then the swap, holding the partition's swapMu stripe
// (no open or removal of it meanwhile) and the current log's flushMu and mu (no
// append, truncation or flush of it):
//
//  1. the last batches are copied; the copy takes the current log's producer state,
//     leader epochs and high watermark, and is closed: its segments, producer
//     snapshot and epoch checkpoint synced;
//  2. a marker file (movedMarker) is written in the copy and the directory synced;
//  3. the copy is renamed to "<topic>-<partition>" in the destination, which is synced;
//  4. it is opened there as a clean log, the handle switched to it, the old log
//     closed; the old directory is renamed away and deleted, then the marker removed.
//
// Crash safety: before step 3 the old directory is the partition and a leftover
// future directory is deleted at the next start. After step 3 and before the old
// directory is renamed away, both directories hold the partition with the same
// records (the old log took no append after step 1); the next start keeps the one
// with the marker and deletes the other (openDirSet), where Kafka refuses to start.
//
// A move restarts its copy when the current log was truncated or reset meanwhile
// (truncs), and is abandoned when either directory fails, the partition is removed,
// another AlterReplicaLogDirs names another destination, or the module stops.

// movedMarker is the file a finished copy holds until the old directory is gone.
const movedMarker = ".sluice-moved"

// futureDirSuffix ends the directory of a move's copy.
const futureDirSuffix = "-future"

// maxFutureName bounds the future directory's name (Kafka's check: a file name).
const maxFutureName = 255

// moveChunk is how many bytes a move copies per read.
const moveChunk = 1 << 20

// move is one replica move in progress.
type move struct {
	tp     kernel.TopicPartition
	to     *Store
	cancel chan struct{}
	done   chan struct{}
	future atomic.Pointer[Log] // the copy, once created (DescribeLogDirs lists it)
	lag    atomic.Int64        // the current log end minus the copy's
	// prev is the move of the same partition this one replaced (canceled): it starts
	// only once prev's goroutine has removed its copy, so waiting for the newest move
	// of a partition waits for all of them.
	prev *move
	// canceled: cancel was closed (under dirSet.mu). A canceled move stays in
	// dirSet.moves until its goroutine ends, so Remove and Close wait for its clean-up.
	canceled bool
}

// cancelLocked cancels mv once (d.mu held).
func (mv *move) cancelLocked() {
	if !mv.canceled {
		mv.canceled = true
		close(mv.cancel)
	}
}

var errMoveCanceled = errors.New("move canceled")

// alter is AlterReplicaLogDirs for one partition: a Kafka error code.
func (d *dirSet) alter(tp kernel.TopicPartition, dest string) int16 {
	if !validTopic(tp.Topic) || tp.Partition < 0 || len(tp.String())+34+len(futureDirSuffix) > maxFutureName {
		return kerr.InvalidTopicException.Code
	}
	dest = filepath.Clean(dest)
	var to *Store
	for _, s := range d.stores {
		if s.dir == dest {
			to = s
		}
	}
	if to == nil {
		for _, l := range d.down {
			if l.Path == dest {
				return kerr.KafkaStorageError.Code
			}
		}
		return kerr.LogDirNotFound.Code
	}
	if to.failed() != nil {
		return kerr.KafkaStorageError.Code
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return kerr.KafkaStorageError.Code
	}
	prev := d.moves[tp]
	mv := prev
	if mv != nil && (mv.canceled || mv.to != to) {
		mv.cancelLocked() // its goroutine cleans up and forgets it
		mv = nil
	}
	h := d.handles[tp]
	if h == nil {
		// Not here (yet): the replica is created in dest when it comes (Kafka answers
		// this REPLICA_NOT_AVAILABLE, and its tools retry until the replica exists).
		d.preferred[tp] = to
		return kerr.ReplicaNotAvailable.Code
	}
	cur := h.cur.Load()
	if cur.store.failed() != nil {
		return kerr.KafkaStorageError.Code
	}
	if cur.store == to || mv != nil {
		return 0 // there already, or on its way
	}
	if len(d.down) > 0 {
		// Kafka creates no future replica while a log dir is offline: the partition
		// might have a copy in it.
		return kerr.KafkaStorageError.Code
	}
	mv = &move{tp: tp, to: to, cancel: make(chan struct{}), done: make(chan struct{}), prev: prev}
	d.moves[tp] = mv
	d.wg.Add(1)
	go d.runMove(mv, h)
	return 0
}

// runMove copies and swaps until done, canceled or failed.
func (d *dirSet) runMove(mv *move, h *handle) {
	defer d.wg.Done()
	defer close(mv.done)
	if mv.prev != nil {
		<-mv.prev.done
	}
	from := h.cur.Load().store
	var err error
	for attempt := 0; ; attempt++ {
		err = d.moveOnce(mv, h)
		if !errors.Is(err, errMoveAgain) || attempt >= 10 {
			break
		}
	}
	d.mu.Lock()
	if d.moves[mv.tp] == mv {
		delete(d.moves, mv.tp)
	}
	d.mu.Unlock()
	switch {
	case err == nil:
		d.logger.Info("replica moved to another log dir", "topic", mv.tp.Topic, "partition", mv.tp.Partition,
			"from", from.dir, "to", mv.to.dir)
	case errors.Is(err, errMoveCanceled):
		d.logger.Info("replica move canceled", "topic", mv.tp.Topic, "partition", mv.tp.Partition, "to", mv.to.dir)
	default:
		d.logger.Warn("replica move failed; the replica stays where it was", "topic", mv.tp.Topic, "partition", mv.tp.Partition,
			"from", from.dir, "to", mv.to.dir, "err", err)
	}
}

var errMoveAgain = errors.New("the log was truncated during the copy")

// moveOnce is one copy and swap; errMoveAgain asks for another.
func (d *dirSet) moveOnce(mv *move, h *handle) (err error) {
	src := h.cur.Load()
	if src.store == mv.to {
		return nil
	}
	topicID, _, err := readPartitionMetadata(src.dir)
	if err != nil {
		return err
	}
	future, err := mv.to.openFuture(mv.tp, topicID, src.config())
	if err != nil {
		return err
	}
	mv.future.Store(future)
	swapped := false
	defer func() {
		mv.future.Store(nil)
		if swapped {
			return
		}
		future.closeForRemove()
		err = errors.Join(err, os.RemoveAll(future.dir))
	}()
	gen := src.truncs.Load()
	buf := make([]byte, 0, moveChunk)
	for {
		select {
		case <-mv.cancel:
			return errMoveCanceled
		default:
		}
		if h.cur.Load() != src {
			return errors.New("the partition's log was replaced")
		}
		if src.truncs.Load() != gen {
			return errMoveAgain
		}
		fl := future.LogEndOffset()
		if ls := src.LogStartOffset(); ls > future.LogStartOffset() {
			if ls <= fl {
				err = future.DeleteRecordsBefore(ls)
			} else {
				err = future.Reset(ls)
			}
			if err != nil {
				return err
			}
			continue
		}
		leo := src.LogEndOffset()
		mv.lag.Store(leo - fl)
		if leo-fl <= 0 {
			break
		}
		rr, err := src.Read(fl, moveChunk, leo, true)
		if err != nil {
			return err
		}
		buf, err = chunkBytes(rr, buf[:0])
		rr.Release()
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			continue // the log start moved under the read
		}
		if _, err := future.AppendFollower(buf); err != nil {
			return err
		}
		if len(buf) < moveChunk/2 {
			break // near the end: the swap copies the rest under the lock
		}
	}
	if err := d.swap(mv, h, src, future, gen, topicID); err != nil {
		return err
	}
	swapped = true
	return nil
}

// swap is the move's steps 1-4 (see above).
func (d *dirSet) swap(mv *move, h *handle, src, future *Log, gen uint64, topicID [16]byte) error {
	mu := d.swapMu(mv.tp)
	mu.Lock()
	defer mu.Unlock()
	select {
	case <-mv.cancel:
		return errMoveCanceled
	default:
	}
	src.flushMu.Lock()
	src.mu.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			src.mu.Unlock()
			src.flushMu.Unlock()
		}
	}
	defer unlock()
	if src.closed || h.cur.Load() != src {
		return errors.New("the partition's log was closed")
	}
	if src.truncs.Load() != gen {
		return errMoveAgain
	}
	if err := src.offlineErr(); err != nil {
		return err
	}
	var buf []byte
	for fl := future.LogEndOffset(); fl < src.leo.Load(); fl = future.LogEndOffset() {
		rr, rh, err := src.readLocked(fl, moveChunk, src.leo.Load(), true)
		if err == nil {
			buf, err = chunkBytes(rr, buf[:0])
		}
		if rh != nil {
			rh.release()
		}
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return fmt.Errorf("copy %v: nothing read at %d below the log end %d", src.tp, fl, src.leo.Load())
		}
		if _, err := future.AppendFollower(buf); err != nil {
			return err
		}
	}
	leo, logStart, hw := src.leo.Load(), src.logStart.Load(), src.hw.Load()
	if logStart > future.LogStartOffset() {
		if err := future.DeleteRecordsBefore(logStart); err != nil {
			return err
		}
	}
	// Step 1: the copy takes the state the current log holds beyond its batches
	// (producers whose batches retention deleted, epochs assigned at a leader change).
	future.mu.Lock()
	future.prod = src.prod
	future.epochs.Load(src.epochs.Entries())
	future.epochsDirty = true
	future.mu.Unlock()
	future.hw.Store(hw)
	if err := future.close(false); err != nil {
		return err
	}
	// Step 2.
	if err := writeFileAtomic(filepath.Join(future.dir, movedMarker), nil); err != nil {
		return err
	}
	// Step 3.
	final := filepath.Join(mv.to.dir, mv.tp.String())
	if _, err := os.Stat(final); err == nil {
		return fmt.Errorf("%s exists already", final)
	}
	if err := os.Rename(future.dir, final); err != nil {
		return err
	}
	if err := syncDir(mv.to.dir); err != nil {
		return errors.Join(err, d.unrename(final, future.dir, mv.to.dir))
	}
	// Step 4.
	n, err := mv.to.openWith(mv.tp, topicID, src.cfg, &checkpointed{recoveryPoint: leo, clean: true, logStart: logStart, hw: hw})
	if err != nil {
		return errors.Join(err, d.unrename(final, future.dir, mv.to.dir))
	}
	h.cur.Store(n)
	src.closed = true
	for _, s := range src.segs {
		s.unref()
	}
	src.segs = nil
	unlock()
	from := src.store
	d.mu.Lock()
	if d.where[mv.tp] == from {
		d.count[from]--
	}
	d.where[mv.tp] = mv.to
	d.count[mv.to]++
	d.mu.Unlock()
	if err := from.Remove(mv.tp); err != nil {
		// The next start finds two copies and keeps the marked one.
		d.logger.Warn("removing the moved replica's old directory failed", "topic", mv.tp.Topic, "partition", mv.tp.Partition, "dir", from.dir, "err", err)
		return nil
	}
	if err := os.Remove(filepath.Join(final, movedMarker)); err != nil {
		d.logger.Warn("removing a move's marker failed", "dir", final, "err", err)
	}
	return nil
}

// unrename puts a copy back under its future name after a failed step 4 (the
// caller deletes it), or deletes it: the current log goes on taking appends, so a
// marked copy must not outlive the failure.
func (d *dirSet) unrename(final, future, parent string) error {
	if err := os.Rename(final, future); err != nil {
		return errors.Join(err, os.RemoveAll(final), syncDir(parent))
	}
	return syncDir(parent)
}

// chunkBytes appends the bytes of rr's chunks to buf.
func chunkBytes(rr kernel.ReadResult, buf []byte) ([]byte, error) {
	for _, c := range rr.Chunks {
		if c.File == nil {
			buf = append(buf, c.Bytes...)
			continue
		}
		at := len(buf)
		buf = append(buf, make([]byte, c.N)...)
		if _, err := c.File.ReadAt(buf[at:], c.Off); err != nil {
			return buf, readErr(err)
		}
	}
	return buf, nil
}

// openFuture creates and opens the directory of a move's copy of tp in s. The copy is
// not one of the store's logs: the move owns it until the swap.
func (s *Store) openFuture(tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig) (*Log, error) {
	if err := s.failed(); err != nil {
		return nil, err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.dir, tp.String()+"."+hex.EncodeToString(id[:])+futureDirSuffix)
	l, err := openLog(s, tp, topicID, cfg, checkpointed{hw: -1, dir: dir})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return l, nil
}

// config is the log's configuration.
func (l *Log) config() kernel.LogConfig {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// isFutureDir reports whether name is a move's copy (deleted at open: a move
// interrupted before its swap).
func isFutureDir(name string) bool { return strings.HasSuffix(name, futureDirSuffix) }

// stopMoves cancels every move and waits for them; no move starts after.
func (d *dirSet) stopMoves() {
	d.mu.Lock()
	d.stopped = true
	for _, mv := range d.moves {
		mv.cancelLocked()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// cancelMove cancels the move of tp, if any, and waits for it to end.
func (d *dirSet) cancelMove(tp kernel.TopicPartition) {
	d.mu.Lock()
	mv := d.moves[tp]
	if mv != nil {
		mv.cancelLocked()
	}
	d.mu.Unlock()
	if mv != nil {
		<-mv.done // and, through prev, every earlier move of tp
	}
}
