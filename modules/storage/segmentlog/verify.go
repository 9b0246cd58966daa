package segmentlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// Verification of stored batches (see doc.go, "Verification"): every batch a read
// returns has had its framing and CRC checked once since the segment was opened.
// Bytes appended by this process were validated on produce, and bytes recovery scanned
// were checked then; what is left is the part of a segment that was on disk at open
// and was trusted by a clean-shutdown load. Each segment remembers which of those
// bytes were checked since (verifyState); a read reaching unchecked bytes checks them
// before it answers, outside the Log's lock (the segment is pinned, its bytes cannot
// change). A batch that fails takes the whole Log offline (Log.offline).

// castagnoli is the CRC-32C table of record batches.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// verifyBuf is the size of the reads that stream a batch through its CRC; a batch is
// never read whole, so verification needs no memory proportional to batch sizes.
const verifyBuf = 64 << 10

// verifyState is what a segment knows about the checks of its bytes. Positions at or
// above trusted were written (or checked by recovery) in this process; below it,
// spans lists the ranges checked since open, sorted, disjoint and never adjacent
// (merged); prefix mirrors the end of a span starting at 0, for the lock-free fast
// path. trusted only moves down (a truncation cuts below it; recovery sets 0).
type verifyState struct {
	trusted atomic.Int64
	prefix  atomic.Int64
	mu      sync.Mutex // serializes the checks of one segment; guards spans
	spans   []span
}

type span struct{ start, end int64 }

// trust sets the position from which the segment's bytes are known good: its size at
// open (a load: nothing checked yet), 0 after a recovery scan or for a new file.
func (v *verifyState) trust(from int64) {
	v.mu.Lock()
	v.trusted.Store(from)
	v.spans = v.spans[:0]
	v.prefix.Store(0)
	v.mu.Unlock()
}

// checked reports whether [pos, end) needs no check: above trusted, inside the
// verified prefix, or the whole segment checked. Two atomic loads.
func (v *verifyState) checked(pos, end int64) bool {
	t := v.trusted.Load()
	p := v.prefix.Load()
	return pos >= t || end <= p || p >= t
}

// add records [start, end) as checked. mu held.
func (v *verifyState) add(start, end int64) {
	if start >= end {
		return
	}
	i := sort.Search(len(v.spans), func(i int) bool { return v.spans[i].end >= start })
	j := i
	for j < len(v.spans) && v.spans[j].start <= end {
		start, end = min(start, v.spans[j].start), max(end, v.spans[j].end)
		j++
	}
	v.spans = append(v.spans[:i], append([]span{{start, end}}, v.spans[j:]...)...)
	if v.spans[0].start == 0 {
		v.prefix.Store(v.spans[0].end)
	}
}

// gaps calls fn for each unchecked stretch of [pos, end), in order. mu held.
func (v *verifyState) gaps(pos, end int64, fn func(a, b int64) error) error {
	for _, sp := range v.spans {
		if sp.end <= pos {
			continue
		}
		if sp.start >= end {
			break
		}
		if sp.start > pos {
			if err := fn(pos, sp.start); err != nil {
				return err
			}
		}
		pos = sp.end
	}
	if pos < end {
		return fn(pos, end)
	}
	return nil
}

// Damage is a batch that failed verification: where it is and why.
type Damage struct {
	Path     string // the segment file
	Position int64  // byte position of the batch in it
	Offset   int64  // base offset its header claims (-1 when the header is unreadable)
	Err      error  // wraps kernel.ErrCorrupt
}

func (d *Damage) Error() string {
	return fmt.Sprintf("%s: batch at position %d (offset %d): %v", d.Path, d.Position, d.Offset, d.Err)
}

func (d *Damage) Unwrap() error { return d.Err }

// damage is a Log's offline state: the segment and position of the first bad batch it
// found.
type damage struct {
	seg *segment
	Damage
}

// verify checks the batches of s in [pos, pos+n) not checked yet, reading through f
// (the file a ReadResult chunk names). pos and pos+n are batch boundaries.
func (s *segment) verify(f io.ReaderAt, pos, n int64) error {
	end := pos + n
	if s.ver.checked(pos, end) {
		return nil
	}
	s.ver.mu.Lock()
	defer s.ver.mu.Unlock()
	end = min(end, s.ver.trusted.Load())
	var buf []byte
	return s.ver.gaps(pos, end, func(a, b int64) error {
		if int64(len(buf)) < min(b-a, verifyBuf) {
			// No bigger than the gap: after a restart every partition's first
			// fetch checks a few hundred bytes, and a fetch over 8,000 partitions
			// allocating 64 KiB for each took the broker past 1.5 GiB.
			buf = make([]byte, min(b-a, verifyBuf))
		}
		at, _, err := VerifyBatches(f, a, b, -1, buf)
		if err != nil {
			return &Damage{Path: s.path(logSuffix), Position: at, Offset: claimedOffset(f, at), Err: err}
		}
		s.ver.add(a, b)
		return nil
	})
}

