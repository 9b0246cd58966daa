package segmentlog

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// offsetIndex is a segment's sparse offset index: an in-memory copy of the entries, and
// the file they are written through to with WriteAt (one entry per pwrite).
//
// Index files are not preallocated: nothing maps them, so a pwrite past the end grows
// the file as well as a sparse preallocation would, and an idle partition's open and
// close need neither file. The file of a new segment is created at its first write
// (or resize), so an index that never got an entry may be absent, which reads as
// empty. What a file may hold: the entries, then possibly a zero tail (a preallocated
// file of an older version, or an unclean stop) or stale entries past the in-memory
// ones (an append undone); seal trims the file to the entries.
type offsetIndex struct {
	indexFile
	base       int64
	rel        []uint32 // relative last offset of the indexed batch
	pos        []uint32 // file position of that batch
	maxEntries int
	buf        [offsetEntrySize]byte
}

// timeIndex is a segment's time index; see offsetIndex.
type timeIndex struct {
	indexFile
	base       int64
	ts         []int64  // max timestamp so far (strictly increasing)
	rel        []uint32 // relative offset of the batch that first reached it
	maxEntries int
	buf        [timeEntrySize]byte
}

func (x *offsetIndex) entries() int { return len(x.rel) }

// full reports that no further entry fits.
func (x *offsetIndex) full() bool { return len(x.rel) >= x.maxEntries }

func (x *offsetIndex) append(lastOffset int64, pos int64) error {
	if x.full() {
		return nil // an index sparser than asked is still correct
	}
	rel := uint32(lastOffset - x.base)
	if n := len(x.rel); pos == 0 || n > 0 && (rel <= x.rel[n-1] || uint32(pos) <= x.pos[n-1]) {
		return nil
	}
	binary.BigEndian.PutUint32(x.buf[0:], rel)
	binary.BigEndian.PutUint32(x.buf[4:], uint32(pos))
	if err := x.write(x.buf[:], int64(len(x.rel))*offsetEntrySize); err != nil {
		return fmt.Errorf("write offset index: %w", err)
	}
	x.rel = append(x.rel, rel)
	x.pos = append(x.pos, uint32(pos))
	return nil
}

// lookup returns the position of the last indexed batch whose last offset is <= off,
// or 0: a batch holding off starts there or later.
func (x *offsetIndex) lookup(off int64) int64 {
	if off < x.base {
		return 0
	}
	r := off - x.base
	i := sort.Search(len(x.rel), func(i int) bool { return int64(x.rel[i]) > r })
	if i == 0 {
		return 0
	}
	return int64(x.pos[i-1])
}

// jump returns the position of the furthest indexed batch after p that can end a
// read range: its position is <= limit, and its last offset is <= maxOffset, so every
// batch before it has a base offset < maxOffset. Positions of index entries are batch
// boundaries, so [p, jump) is whole batches. It returns p when there is none.
func (x *offsetIndex) jump(p, limit, maxOffset int64) int64 {
	i := sort.Search(len(x.pos), func(i int) bool {
		return int64(x.pos[i]) > limit || x.base+int64(x.rel[i]) > maxOffset
	})
	if i == 0 || int64(x.pos[i-1]) <= p {
		return p
	}
	return int64(x.pos[i-1])
}

// cut drops entries from index n on (in memory; the file is rewritten by resize/trim).
func (x *offsetIndex) cut(n int) {
	x.rel, x.pos = x.rel[:n], x.pos[:n]
}

// lastPos is the position of the last entry, or 0.
func (x *offsetIndex) lastPos() int64 {
	if len(x.pos) == 0 {
		return 0
	}
	return int64(x.pos[len(x.pos)-1])
}

func (x *timeIndex) entries() int { return len(x.ts) }

// full keeps one slot free for the entry written when the segment is sealed.
func (x *timeIndex) full() bool { return len(x.ts) >= x.maxEntries-1 }

// maybeAppend adds (ts, offset) if ts is larger than the last entry's. force ignores full.
func (x *timeIndex) maybeAppend(ts, offset int64, force bool) error {
	if (!force && x.full()) || len(x.ts) >= x.maxEntries {
		return nil
	}
	if n := len(x.ts); n > 0 && (ts <= x.ts[n-1] || uint32(offset-x.base) < x.rel[n-1]) {
		return nil
	}
	if ts < 0 || (ts == 0 && offset == x.base) {
		return nil // an all-zero entry reads as the end of the file
	}
	binary.BigEndian.PutUint64(x.buf[0:], uint64(ts))
	binary.BigEndian.PutUint32(x.buf[8:], uint32(offset-x.base))
	if err := x.write(x.buf[:], int64(len(x.ts))*timeEntrySize); err != nil {
		return fmt.Errorf("write time index: %w", err)
	}
	x.ts = append(x.ts, ts)
	x.rel = append(x.rel, uint32(offset-x.base))
	return nil
}

