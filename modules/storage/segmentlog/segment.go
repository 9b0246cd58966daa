package segmentlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/batches"
)

// segment is one <base>.log file with its two indexes. Its mutable fields are guarded by
// the owning Log's mu; refs is atomic.
type segment struct {
	base   int64
	dir    string
	logger *slog.Logger

	// fc is the Store's file-handle cache; log and the index files (while not nil)
	// are opened through it on demand (fdcache.go).
	fc   *fileCache
	log  *cfile
	oidx offsetIndex
	tidx timeIndex

	size            int64 // bytes of whole batches in the log file
	next            int64 // offset after the last record
	maxTs           int64 // largest batch MaxTimestamp; -1 when none
	maxTsOff        int64 // last offset of the first batch that reached maxTs
	firstTs         int64 // MaxTimestamp of the first batch; -1 when empty
	createdMs       int64
	bytesSinceIndex int64
	sealed          bool // index files trimmed
	// recent remembers the last batches appended (see recentBatches); nil once sealed
	// (a sealed segment is read from its index) and until the first append.
	recent *recentBatches
	// tail is the last bytes appended, at file position tailPos, tailRes bytes of the
	// store's tail budget reserved for it (tail.go).
	tail    []byte
	tailPos int64
	tailRes int64

	// refs counts the owning Log (1 while the segment is in the log) plus every
	// unreleased ReadResult that points into it. The files are closed, and removed if
	// deleted, when it drops to zero.
	refs    atomic.Int64
	deleted atomic.Bool

	// ver is what was checked of the bytes that were on disk at open (verify.go).
	ver verifyState
}

func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base)+suffix)
}

// openSegment opens (or, with create, creates empty) the files of the segment at base.
// The indexes are loaded but not checked; see Log.loadSegments.
func openSegment(fc *fileCache, dir string, base int64, create bool, indexBytes int64, nowMs int64, logger *slog.Logger) (*segment, error) {
	return openSegmentFiles(fc, dir, base, "", create, indexBytes, nowMs, logger)
}

// createSegmentFiles creates the empty files of a segment at base under its final
// names plus extra (the cleaner's ".cleaned"); path() names the final files, so once
// they are renamed to those the segment is like any other.
func createSegmentFiles(fc *fileCache, dir string, base int64, extra string, indexBytes int64, nowMs int64, logger *slog.Logger) (*segment, error) {
	return openSegmentFiles(fc, dir, base, extra, true, indexBytes, nowMs, logger)
}

// An existing segment takes no descriptor here: its files are opened through the
// cache when first used. A created one has its .log open (it is about to be written);
// its index files are created at their first write (see offsetIndex), so a new
// partition costs one file creation, not three, and a segment whose index stays empty
// never has an index file. The cleaner's segments (extra != "") get all three at once:
// its swap renames every file of the segment (recoverSwaps relies on it).
func openSegmentFiles(fc *fileCache, dir string, base int64, extra string, create bool, indexBytes int64, nowMs int64, logger *slog.Logger) (*segment, error) {
	s := &segment{fc: fc, base: base, dir: dir, logger: logger, maxTs: -1, firstTs: -1, next: base, createdMs: nowMs}
	s.oidx.base, s.tidx.base = base, base
	s.oidx.maxEntries = maxEntriesFor(indexBytes, offsetEntrySize)
	s.tidx.maxEntries = maxEntriesFor(indexBytes, timeEntrySize)
	if !create {
		st, err := os.Stat(s.path(logSuffix) + extra)
		if err != nil {
			return nil, fmt.Errorf("open segment %d: %w", base, err)
		}
		s.size, s.createdMs = st.Size(), st.ModTime().UnixMilli()
		s.ver.trust(s.size) // bytes on disk at open are unchecked; appends are validated
		s.log = fc.lazyFile(s.path(logSuffix)+extra, os.O_RDWR)
		s.oidx.f = fc.lazyFile(s.path(indexSuffix)+extra, os.O_RDWR|os.O_CREATE)
		s.tidx.f = fc.lazyFile(s.path(timeIndexSuffix)+extra, os.O_RDWR|os.O_CREATE)
		s.oidx.flen, s.tidx.flen = -1, -1
		s.refs.Store(1)
		return s, nil
	}
	var err error
	if s.log, err = fc.newFile(s.path(logSuffix)+extra, os.O_RDWR|os.O_CREATE|os.O_TRUNC, os.O_RDWR); err != nil {
		return nil, fmt.Errorf("open segment %d: %w", base, err)
	}
	const created = os.O_RDWR | os.O_CREATE | os.O_TRUNC
	if extra == "" {
		// O_TRUNC at the first open: a file left at this name (there should be none:
		// removed segments are renamed away, and open removes indexes without a log)
		// must not show stale entries.
		s.oidx.f = fc.newLazyFile(s.path(indexSuffix), created, os.O_RDWR|os.O_CREATE)
		s.tidx.f = fc.newLazyFile(s.path(timeIndexSuffix), created, os.O_RDWR|os.O_CREATE)
		s.refs.Store(1)
		return s, nil
	}
	if s.oidx.f, err = fc.newFile(s.path(indexSuffix)+extra, created, os.O_RDWR|os.O_CREATE); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("open offset index %d: %w", base, err)
	}
	if s.tidx.f, err = fc.newFile(s.path(timeIndexSuffix)+extra, created, os.O_RDWR|os.O_CREATE); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("open time index %d: %w", base, err)
	}
	s.refs.Store(1)
	return s, nil
}

