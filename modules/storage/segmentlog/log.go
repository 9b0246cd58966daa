package segmentlog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/batches"
	"github.com/sluicehq/sluice/modules/storage/internal/epochs"
	"github.com/sluicehq/sluice/modules/storage/internal/producers"
)

// Log is one partition's segment log.
type Log struct {
	store  *Store
	tp     kernel.TopicPartition
	dir    string
	logger *slog.Logger

	flushMu sync.Mutex // serializes Flush; taken before mu

	mu            sync.RWMutex
	cfg           kernel.LogConfig
	segs          []*segment // by base offset; the last is the active segment
	recoveryPoint int64
	unflushed     int64 // records appended since the last flush
	lastFlushMs   int64
	dirDirty      bool // files were created since the directory was last synced
	// dirGen counts the files created (each sets dirDirty), so that a Flush clears
	// dirDirty only if nothing was created after it took its snapshot: a segment
	// rolled while it synced is not covered by that sync.
	dirGen uint64
	closed bool

	// prod is the producer state of the log (plus the sequence ranges of empty
	// AppendProducer calls). Guarded by mu. txnUnsynced lists the segments whose
	// .txnindex got entries since the last snapshot (synced before the next one).
	prod        *producers.State
	txnUnsynced []int64
	// snaps are the offsets of the producer snapshot files in dir, ascending
	// (guarded by mu): listed by loadProducers, then kept by writeSnapshot and
	// removeSnapshot, so a roll never lists the directory.
	snaps []int64
	// snapOffset and snapData: the snapshot file at snapOffset holds (loads as) the
	// state snapData encodes (-1, nil: unknown), guarded by mu; see writeSnapshot.
	snapOffset int64
	snapData   []byte

	// epochs is the leader-epoch cache, guarded by mu. epochsDirty: the
	// leader-epoch-checkpoint file is behind it (a failed write, or a head truncation,
	// which is written lazily); Flush writes it before it moves the recovery point.
	// epochsUnwritten: the smallest start of an entry added since the file was last
	// written (math.MaxInt64: none), which the file needs only once the recovery
	// point passes it (epochAdded). See epochs.go for what the file promises recovery.
	epochs          epochs.Cache
	epochsDirty     bool
	epochsUnwritten int64

	// firstDirty is the cleaner's progress (compacted logs): every record below it
	// was in the offset map of some pass, so the log below it holds at most one
	// record per key (plus tombstones and markers within their delete horizon).
	// Guarded by mu; checkpointed in the log dir's cleaner-offset-checkpoint; never
	// above the log end (truncation lowers it).
	firstDirty int64

	// hw is the high watermark the replication module last set (-1: never); read
	// clamped to [logStart, leo], checkpointed by the store.
	hw atomic.Int64

	// Mirrors of the offsets for lock-free readers, written under mu.
	logStart atomic.Int64
	leo      atomic.Int64

	// truncs counts Truncate and Reset calls: a move's copy (move.go) that sees it
	// change starts over, since records it copied may be gone or replaced.
	truncs atomic.Uint64

	// offline is the first corrupt batch a read found (verify.go): while set, reads and
	// appends fail with kernel.ErrLogOffline; Truncate cuts it off.
	offline atomic.Pointer[damage]
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

func (l *Log) nowMs() int64 { return l.store.now().UnixMilli() }

// AppendLeader implements kernel.Log.
func (l *Log) AppendLeader(records []byte) (kernel.AppendResult, error) {
	return l.append(records, producers.Leader, nil)
}

// AppendFollower implements kernel.Log.
func (l *Log) AppendFollower(records []byte) (kernel.AppendResult, error) {
	return l.append(records, producers.Follower, nil)
}

func (l *Log) append(records []byte, mode producers.Mode, seq *kernel.SeqRange) (kernel.AppendResult, error) {
	l.mu.Lock()
	res, flush, err := l.appendLocked(records, mode, seq)
	l.mu.Unlock()
	if err == nil && flush {
		err = l.Flush()
	}
	l.store.noteErr(err)
	return res, err
}

// appendLocked appends records after checking their producer effects in mode (seq, if
// set, replaces the first batch's sequence range). The producer state changes only
// after the bytes are written: a failed append leaves it as it was.
func (l *Log) appendLocked(records []byte, mode producers.Mode, seq *kernel.SeqRange) (res kernel.AppendResult, flush bool, err error) {
	leader := mode != producers.Follower
	if l.closed {
		return res, false, kernel.ErrLogClosed
	}
	if err := l.offlineErr(); err != nil {
		return res, false, err
	}
	if len(records) == 0 {
		return res, false, batches.Corrupt(recordbatch.ErrShort)
	}
	leo := l.leo.Load()
	nowMs := l.nowMs()
	pend := l.prod.Begin()
	next, maxTs, first, count := leo, int64(-1), int64(-1), int64(0)
	// Newer leader epochs are collected here and assigned after the write (rare: at
	// most one per leader change, so the slice is nil on the common path).
	latestEpoch := l.epochs.LatestEpoch()
	var newEpochs []kernel.EpochEntry
	for b := records; len(b) > 0; {
		h, err := recordbatch.ParseHeader(b)
		if err != nil {
			return res, false, batches.Corrupt(err)
		}
		if h.Size() > len(b) || h.LastOffsetDelta < 0 || h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
			return res, false, batches.Corrupt(recordbatch.ErrLength)
		}
		base := next
		if !leader {
			if h.BaseOffset < next {
				return res, false, fmt.Errorf("%w: batch at %d, log end %d", kernel.ErrInvalidOffset, h.BaseOffset, next)
			}
			base = h.BaseOffset
		}
		if first < 0 {
			first = base
		}
		if h.PartitionLeaderEpoch > latestEpoch {
			latestEpoch = h.PartitionLeaderEpoch
			newEpochs = append(newEpochs, kernel.EpochEntry{Epoch: latestEpoch, StartOffset: base})
		}
		if h.ProducerID >= 0 {
			h.BaseOffset = base
			pb, err := producers.FromHeader(&h, b[:h.Size()], nowMs)
			if err != nil {
				return res, false, batches.Corrupt(err)
			}
			if seq != nil && first == base {
				pb.FirstSeq, pb.LastSeq = seq.First, seq.Last
			}
			d, dup, err := pend.Check(pb, mode)
			if err != nil {
				return res, false, err
			}
			if dup {
				if first != base || h.Size() != len(b) {
					return res, false, fmt.Errorf("%w: duplicate batch inside a multi-batch append", kernel.ErrOutOfOrderSequence)
				}
				return kernel.AppendResult{BaseOffset: d.BaseOffset, LastOffset: d.LastOffset, LogAppendTime: d.AppendMs, LogStartOffset: l.logStart.Load(), Duplicate: true}, false, nil
			}
		}
		next = base + int64(h.LastOffsetDelta) + 1
		maxTs = max(maxTs, h.MaxTimestamp)
		count += int64(h.LastOffsetDelta) + 1
		b = b[h.Size():]
	}
	act := l.active()
	if act.oidx.full() || act.tidx.full() || batches.ShouldRoll(&l.cfg, batches.RollInfo{Size: act.size, FirstBatchTs: act.firstTs, CreatedMs: act.createdMs, BaseOffset: act.base}, int64(len(records)), maxTs, next-1, nowMs) {
		if act.size > 0 {
			if err := l.roll(first); err != nil {
				return res, false, err
			}
			act = l.active()
		}
	}
	if leader {
		off := leo
		for b := records; len(b) > 0; {
			h, _ := recordbatch.ParseHeader(b)
			recordbatch.SetBaseOffset(b, off)
			off += int64(h.LastOffsetDelta) + 1
			b = b[h.Size():]
		}
	}
	// ABORT markers: their .txnindex entries go first, so a crash never leaves an
	// abort on disk without its entry (a failed append rewrites the file back; recovery
	// re-derives the entries above the snapshot it starts from).
	if ab := pend.Aborted(); len(ab) > 0 {
		if err := l.appendTxnIndex(act.base, ab); err != nil {
			return res, false, err
		}
	}
	if err := act.append(records, l.cfg.IndexIntervalBytes); err != nil {
		if len(pend.Aborted()) > 0 {
			err = errors.Join(err, l.rewriteTxnIndexes(act.base))
		}
		return res, false, err
	}
	pend.Commit()
	l.leo.Store(next)
	l.unflushed += count
	if len(newEpochs) > 0 {
		for _, e := range newEpochs {
			// Cannot fail: epochs increase and starts are at or past the old log end,
			// which is at or past every entry's start.
			_, _ = l.epochs.Assign(e.Epoch, e.StartOffset)
			l.epochAdded(e.StartOffset)
		}
	}
	fm := l.cfg.FlushMessages
	flush = fm > 0 && fm != math.MaxInt64 && l.unflushed >= fm
	return kernel.AppendResult{BaseOffset: first, LastOffset: next - 1, LogAppendTime: nowMs, LogStartOffset: l.logStart.Load()}, flush, nil
}