// claimedOffset reads the base offset the batch header at pos claims, or -1.
func claimedOffset(f io.ReaderAt, pos int64) int64 {
	var b [8]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return -1
	}
	return int64(binary.BigEndian.Uint64(b[:]))
}

// VerifyBatches checks the record batches of r in [from, to), which must start at a
// batch boundary: each header (magic 2, a length that fits the range), offsets
// strictly increasing (the first base offset > after; -1 for no bound) and the
// CRC-32C, streamed through buf (any size > 0). It returns the position it reached
// and the last offset of the last good batch (after when none). A bad batch returns
// its position and an error wrapping kernel.ErrCorrupt; a failed read returns the
// read's error (not corruption: the caller must not cut the log for it).
func VerifyBatches(r io.ReaderAt, from, to, after int64, buf []byte) (pos, last int64, err error) {
	return walkBatches(r, from, to, after, buf, nil)
}

// walkBatches is VerifyBatches calling fn (when not nil) with each good batch; an
// error from fn (wrapping kernel.ErrCorrupt) makes that batch the bad one.
func walkBatches(r io.ReaderAt, from, to, after int64, buf []byte, fn func(pos int64, h *recordbatch.Header) error) (pos, last int64, err error) {
	var hdr [recordbatch.HeaderSize]byte
	pos, last = from, after
	for pos < to {
		if to-pos < recordbatch.HeaderSize {
			return pos, last, fmt.Errorf("%w: %d bytes left, less than a batch header", kernel.ErrCorrupt, to-pos)
		}
		if _, err := r.ReadAt(hdr[:], pos); err != nil {
			return pos, last, readErr(err)
		}
		h, err := recordbatch.ParseHeader(hdr[:])
		if err != nil {
			return pos, last, fmt.Errorf("%w: %w", kernel.ErrCorrupt, err)
		}
		size := int64(h.Size())
		switch {
		case size > to-pos:
			return pos, last, fmt.Errorf("%w: batch length %d runs past the end (%d bytes left)", kernel.ErrCorrupt, h.BatchLength, to-pos)
		case h.LastOffsetDelta < 0 || h.BaseOffset < 0 || h.LastOffset() < h.BaseOffset:
			return pos, last, fmt.Errorf("%w: offsets %d..%d", kernel.ErrCorrupt, h.BaseOffset, h.LastOffset())
		case h.BaseOffset <= last:
			return pos, last, fmt.Errorf("%w: base offset %d after %d", kernel.ErrCorrupt, h.BaseOffset, last)
		}
		crc := crc32.Update(0, castagnoli, hdr[recordbatch.OffAttributes:])
		for p, e := pos+recordbatch.HeaderSize, pos+size; p < e; {
			k := min(int64(len(buf)), e-p)
			if _, err := r.ReadAt(buf[:k], p); err != nil {
				return pos, last, readErr(err)
			}
			crc = crc32.Update(crc, castagnoli, buf[:k])
			p += k
		}
		if crc != h.CRC {
			return pos, last, fmt.Errorf("%w: %w (stored %08x, computed %08x)", kernel.ErrCorrupt, recordbatch.ErrCRC, h.CRC, crc)
		}
		if fn != nil {
			if err := fn(pos, &h); err != nil {
				return pos, last, err
			}
		}
		last = h.LastOffset()
		pos += size
	}
	return pos, last, nil
}

// readErr marks a short read (the file is shorter than the caller thought) as
// corruption; any other read error is an I/O failure.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: file ends inside a batch", kernel.ErrCorrupt)
	}
	return err
}

// seg returns the segment of the i-th file chunk of a ReadResult built by Log.Read (one
// pin per file chunk, in chunk order; tail chunks pin nothing).
func (h *readHandle) seg(i int) *segment {
	if i < len(h.pinned) {
		return h.pinned[i]
	}
	return h.more[i-len(h.pinned)]
}