// lookupBelow returns the offset of the last entry whose timestamp is < ts: every batch
// up to and including that offset has a max timestamp < ts. ok is false if none.
func (x *timeIndex) lookupBelow(ts int64) (int64, bool) {
	i := sort.Search(len(x.ts), func(i int) bool { return x.ts[i] >= ts })
	if i == 0 {
		return 0, false
	}
	return x.base + int64(x.rel[i-1]), true
}

func (x *timeIndex) cut(n int) {
	x.ts, x.rel = x.ts[:n], x.rel[:n]
}

// indexFile is an index's file and its length as far as this process knows it.
type indexFile struct {
	f *cfile // nil once sealed and on stable storage (closeIndexFiles)
	// flen is the file's length, or -1 when unknown (an existing segment's index not
	// read yet). A resize to the known length is skipped without touching the file.
	flen int64
}

// write is WriteAt of one entry at off.
func (x *indexFile) write(b []byte, off int64) error {
	if _, err := x.f.WriteAt(b, off); err != nil {
		x.flen = -1 // a short write may have grown it
		return err
	}
	if x.flen >= 0 {
		x.flen = max(x.flen, off+int64(len(b)))
	}
	return nil
}

// resize sets the file's length to size (a cut of entries, or of the tail past them).
// keepClean is for a resize that only grows or cuts a zero tail past the entries (the
// trim at seal): it leaves the file clean if it was, because a lost resize changes
// nothing a reader sees (parseOffsetIndex and parseTimeIndex stop at the zero tail),
// so a close of an idle segment fsyncs nothing.
func (x *indexFile) resize(size int64, keepClean bool) error {
	if x.flen == size {
		return nil
	}
	var err error
	if keepClean {
		err = x.f.truncateKeepClean(size)
	} else {
		err = x.f.Truncate(size)
	}
	if err != nil {
		x.flen = -1
		return fmt.Errorf("resize %s: %w", x.f.Name(), err)
	}
	x.flen = size
	return nil
}

// maxEntriesFor is how many entries of size es fit in segment.index.bytes (at least 4,
// as Kafka requires).
func maxEntriesFor(indexBytes int64, es int) int {
	n := indexBytes / int64(es)
	if n < 4 {
		n = 4
	}
	if n > 1<<28 {
		n = 1 << 28
	}
	return int(n)
}

// parseOffsetIndex loads the entries of an offset index file. It stops at the first
// entry that does not increase or has position 0 (never indexed: the first batch of a
// segment has no entry), which is where the zero tail of a preallocated file starts, and reports
// whether everything after it is zero; a non-zero tail means the file is damaged.
func parseOffsetIndex(b []byte) (rel, pos []uint32, clean bool) {
	n := len(b) / offsetEntrySize
	i := 0
	for ; i < n; i++ {
		r := binary.BigEndian.Uint32(b[i*offsetEntrySize:])
		p := binary.BigEndian.Uint32(b[i*offsetEntrySize+4:])
		if p == 0 || (i > 0 && (r <= rel[i-1] || p <= pos[i-1])) {
			break
		}
		rel = append(rel, r)
		pos = append(pos, p)
	}
	return rel, pos, allZero(b[i*offsetEntrySize:])
}

// parseTimeIndex is parseOffsetIndex for a time index.
func parseTimeIndex(b []byte) (ts []int64, rel []uint32, clean bool) {
	n := len(b) / timeEntrySize
	i := 0
	for ; i < n; i++ {
		t := int64(binary.BigEndian.Uint64(b[i*timeEntrySize:]))
		r := binary.BigEndian.Uint32(b[i*timeEntrySize+8:])
		if t < 0 || (t == 0 && r == 0) || (i > 0 && (t <= ts[i-1] || r < rel[i-1])) {
			break
		}
		ts = append(ts, t)
		rel = append(rel, r)
	}
	return ts, rel, allZero(b[i*timeEntrySize:])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