// markDirDirty records that a file was created in the partition directory. mu held.
func (l *Log) markDirDirty() {
	l.dirDirty = true
	l.dirGen++
}

// roll seals the active segment and starts a new one at base. Called with mu held.
func (l *Log) roll(base int64) error {
	old := l.active()
	if err := old.seal(); err != nil {
		return err
	}
	s, err := openSegment(l.store.files, l.dir, base, true, l.cfg.SegmentIndexBytes, l.nowMs(), l.logger)
	if err != nil {
		return err
	}
	if err := s.activate(l.cfg.SegmentIndexBytes); err != nil {
		s.unref()
		return err
	}
	l.segs = append(l.segs, s)
	l.markDirDirty()
	// The producer state as of base (the log end: this append's batches are not
	// applied yet), so recovery replays at most the new segment.
	if err := l.writeSnapshot(base, true); err != nil {
		l.logger.Warn("producer snapshot at segment roll failed", "offset", base, "err", err)
	}
	return nil
}

// readHandle pins the segments of one ReadResult, and their .log descriptors in the
// file-handle cache: a kernel.Chunk's File is written with sendfile after Read returns,
// so it must stay open (and its number must not be reused) until the response is
// written and Release is called. Its scratch buffer serves the header reads of that
// Read, so a Read allocates the handle and its Release func only.
type readHandle struct {
	pinned   [2]*segment
	more     []*segment
	chunks   [2]kernel.Chunk
	buf      [recordbatch.LogOverhead]byte
	reserved int // pins counted in the file cache's heldByReads
	released atomic.Bool
}