// verifyRead checks the chunks of rr (built by Read with handle h) before they are
// answered; corruption takes the log offline. Called without mu: the chunks' segments
// are pinned.
func (l *Log) verifyRead(h *readHandle, rr kernel.ReadResult) error {
	pin := 0
	for _, c := range rr.Chunks {
		if c.File == nil {
			continue // tail bytes: appended, so validated (tail.go)
		}
		s := h.seg(pin)
		pin++
		err := s.verify(c.File, c.Off, c.N)
		if err == nil {
			continue
		}
		var d *Damage
		if errors.As(err, &d) && errors.Is(err, kernel.ErrCorrupt) {
			return l.goOffline(s, *d)
		}
		return fmt.Errorf("read %v: verify: %w", l.tp, err)
	}
	return nil
}

// scanDamage is Read's path for a corrupt batch prefix found while it looked for the
// range (scan): it finds the bad batch in s from pos, for the offline state. mu held
// (shared).
func (l *Log) scanDamage(s *segment, offset int64, scanErr error) error {
	from := s.scanStart(offset)
	at, _, err := VerifyBatches(s.log, from, s.size, -1, make([]byte, verifyBuf))
	if err == nil || !errors.Is(err, kernel.ErrCorrupt) {
		// Not found from there (or an I/O error): report the scan's error as it was.
		return fmt.Errorf("read %v at %d: %w", l.tp, offset, scanErr)
	}
	return l.goOffline(s, Damage{Path: s.path(logSuffix), Position: at, Offset: claimedOffset(s.log, at), Err: err})
}

// goOffline records the first damage found in the log and logs it (once: a log goes
// offline once until repaired, so this line cannot flood). Later requests get
// offlineErr.
func (l *Log) goOffline(s *segment, d Damage) error {
	if l.offline.CompareAndSwap(nil, &damage{seg: s, Damage: d}) {
		l.logger.Error("corrupt batch: partition log offline until truncated below it", "segment", d.Path, "position", d.Position, "offset", d.Offset, "err", d.Err)
	}
	return l.offlineErr()
}

// offlineErr returns an error wrapping kernel.ErrLogOffline while the log is offline.
// Damage in a segment that left the log since (retention, DeleteRecords, Reset, a
// truncation that copied the segment) no longer counts.
func (l *Log) offlineErr() error {
	if err := l.dirOfflineErr(); err != nil {
		return err
	}
	d := l.offline.Load()
	if d == nil {
		return nil
	}
	if d.seg.deleted.Load() {
		l.offline.CompareAndSwap(d, nil)
		return nil
	}
	return fmt.Errorf("%v: %w: %w", l.tp, kernel.ErrLogOffline, &d.Damage)
}

// cutDamage is Truncate's first step on an offline log: the segment holding the damage
// is cut at the bad batch (copied when a reader pins it), every later segment is
// deleted, and what is left of the segment is recovered (its CRCs checked, so damage
// further down cuts it further). The log is online again after it. flushMu and mu
// held.
func (l *Log) cutDamage() error {
	d := l.offline.Load()
	if d == nil || d.seg.deleted.Load() {
		l.offline.Store(nil)
		return nil
	}
	i := -1
	for j, s := range l.segs {
		if s == d.seg {
			i = j
		}
	}
	if i < 0 {
		l.offline.Store(nil)
		return nil
	}
	var errs []error
	for j := len(l.segs) - 1; j > i; j-- {
		if err := l.segs[j].markDeleted(); err != nil {
			errs = append(errs, err)
		}
	}
	l.segs = l.segs[:i+1]
	s := d.seg
	if s.refs.Load() > 1 {
		ns, err := l.copyPrefix(s, d.Position)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		l.segs[i], s = ns, ns
	} else if err := s.log.Truncate(d.Position); err != nil {
		return errors.Join(append(errs, fmt.Errorf("truncate segment %d: %w", s.base, err))...)
	}
	if _, err := s.recoverSegment(l.cfg.IndexIntervalBytes, l.cfg.SegmentIndexBytes); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if s.size == 0 && len(l.segs) > 1 {
		l.segs = l.segs[:i]
		errs = append(errs, s.markDeleted())
	}
	l.offline.Store(nil)
	act := l.active()
	if err := act.activate(l.cfg.SegmentIndexBytes); err != nil {
		errs = append(errs, err)
	}
	l.leo.Store(act.next)
	l.recoveryPoint = min(l.recoveryPoint, act.next)
	l.logger.Warn("log cut at the corrupt batch; online again", "segment", d.Path, "position", d.Position, "log_end_offset", act.next)
	if act.next < l.logStart.Load() {
		errs = append(errs, l.truncateFully(l.logStart.Load()))
	}
	return errors.Join(errs...)
}