func (s *segment) closeFiles() error {
	var errs []error
	for _, f := range []*cfile{s.log, s.oidx.f, s.tidx.f} {
		if f != nil {
			if err := f.close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// pin takes a reference for a reader. Only called while the segment is in its Log
// (under the Log's read lock), so refs >= 1.
func (s *segment) pin() { s.refs.Add(1) }

// unref drops a reference; the last one closes the files and removes them if the
// segment was deleted.
func (s *segment) unref() {
	if s.refs.Add(-1) != 0 {
		return
	}
	s.dropTail()
	if err := s.closeFiles(); err != nil {
		s.logger.Warn("close segment", "base_offset", s.base, "err", err)
	}
	if s.deleted.Load() {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if err := os.Remove(s.path(suf) + deletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.logger.Warn("remove deleted segment", "base_offset", s.base, "err", err)
			}
		}
	}
}

// markDeleted renames the files to *.deleted (open descriptors stay valid) and drops
// the Log's reference; pinned readers keep the files until they release.
func (s *segment) markDeleted() error {
	var errs []error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		var err error
		switch cf := s.file(suf); {
		case cf != nil:
			err = cf.rename(s.path(suf) + deletedSuffix) // a reopen finds the new name
		default:
			err = os.Rename(s.path(suf), s.path(suf)+deletedSuffix)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.deleted.Store(true)
	s.dropTail()
	s.unref()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete segment %d: %w", s.base, err)
	}
	return nil
}

// file returns the cfile of a segment file with that suffix, nil if none is held.
func (s *segment) file(suffix string) *cfile {
	switch suffix {
	case logSuffix:
		return s.log
	case indexSuffix:
		return s.oidx.f
	case timeIndexSuffix:
		return s.tidx.f
	}
	return nil
}

// renamedTo tells the segment's cfiles that their files were renamed to the final
// names (the cleaner's .cleaned files, renameCleaned).
func (s *segment) renamedTo() {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if cf := s.file(suf); cf != nil {
			cf.setPath(s.path(suf))
		}
	}
}

// seal writes the final time index entry and trims both index files to their entries
// (a trim to the length the file is known to have touches nothing).
func (s *segment) seal() error {
	if s.sealed {
		return nil
	}
	if s.maxTs >= 0 {
		if err := s.tidx.maybeAppend(s.maxTs, s.maxTsOff, true); err != nil {
			return err
		}
	}
	if err := s.oidx.resize(int64(s.oidx.entries())*offsetEntrySize, true); err != nil {
		return err
	}
	if err := s.tidx.resize(int64(s.tidx.entries())*timeEntrySize, true); err != nil {
		return err
	}
	s.sealed = true
	s.recent = nil
	s.dropTail()
	return nil
}

// openIndexFiles reopens the index files that closeIndexFiles closed.
func (s *segment) openIndexFiles() error {
	if s.oidx.f != nil {
		return nil
	}
	// Opened through the cache at their first write; clean, as closeIndexFiles
	// closed them on stable storage.
	const flag = os.O_RDWR | os.O_CREATE
	s.oidx.f = s.fc.newLazyFile(s.path(indexSuffix), flag, flag)
	s.tidx.f = s.fc.newLazyFile(s.path(timeIndexSuffix), flag, flag)
	return nil
}

// closeIndexFiles closes the index files of a sealed segment whose indexes are on
// stable storage: lookups use the in-memory copy, so a sealed segment needs only its
// .log descriptor (as Kafka, one descriptor per segment). Truncate reopens them
// (activate, recoverSegment). Called with the Log's flushMu and mu held and the segment
// not active, so nothing else uses the descriptors meanwhile (markDeleted reads the
// fields under mu alone).
func (s *segment) closeIndexFiles() error {
	if s.oidx.f == nil {
		return nil
	}
	err := errors.Join(s.oidx.f.close(), s.tidx.f.close())
	s.oidx.f, s.tidx.f = nil, nil
	if err != nil {
		return fmt.Errorf("close indexes of segment %d: %w", s.base, err)
	}
	return nil
}

// activate makes the segment the one appended to: its indexes take entries up to
// segment.index.bytes. Nothing is preallocated (see offsetIndex), so this touches no
// file.
func (s *segment) activate(indexBytes int64) error {
	if err := s.openIndexFiles(); err != nil {
		return err
	}
	s.oidx.maxEntries = max(maxEntriesFor(indexBytes, offsetEntrySize), s.oidx.entries())
	s.tidx.maxEntries = max(maxEntriesFor(indexBytes, timeEntrySize), s.tidx.entries()+1)
	s.sealed = false
	return nil
}

// sync fsyncs the segment's open files (closed index files were synced before closing).
func (s *segment) sync() error {
	for _, f := range []*cfile{s.log, s.oidx.f, s.tidx.f} {
		if f == nil {
			continue
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", f.Name(), err)
		}
	}
	return nil
}

// markSynced records that the segment's files hold nothing unsynced (openLog, once
// each file is on stable storage: trusted from a clean stop or below the recovery
// point, or recovered and synced), so that a close of a segment that was not written
// fsyncs nothing. A cfile otherwise starts dirty, not knowing what an earlier run left.
func (s *segment) markSynced() {
	for _, f := range []*cfile{s.log, s.oidx.f, s.tidx.f} {
		if f != nil {
			f.markClean()
		}
	}
}

// segState is what an append changes, kept to undo a failed one.
type segState struct {
	size, next, maxTs, maxTsOff, firstTs, bytesSinceIndex int64
	oidx, tidx                                            int
}

func (s *segment) state() segState {
	return segState{s.size, s.next, s.maxTs, s.maxTsOff, s.firstTs, s.bytesSinceIndex, s.oidx.entries(), s.tidx.entries()}
}

func (s *segment) restore(st segState) {
	s.forgetRecent()
	s.size, s.next, s.maxTs, s.maxTsOff, s.firstTs, s.bytesSinceIndex = st.size, st.next, st.maxTs, st.maxTsOff, st.firstTs, st.bytesSinceIndex
	s.oidx.cut(st.oidx)
	s.tidx.cut(st.tidx)
}

// indexBatch updates the in-memory summary and the indexes for a batch written at pos.
// This is Kafka's rule: an offset index entry (and a time index entry if the max
// timestamp grew) once more than index.interval.bytes were written since the last one.
func (s *segment) indexBatch(h *recordbatch.Header, pos int64, interval int64) error {
	if s.firstTs < 0 {
		s.firstTs = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsOff = h.MaxTimestamp, h.LastOffset()
	}
	if s.bytesSinceIndex > interval {
		if err := s.oidx.append(h.LastOffset(), pos); err != nil {
			return err
		}
		if err := s.tidx.maybeAppend(s.maxTs, s.maxTsOff, false); err != nil {
			return err
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(h.Size())
	s.next = h.LastOffset() + 1
	if !s.sealed {
		if s.recent == nil {
			s.recent = new(recentBatches)
		}
		s.recent.add(recentBatch{base: h.BaseOffset, last: h.LastOffset(), pos: pos, size: int64(h.Size())})
	}
	return nil
}

// forgetRecent empties the recent batches (see recentBatches' invariants) and drops
// the tail: both describe bytes at the end of the file, which is being cut.
func (s *segment) forgetRecent() {
	if s.recent != nil {
		s.recent.reset()
	}
	s.dropTail()
}

// append writes records (whole, already offset-assigned batches) at the end of the
// segment and indexes them. On failure the segment is as before.
func (s *segment) append(records []byte, interval int64) error {
	st := s.state()
	if _, err := s.log.WriteAt(records, s.size); err != nil {
		return s.undo(st, fmt.Errorf("write segment %d: %w", s.base, err))
	}
	pos := s.size
	for b := records; len(b) > 0; {
		h, _ := recordbatch.ParseHeader(b) // validated by the caller
		if err := s.indexBatch(&h, pos, interval); err != nil {
			return s.undo(st, err)
		}
		pos += int64(h.Size())
		b = b[h.Size():]
	}
	s.keepTail(records, st.size)
	s.size = pos
	return nil
}

func (s *segment) undo(st segState, err error) error {
	s.restore(st)
	if terr := s.log.Truncate(st.size); terr != nil {
		return fmt.Errorf("%w (and truncating back failed: %v)", err, terr)
	}
	return err
}

// readPrefix reads the 12-byte base offset + length prefix of the batch at pos.
func (s *segment) readPrefix(buf []byte, pos int64) (base int64, size int64, err error) {
	if s.recent != nil {
		if e, ok := s.recent.at(pos); ok {
			return e.base, e.size, nil
		}
	}
	if pos+recordbatch.LogOverhead > s.size {
		return 0, 0, fmt.Errorf("%w: batch prefix at %d past segment end %d", kernel.ErrCorrupt, pos, s.size)
	}
	if _, err := s.log.ReadAt(buf[:recordbatch.LogOverhead], pos); err != nil {
		return 0, 0, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
	}
	base = int64(binary.BigEndian.Uint64(buf[recordbatch.OffBaseOffset:]))
	size = int64(int32(binary.BigEndian.Uint32(buf[recordbatch.OffBatchLength:]))) + recordbatch.LogOverhead
	if size < recordbatch.HeaderSize || pos+size > s.size {
		return 0, 0, fmt.Errorf("%w: batch at %d of segment %d has length %d", kernel.ErrCorrupt, pos, s.base, size)
	}
	return base, size, nil
}

// readLastOffset reads the LastOffsetDelta of the batch at pos (4 bytes).
func (s *segment) readLastOffset(buf []byte, pos, base int64) (int64, error) {
	if s.recent != nil {
		if e, ok := s.recent.at(pos); ok {
			return e.last, nil
		}
	}
	if _, err := s.log.ReadAt(buf[:4], pos+recordbatch.OffLastOffsetDelta); err != nil {
		return 0, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
	}
	return base + int64(int32(binary.BigEndian.Uint32(buf[:4]))), nil
}

// readHeader reads and parses the full batch header at pos.
func (s *segment) readHeader(buf []byte, pos int64) (recordbatch.Header, error) {
	if pos+recordbatch.HeaderSize > s.size {
		return recordbatch.Header{}, fmt.Errorf("%w: batch header at %d past segment end %d", kernel.ErrCorrupt, pos, s.size)
	}
	if _, err := s.log.ReadAt(buf[:recordbatch.HeaderSize], pos); err != nil {
		return recordbatch.Header{}, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
	}
	h, err := recordbatch.ParseHeader(buf[:recordbatch.HeaderSize])
	if err != nil {
		return h, batches.Corrupt(err)
	}
	if pos+int64(h.Size()) > s.size {
		return h, fmt.Errorf("%w: batch at %d of segment %d runs past the end", kernel.ErrCorrupt, pos, s.base)
	}
	return h, nil
}

// scanStart is where a forward scan for offset over batch prefixes starts: the offset
// index's entry, or a later batch boundary whose base is <= offset that the recent
// batches know of.
func (s *segment) scanStart(offset int64) int64 {
	pos := s.oidx.lookup(offset)
	if s.recent != nil {
		if p, ok := s.recent.startFor(offset); ok && p > pos {
			pos = p
		}
	}
	return pos
}

// startOf returns the position of the batch holding offset (the last batch whose base
// is <= offset), or of the first batch after it. Only the 12-byte prefixes are read.
func (s *segment) startOf(buf []byte, offset int64) (int64, error) {
	pos := s.scanStart(offset)
	start := int64(-1)
	for pos < s.size {
		base, size, err := s.readPrefix(buf, pos)
		if err != nil {
			return 0, err
		}
		if base > offset {
			break
		}
		start = pos
		pos += size
	}
	if start < 0 {
		return pos, nil
	}
	return start, nil
}

// scan collects whole batches from the one holding offset: none with a base offset >=
// maxOffset, at most budget bytes unless minOne lets the first batch through. full
// reports that a bound (not the end of the segment) stopped it; end is the offset after
// the last batch collected (the next batch's base, or the segment's next offset). It
// is one forward pass
// over 12-byte prefixes from the index entry: the prefix that shows the previous batch
// holds offset is also the first prefix of the collection, and stretches between index
// entries that fit both bounds are taken whole without reading their prefixes.
func (s *segment) scan(buf []byte, offset, maxOffset, budget int64, minOne bool) (start, n, end int64, full bool, err error) {
	if offset >= s.next || s.size == 0 {
		return 0, 0, 0, false, nil
	}
	pos := s.scanStart(offset)
	start = -1
	var startBase, startSize int64
	for pos < s.size {
		base, size, err := s.readPrefix(buf, pos)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if base > offset {
			if start >= 0 && startBase < offset {
				// offset may sit in a gap after the candidate (a follower's log can have
				// gaps): read its last offset delta, and start here if it ends below.
				last, err := s.readLastOffset(buf, start, startBase)
				if err != nil {
					return 0, 0, 0, false, err
				}
				if last < offset {
					start = -1
				}
			}
			if start < 0 { // offset is below this batch
				start, startBase, startSize = pos, base, size
			}
			break
		}
		start, startBase, startSize = pos, base, size
		pos += size
	}
	// add takes the batch (base, size) into the range; false means a bound stopped it.
	add := func(base, size int64) bool {
		if base >= maxOffset || (n+size > budget && !(n == 0 && minOne)) {
			return false
		}
		n += size
		return true
	}
	if !add(startBase, startSize) {
		return start, 0, 0, true, nil
	}
	limit := s.size // furthest end of the range; budget may be near MaxInt64
	if budget < s.size-start {
		limit = start + budget
	}
	for p := start + startSize; p < s.size; {
		if q := s.oidx.jump(p, limit, maxOffset); q > p {
			n, p = q-start, q
			continue
		}
		base, size, err := s.readPrefix(buf, p)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if !add(base, size) {
			return start, n, base, true, nil
		}
		p += size
	}
	return start, n, s.next, false, nil
}

// errRecover marks a batch that ends recovery of a segment (torn or corrupt).
var errRecover = errors.New("segment needs recovery")

// recoverSegment validates every batch of the segment (header, length, CRC, offsets
// strictly increasing and >= the base), truncates the file at the first bad one and
// rebuilds both indexes. It returns truncated=true when bytes were cut. An I/O error
// fails it.
func (s *segment) recoverSegment(interval int64, indexBytes int64) (truncated bool, err error) {
	s.forgetRecent()
	s.oidx.cut(0)
	s.tidx.cut(0)
	if err := s.openIndexFiles(); err != nil {
		return false, err
	}
	if err := s.oidx.resize(0, false); err != nil {
		return false, err
	}
	if err := s.tidx.resize(0, false); err != nil {
		return false, err
	}
	if err := s.activate(indexBytes); err != nil {
		return false, err
	}
	s.maxTs, s.maxTsOff, s.firstTs, s.bytesSinceIndex, s.next = -1, 0, -1, 0, s.base
	st, err := s.log.Stat()
	if err != nil {
		return false, fmt.Errorf("stat segment %d: %w", s.base, err)
	}
	fileSize := st.Size()
	s.size = fileSize
	var buf []byte
	var hdr [recordbatch.HeaderSize]byte
	pos := int64(0)
	for pos < fileSize {
		h, err := s.readHeader(hdr[:], pos)
		if err == nil && (h.BaseOffset < s.next || h.LastOffsetDelta < 0 || h.LastOffset() < h.BaseOffset || h.LastOffset()-s.base > math.MaxUint32) {
			err = fmt.Errorf("%w: batch at %d has offsets %d..%d after %d", kernel.ErrCorrupt, pos, h.BaseOffset, h.LastOffset(), s.next-1)
		}
		if err == nil {
			n := h.Size()
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if _, rerr := s.log.ReadAt(buf, pos); rerr != nil && !errors.Is(rerr, io.EOF) {
				return false, fmt.Errorf("read segment %d at %d: %w", s.base, pos, rerr)
			}
			if cerr := recordbatch.CheckCRC(buf); cerr != nil {
				err = batches.Corrupt(cerr)
			}
		}
		if err != nil {
			if !errors.Is(err, kernel.ErrCorrupt) {
				return false, err
			}
			s.logger.Warn("truncating torn or corrupt segment tail", "segment", s.path(logSuffix), "position", pos, "dropped_bytes", fileSize-pos, "err", err)
			break
		}
		if err := s.indexBatch(&h, pos, interval); err != nil {
			return false, err
		}
		pos += int64(h.Size())
	}
	s.size = pos
	s.ver.trust(0) // every batch kept was checked above
	if pos < fileSize {
		if err := s.log.Truncate(pos); err != nil {
			return false, fmt.Errorf("truncate segment %d: %w", s.base, err)
		}
		return true, nil
	}
	return false, nil
}

// load reads the index files of a segment that was closed cleanly and checks them
// against the log: entries in order, inside the file, the last offset entry pointing at
// a batch that holds its offset. It then scans the batch headers after the last entries
// to find the segment's next offset and max timestamp. Any disagreement returns an
// error wrapping errRecover; an I/O failure returns it as is.
func (s *segment) load() error {
	var hdr [recordbatch.HeaderSize]byte
	ob, err := readIndexFile(s.path(indexSuffix))
	if err != nil {
		return fmt.Errorf("read offset index %d: %w", s.base, err)
	}
	tb, err := readIndexFile(s.path(timeIndexSuffix))
	if err != nil {
		return fmt.Errorf("read time index %d: %w", s.base, err)
	}
	rel, pos, clean := parseOffsetIndex(ob)
	if !clean || (len(rel) > 0 && int64(pos[len(pos)-1]) >= s.size) {
		return fmt.Errorf("%w: offset index of %d disagrees with the log", errRecover, s.base)
	}
	ts, trel, tclean := parseTimeIndex(tb)
	if !tclean {
		return fmt.Errorf("%w: time index of %d is damaged", errRecover, s.base)
	}
	s.oidx.rel, s.oidx.pos = rel, pos
	s.tidx.ts, s.tidx.rel = ts, trel
	s.oidx.flen, s.tidx.flen = int64(len(ob)), int64(len(tb))
	s.sealed = len(ob) == len(rel)*offsetEntrySize && len(tb) == len(ts)*timeEntrySize
	if len(ts) > 0 {
		s.maxTs, s.maxTsOff = ts[len(ts)-1], s.base+int64(trel[len(trel)-1])
	}
	// Scan from the earlier of the last entries to the end.
	from := s.oidx.lastPos()
	if len(ts) > 0 {
		from = min(from, s.oidx.lookup(s.maxTsOff))
	}
	if len(rel) > 0 {
		h, err := s.readHeader(hdr[:], s.oidx.lastPos())
		if err != nil {
			return s.recoverable(err)
		}
		if h.LastOffset() != s.base+int64(rel[len(rel)-1]) {
			return fmt.Errorf("%w: offset index entry %d points at batch %d..%d", errRecover, s.base+int64(rel[len(rel)-1]), h.BaseOffset, h.LastOffset())
		}
	}
	if s.size > 0 {
		h, err := s.readHeader(hdr[:], 0)
		if err != nil {
			return s.recoverable(err)
		}
		s.firstTs = h.MaxTimestamp
		if h.BaseOffset < s.base {
			return fmt.Errorf("%w: first batch %d below segment base", errRecover, h.BaseOffset)
		}
	}
	s.next = s.base
	if from > 0 {
		h, err := s.readHeader(hdr[:], from)
		if err != nil {
			return s.recoverable(err)
		}
		s.next = h.BaseOffset
	}
	for p := from; p < s.size; {
		h, err := s.readHeader(hdr[:], p)
		if err != nil {
			return s.recoverable(err)
		}
		if h.BaseOffset < s.next || h.LastOffsetDelta < 0 || h.LastOffset() < h.BaseOffset {
			return fmt.Errorf("%w: offsets go back at %d", errRecover, p)
		}
		if h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOff = h.MaxTimestamp, h.LastOffset()
		}
		s.next = h.LastOffset() + 1
		p += int64(h.Size())
	}
	if n := len(trel); n > 0 && s.base+int64(trel[n-1]) >= s.next {
		return fmt.Errorf("%w: time index points past the log", errRecover)
	}
	s.bytesSinceIndex = s.size - s.oidx.lastPos()
	return nil
}

// readIndexFile reads an index file; a missing one reads empty (it is created at its
// first write, see offsetIndex).
func readIndexFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func (s *segment) recoverable(err error) error {
	if errors.Is(err, kernel.ErrCorrupt) {
		return fmt.Errorf("%w: %w", errRecover, err)
	}
	return err
}