// pin pins s and its log file and returns the descriptor to hand out.
func (h *readHandle) pin(s *segment) (*os.File, error) {
	f, err := s.log.acquire()
	if err != nil {
		return nil, err
	}
	s.pin()
	if h.pinned[0] == nil {
		h.pinned[0] = s
	} else if h.pinned[1] == nil {
		h.pinned[1] = s
	} else {
		h.more = append(h.more, s)
	}
	return f, nil
}

func (h *readHandle) release() {
	if h.released.Swap(true) {
		return
	}
	if h.reserved > 0 { // reserved implies a pinned segment, whose cache it is
		h.pinned[0].log.c.unreserveReadPins(h.reserved)
	}
	// The descriptor pin goes before the segment's: the last unref closes the file.
	for _, s := range h.pinned {
		if s != nil {
			s.log.release()
			s.unref()
		}
	}
	for _, s := range h.more {
		s.log.release()
		s.unref()
	}
}

func noRelease() {}

// Read implements kernel.Log. It returns file ranges of the pinned segments; no record
// bytes are copied, unless responses already hold half the file budget
// (reserveReadPins): then the bytes are copied out and nothing stays pinned. Bytes not
// verified since the segment was opened are checked (verify.go) after the lock is
// released, before the result is returned.
func (l *Log) Read(offset, maxBytes, maxOffset int64, minOneBatch bool) (kernel.ReadResult, error) {
	l.mu.RLock()
	rr, h, err := l.readLocked(offset, maxBytes, maxOffset, minOneBatch)
	l.mu.RUnlock()
	if err != nil || h == nil {
		return rr, err
	}
	if err := l.verifyRead(h, rr); err != nil {
		h.release()
		return kernel.ReadResult{Release: noRelease}, err
	}
	if c, n := l.store.files, filePins(&rr); c.reserveReadPins(n) {
		h.reserved = n
		return rr, nil
	}
	return l.copyOut(h, rr)
}

// copyOut reads rr's file ranges into one buffer and releases h: a result that pins
// nothing. The segments stay pinned (by h) while they are read.
func (l *Log) copyOut(h *readHandle, rr kernel.ReadResult) (kernel.ReadResult, error) {
	defer h.release()
	buf := make([]byte, rr.Size)
	p := int64(0)
	for _, c := range rr.Chunks {
		if c.File == nil {
			p += int64(copy(buf[p:], c.Bytes))
			continue
		}
		if _, err := c.File.ReadAt(buf[p:p+c.N], c.Off); err != nil {
			return kernel.ReadResult{Release: noRelease}, fmt.Errorf("read %v: %w", l.tp, readErr(err))
		}
		p += c.N
	}
	return kernel.ReadResult{Chunks: []kernel.Chunk{{Bytes: buf}}, Size: rr.Size, NextOffset: rr.NextOffset, Release: noRelease}, nil
}

// readLocked is Read under mu (shared); h is nil when rr pins nothing.
func (l *Log) readLocked(offset, maxBytes, maxOffset int64, minOneBatch bool) (kernel.ReadResult, *readHandle, error) {
	if l.closed {
		return kernel.ReadResult{Release: noRelease}, nil, kernel.ErrLogClosed
	}
	if err := l.offlineErr(); err != nil {
		return kernel.ReadResult{Release: noRelease}, nil, err
	}
	start, leo := l.logStart.Load(), l.leo.Load()
	if offset < start || offset > leo {
		return kernel.ReadResult{Release: noRelease}, nil, fmt.Errorf("%w: %d not in [%d, %d]", kernel.ErrOffsetOutOfRange, offset, start, leo)
	}
	if offset == leo {
		return kernel.ReadResult{Release: noRelease}, nil, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	h := &readHandle{}
	rr := kernel.ReadResult{Chunks: h.chunks[:0]}
	maxChunks := l.store.files.maxPinned()
	for ; i < len(l.segs) && len(rr.Chunks) < maxChunks; i++ {
		s := l.segs[i]
		pos, n, end, full, err := s.scan(h.buf[:], offset, maxOffset, maxBytes-rr.Size, minOneBatch && rr.Size == 0)
		if err != nil {
			h.release()
			if errors.Is(err, kernel.ErrCorrupt) {
				err = l.scanDamage(s, offset, err)
			} else {
				err = fmt.Errorf("read %v at %d: %w", l.tp, offset, err)
			}
			return kernel.ReadResult{Release: noRelease}, nil, err
		}
		if n > 0 {
			rr.NextOffset = end
		}
		if b, ok := s.tailBytes(pos, n); n > 0 && ok {
			// Just written: from memory, no descriptor pinned (tail.go).
			rr.Chunks = append(rr.Chunks, kernel.Chunk{Bytes: b})
			rr.Size += n
		} else if n > 0 {
			f, err := h.pin(s)
			if err != nil {
				h.release()
				return kernel.ReadResult{Release: noRelease}, nil, fmt.Errorf("read %v at %d: %w", l.tp, offset, err)
			}
			rr.Chunks = append(rr.Chunks, kernel.Chunk{File: f, Off: pos, N: n})
			rr.Size += n
		}
		if full {
			break
		}
	}
	if rr.Size == 0 {
		return kernel.ReadResult{Release: noRelease}, nil, nil
	}
	if h.pinned[0] == nil { // all from tails: nothing pinned, nothing to verify
		rr.Release = noRelease
		return rr, nil, nil
	}
	rr.Release = h.release
	return rr, h, nil
}

// filePins counts the chunks of rr that pin a file (the others are tail bytes).
func filePins(rr *kernel.ReadResult) int {
	n := 0
	for i := range rr.Chunks {
		if rr.Chunks[i].File != nil {
			n++
		}
	}
	return n
}

// LogStartOffset implements kernel.Log.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset implements kernel.Log.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// OffsetForTimestamp implements kernel.Log: segments whose max timestamp is below ts are
// skipped, the time index gives a starting point inside a segment, and batch headers
// are scanned from there.
func (l *Log) OffsetForTimestamp(ts int64) (int64, int64, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, 0, false, kernel.ErrLogClosed
	}
	logStart := l.logStart.Load()
	var hdr [recordbatch.HeaderSize]byte
	var buf []byte
	for _, s := range l.segs {
		if s.size == 0 || s.maxTs < ts || s.next <= logStart {
			continue
		}
		pos := int64(0)
		if off, ok := s.tidx.lookupBelow(ts); ok {
			pos = s.oidx.lookup(off)
		}
		for pos < s.size {
			h, err := s.readHeader(hdr[:], pos)
			if err != nil {
				return 0, 0, false, fmt.Errorf("offset for timestamp %v: %w", l.tp, err)
			}
			if h.MaxTimestamp >= ts && h.LastOffset() >= logStart {
				n := h.Size()
				if cap(buf) < n {
					buf = make([]byte, n)
				}
				buf = buf[:n]
				if _, err := s.log.ReadAt(buf, pos); err != nil {
					return 0, 0, false, fmt.Errorf("offset for timestamp %v: %w", l.tp, err)
				}
				if off, rts, ok := batches.FirstAtOrAfter(buf, h, ts, logStart); ok {
					return off, rts, true, nil
				}
			}
			pos += int64(h.Size())
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp implements kernel.Log. The offset is the base offset of the first batch
// that holds the largest timestamp.
func (l *Log) MaxTimestamp() (int64, int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var best *segment
	for _, s := range l.segs {
		if s.size > 0 && (best == nil || s.maxTs > best.maxTs) {
			best = s
		}
	}
	if best == nil || l.closed {
		return 0, 0, false
	}
	var buf [recordbatch.LogOverhead]byte
	pos, err := best.startOf(buf[:], best.maxTsOff)
	if err != nil {
		return best.maxTs, best.maxTsOff, true
	}
	base, _, err := best.readPrefix(buf[:], pos)
	if err != nil {
		return best.maxTs, best.maxTsOff, true
	}
	return best.maxTs, base, true
}

// DeleteRecordsBefore implements kernel.Log. The new log start offset is checkpointed
// before it returns.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	if err := l.dirOfflineErr(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return kernel.ErrLogClosed
	}
	if leo := l.leo.Load(); offset > leo {
		l.mu.Unlock()
		return fmt.Errorf("%w: delete records before %d, log end %d", kernel.ErrOffsetOutOfRange, offset, leo)
	}
	moved := offset > l.logStart.Load()
	if moved {
		l.logStart.Store(offset)
	}
	err := l.deleteOldest(l.deletable(time.Time{}))
	l.prod.TruncateHead(l.logStart.Load())
	l.truncateEpochsHead()
	l.mu.Unlock()
	if moved {
		return errors.Join(err, l.store.writeCheckpoints())
	}
	return err
}

// EnforceRetention deletes the oldest segments that retention.ms, retention.bytes or the
// log start offset no longer keep. When the active segment itself is past retention,
// the log rolls a new, empty segment at the log end offset and deletes all the old
// ones, as Kafka does: the log is then empty from its log end offset on, and the
// checkpoints are written before it returns.
func (l *Log) EnforceRetention(now time.Time) error {
	if err := l.dirOfflineErr(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return kernel.ErrLogClosed
	}
	l.prod.Expire(now.UnixMilli(), l.cfg.ProducerIDExpirationMs)
	n := l.deletable(now)
	if n == 0 {
		l.mu.Unlock()
		return nil
	}
	l.store.dirty.Store(true)
	if n < len(l.segs) {
		err := l.deleteOldest(n)
		l.mu.Unlock()
		return err
	}
	err := l.deleteAll()
	l.mu.Unlock()
	return errors.Join(err, l.store.writeCheckpoints())
}

// deleteAll rolls a new, empty active segment at the log end offset and deletes every
// older segment. The new segment's file is made durable before the old ones are renamed
// away, so a crash at any point leaves a log whose end offset is the old one (after the
// roll the directory holds a segment named by it); the renames are synced before it
// returns, so a crash afterwards does not bring the deleted data back. mu held.
func (l *Log) deleteAll() error {
	if err := l.roll(l.leo.Load()); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	err := l.deleteOldest(len(l.segs) - 1)
	if serr := syncDir(l.dir); serr != nil {
		return errors.Join(err, serr)
	}
	if err == nil {
		l.dirDirty = false
	}
	return err
}

// truncateEpochsHead applies the log start offset to the leader epochs. The file is
// written lazily (by the flush loop, Flush or Close): open applies the checkpointed log
// start offset again, so a stale file only holds entries the next open cuts. mu held.
func (l *Log) truncateEpochsHead() {
	if l.epochs.TruncateFromStart(l.logStart.Load()) {
		l.epochsDirty = true
	}
}

// deletable counts deletable segments; a zero now checks only the log start offset.
// Called with mu held.
func (l *Log) deletable(now time.Time) int {
	var small [16]batches.SegmentSummary
	sums := small[:0]
	for i, s := range l.segs {
		next := s.next
		if i+1 < len(l.segs) {
			next = l.segs[i+1].base
		}
		sums = append(sums, batches.SegmentSummary{Size: s.size, MaxTs: s.maxTs, Next: next})
	}
	cfg := l.cfg
	if now.IsZero() {
		cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	}
	return batches.Deletable(&cfg, sums, l.logStart.Load(), now.UnixMilli())
}

// deleteOldest deletes the n oldest segments and moves the log start offset up to the
// new first segment. Called with mu held.
func (l *Log) deleteOldest(n int) error {
	if n == 0 {
		return nil
	}
	gone := l.segs[:n]
	l.segs = append(l.segs[:0:0], l.segs[n:]...)
	if b := l.segs[0].base; b > l.logStart.Load() {
		l.logStart.Store(b)
	}
	l.prod.TruncateHead(l.logStart.Load())
	l.truncateEpochsHead()
	// Snapshots below the first segment are of no use: a replay starts there anyway.
	for len(l.snaps) > 0 && l.snaps[0] < l.segs[0].base {
		l.removeSnapshot(l.snaps[0])
	}
	var errs []error
	for _, s := range gone {
		if err := s.markDeleted(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Truncate implements kernel.Log. The whole batch holding offset is removed, so the log
// end may end up below offset; if that would be below the log start offset, the log is
// emptied and restarted at the log start offset.
//
// It holds flushMu, so a Flush that started before the cut cannot move the recovery
// point past the new log end afterwards, and it writes the checkpoints before it
// returns when the recovery point went down: otherwise a crash after new (unflushed)
// appends would make the next open trust segments past the cut that were never synced.
func (l *Log) Truncate(offset int64) error {
	if err := l.dirOfflineErr(); err != nil {
		return err // a truncation repairs a corrupt batch, not a lost directory
	}
	l.flushMu.Lock()
	l.mu.Lock()
	l.truncs.Add(1)
	rp, leo := l.recoveryPoint, l.leo.Load()
	err := l.truncateLocked(offset)
	if !l.closed && l.leo.Load() < leo {
		// Roll the producer state back: newest snapshot at or below the new end plus a
		// replay; .txnindex entries past the end go.
		if _, perr := l.loadProducers(); perr != nil {
			err = errors.Join(err, fmt.Errorf("truncate %v: rebuild producer state: %w", l.tp, perr))
		}
		// The entries dropped start at or past the new log end, above the (lowered)
		// recovery point: a failed write here breaks nothing recovery relies on.
		if l.epochs.TruncateFromEnd(l.leo.Load()) {
			l.epochsChanged()
		}
		l.lowerHW(l.leo.Load())
	}
	if !l.closed && l.leo.Load() >= leo && l.epochs.TruncateFromEnd(l.leo.Load()) {
		// Nothing was cut, but an epoch entry at the log end goes, as in Kafka: a
		// former leader that assigned its epoch and appended nothing would otherwise
		// keep fetching with that epoch and be told it diverged at every fetch.
		l.epochsChanged()
	}
	l.firstDirty = min(l.firstDirty, l.leo.Load())
	lowered := l.recoveryPoint < rp
	l.mu.Unlock()
	l.flushMu.Unlock()
	if lowered {
		return errors.Join(err, l.store.writeCheckpoints())
	}
	return err
}

// truncateLocked is Truncate with flushMu and mu held.
func (l *Log) truncateLocked(offset int64) error {
	if l.closed {
		return kernel.ErrLogClosed
	}
	if err := l.cutDamage(); err != nil {
		return err
	}
	if offset >= l.leo.Load() {
		return nil
	}
	logStart := l.logStart.Load()
	if offset <= logStart || offset <= l.segs[0].base {
		return l.truncateFully(offset)
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	var errs []error
	// Newest first: a crash part way leaves a prefix of the log, never a hole.
	for j := len(l.segs) - 1; j > i; j-- {
		if err := l.segs[j].markDeleted(); err != nil {
			errs = append(errs, err)
		}
	}
	l.segs = l.segs[:i+1]
	s := l.segs[i]
	cut, found, err := l.cutPosition(s, offset)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if found {
		if s.refs.Load() > 1 {
			// A reader pins bytes past the cut: keep its file intact and go on with a copy.
			ns, err := l.copyPrefix(s, cut)
			if err != nil {
				return errors.Join(append(errs, err)...)
			}
			l.segs[i] = ns
			s = ns
		} else if err := s.log.Truncate(cut); err != nil {
			return errors.Join(append(errs, fmt.Errorf("truncate segment %d: %w", s.base, err))...)
		}
		if _, err := s.recoverSegment(l.cfg.IndexIntervalBytes, l.cfg.SegmentIndexBytes); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if s.size == 0 && len(l.segs) > 1 {
			l.segs = l.segs[:i]
			errs = append(errs, s.markDeleted())
			s = l.active()
		}
	}
	if err := s.activate(l.cfg.SegmentIndexBytes); err != nil {
		errs = append(errs, err)
	}
	l.leo.Store(s.next)
	if s.next < logStart {
		return errors.Join(append(errs, l.truncateFully(logStart))...)
	}
	l.recoveryPoint = min(l.recoveryPoint, s.next)
	return errors.Join(errs...)
}

// copyPrefix renames s away (it stays open for its readers) and returns a new segment
// with the same base holding s's first cut bytes. Called with mu held.
func (l *Log) copyPrefix(s *segment, cut int64) (*segment, error) {
	s.pin() // keep the files open while copying
	defer s.unref()
	if err := s.markDeleted(); err != nil {
		return nil, err
	}
	ns, err := openSegment(l.store.files, l.dir, s.base, true, l.cfg.SegmentIndexBytes, l.nowMs(), l.logger)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.NewOffsetWriter(ns.log, 0), io.NewSectionReader(s.log, 0, cut)); err != nil {
		ns.unref()
		return nil, fmt.Errorf("copy segment %d: %w", s.base, err)
	}
	ns.createdMs = s.createdMs
	l.markDirDirty()
	return ns, nil
}

// cutPosition finds the first batch in s whose last offset is >= offset.
func (l *Log) cutPosition(s *segment, offset int64) (int64, bool, error) {
	var hdr [recordbatch.HeaderSize]byte
	for pos := s.oidx.lookup(offset); pos < s.size; {
		h, err := s.readHeader(hdr[:], pos)
		if err != nil {
			return 0, false, err
		}
		if h.LastOffset() >= offset {
			return pos, true, nil
		}
		pos += int64(h.Size())
	}
	return 0, false, nil
}

// truncateFully deletes every segment and starts an empty one at offset. The old files
// are renamed away first, so readers pinning them never see the new segment's bytes.
// They go newest first: a crash part way through leaves a prefix of the old log (as a
// truncation would), never a log with a hole. A rename that fails stops it before
// anything is created: the log is closed (unusable until reopened) and what is left on
// disk is such a prefix. mu held.
func (l *Log) truncateFully(offset int64) error {
	for n := len(l.segs); n > 0; n-- {
		if err := l.segs[n-1].markDeleted(); err != nil {
			for _, s := range l.segs[:n-1] {
				s.unref()
			}
			l.segs = nil
			l.closed = true
			return err
		}
	}
	l.segs = nil
	s, err := openSegment(l.store.files, l.dir, offset, true, l.cfg.SegmentIndexBytes, l.nowMs(), l.logger)
	if err != nil {
		l.closed = true // no segment to append to: the log is unusable until reopened
		return err
	}
	l.segs = []*segment{s}
	l.logStart.Store(offset)
	l.leo.Store(offset)
	l.recoveryPoint = min(l.recoveryPoint, offset)
	l.markDirDirty()
	l.store.dirty.Store(true)
	return s.activate(l.cfg.SegmentIndexBytes)
}

// SetConfig implements kernel.Log. Segment and index sizes apply to new segments.
func (l *Log) SetConfig(cfg kernel.LogConfig) {
	l.mu.Lock()
	l.cfg = cfg
	l.mu.Unlock()
}

// Flush implements kernel.Log: it fsyncs every segment from the one holding the
// recovery point on, then moves the recovery point to the log end.
func (l *Log) Flush() error {
	if err := l.dirOfflineErr(); err != nil {
		return err
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return kernel.ErrLogClosed
	}
	target, rp, dirDirty, dirGen := l.leo.Load(), l.recoveryPoint, l.dirDirty, l.dirGen
	var segs []*segment
	for i, s := range l.segs {
		// Below the recovery point: synced already; taken again only to sync and
		// close index files still open (a roll sealed it after its last flush).
		// oidx.f is only written under flushMu (held) and mu.
		if i+1 < len(l.segs) && l.segs[i+1].base <= rp && s.oidx.f == nil {
			continue
		}
		s.pin()
		segs = append(segs, s)
	}
	l.mu.RUnlock()
	var err error
	for i, s := range segs {
		if err == nil {
			err = s.sync()
		}
		// All but the last were sealed (rolled) and stay so while flushMu is held.
		if err == nil && i+1 < len(segs) {
			// mu too: deletion (retention, cleaning, truncation) reads the index
			// cfiles under mu alone to rename them.
			l.mu.Lock()
			err = s.closeIndexFiles()
			l.mu.Unlock()
		}
		s.unref()
	}
	if err == nil && dirDirty {
		err = syncDir(l.dir)
	}
	if err != nil {
		return fmt.Errorf("flush %v: %w", l.tp, err)
	}
	l.mu.Lock()
	if l.epochsDirty || l.epochsUnwritten < target {
		// The file must hold every entry below the new recovery point (epochs.go).
		if err := l.writeEpochs(); err != nil {
			l.mu.Unlock()
			return fmt.Errorf("flush %v: %w", l.tp, err)
		}
	}
	if target > l.recoveryPoint {
		l.recoveryPoint = target
		l.store.rpDirty.Store(true)
	}
	l.unflushed = 0
	l.lastFlushMs = l.nowMs()
	if dirDirty && l.dirGen == dirGen {
		l.dirDirty = false
	}
	l.mu.Unlock()
	return nil
}

// maybeFlush flushes when flush.ms has passed or a rolled segment is not yet flushed.
func (l *Log) maybeFlush(nowMs int64) error {
	l.mu.RLock()
	fms := l.cfg.FlushMs
	due := !l.closed && l.recoveryPoint < l.leo.Load() &&
		((fms > 0 && fms != math.MaxInt64 && nowMs-l.lastFlushMs >= fms) || l.recoveryPoint < l.active().base)
	epochsDirty := !l.closed && l.epochsDirty
	l.mu.RUnlock()
	if due {
		return l.Flush()
	}
	if epochsDirty { // a head truncation (or a failed write) not yet in the file
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.closed && l.epochsDirty {
			return l.writeEpochs()
		}
	}
	return nil
}

// Size implements kernel.Log.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// offsets returns the recovery point and log start offset for the checkpoints.
func (l *Log) offsets() (recoveryPoint, logStart int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint, l.logStart.Load()
}

// Close implements kernel.Log: it flushes, seals the indexes and closes the files
// (files a held ReadResult points into close when it is released).
func (l *Log) Close() error {
	err := l.close(false)
	l.store.forget(l, err == nil)
	return err
}

// close flushes, seals and closes without telling the store. Idempotent. With
// deferSync (Store.Close, which syncs the whole file system after every log closed)
// it writes without fsyncs and leaves the recovery point where it was: closedDurably
// moves it once that sync succeeded, so a failed sync leaves the checkpoints vouching
// only for what an earlier fsync covered.
func (l *Log) close(deferSync bool) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	if leo := l.leo.Load(); !l.snapshotNeedless(leo) {
		if err := l.writeSnapshot(leo, !deferSync); err != nil {
			errs = append(errs, err)
		}
	}
	// A clean stop trusts the file up to the log end; entries at or past it are
	// dropped at open anyway, so an epoch assigned to an idle partition costs no write.
	if l.epochsDirty || l.epochsUnwritten < l.leo.Load() {
		errs = append(errs, l.writeEpochsSync(!deferSync))
	}
	for i, s := range l.segs {
		errs = append(errs, s.seal())
		if !deferSync && (i+1 == len(l.segs) || l.segs[i+1].base > l.recoveryPoint) {
			errs = append(errs, s.sync())
		}
	}
	if l.dirDirty && !deferSync {
		errs = append(errs, syncDir(l.dir))
	}
	err := errors.Join(errs...)
	if err == nil && !deferSync {
		l.recoveryPoint = l.leo.Load()
	}
	for _, s := range l.segs {
		s.unref()
	}
	return err
}

// closedDurably moves the recovery point of a log closed with deferSync to its end,
// once the file system sync that covers its files succeeded (Store.Close).
func (l *Log) closedDurably() {
	l.mu.Lock()
	l.recoveryPoint = l.leo.Load()
	l.mu.Unlock()
}

// closeForRemove closes without flushing; the files are about to be deleted.
func (l *Log) closeForRemove() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	for _, s := range l.segs {
		s.unref()
	}
	l.segs = nil
}

var _ kernel.Log = (*Log)(nil)
