package segmentlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// Offline verification of a log dir (`sluice log verify`): every segment's batches
// (framing, offsets increasing within and across segments, CRC), every offset index
// entry (increasing, naming the start of the batch that ends at its offset), every
// time index entry (increasing, inside the segment). The broker must not run on the
// dir meanwhile.

// Problem is one finding of VerifyPartition.
type Problem struct {
	File   string // the file it is in
	Offset int64  // the first offset concerned (-1: unknown)
	// End is the last offset a damaged batch makes unreadable: the segment's last
	// offset when the next segment's base tells it, -1 when the damage is in the last
	// segment (it runs to the log end). Only for Batch.
	End      int64
	Position int64 // byte position in File (-1: the whole file)
	What     string
	// Batch: a damaged batch of a .log file (the first of its segment; the rest of
	// the segment is not read). CutDamage repairs it.
	Batch bool
}

func (p Problem) String() string {
	switch {
	case p.Batch && p.End >= 0:
		return fmt.Sprintf("%s: position %d: offsets %d..%d unreadable: %s", p.File, p.Position, p.Offset, p.End, p.What)
	case p.Batch:
		return fmt.Sprintf("%s: position %d: offsets %d.. (to the log end) unreadable: %s", p.File, p.Position, p.Offset, p.What)
	case p.Position < 0:
		return fmt.Sprintf("%s: %s", p.File, p.What)
	}
	return fmt.Sprintf("%s: position %d (offset %d): %s", p.File, p.Position, p.Offset, p.What)
}

// IsPartitionDir reports whether dir looks like a partition directory (it holds a
// segment file or partition.metadata).
func IsPartitionDir(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if name := e.Name(); name == partitionMetadataFile || segmentFile(name) {
			return true
		}
	}
	return false
}

func segmentFile(name string) bool {
	stem, ok := strings.CutSuffix(name, logSuffix)
	_, named := parseBase(stem)
	return ok && named
}

// PartitionDirs lists the partition directories of a log dir, sorted (leftovers of
// deletions and stray incarnations are skipped: the broker never reads them).
func PartitionDirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || strings.HasSuffix(name, deleteDirSuffix) || strings.HasSuffix(name, straySuffix) {
			continue
		}
		if p := filepath.Join(dir, name); IsPartitionDir(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// VerifyStats counts what VerifyPartition read.
type VerifyStats struct {
	Segments int
	Bytes    int64 // of .log files
}

// VerifyPartition checks the segments of one partition directory and calls report
// with each problem, in file order. It returns an error only when a file cannot be
// read (that is not damage). Memory is bounded by the largest index file, not by the
// segments: batches are streamed through verifyBuf.
func VerifyPartition(dir string, report func(Problem)) (VerifyStats, error) {
	var vs VerifyStats
	bases, err := listOffsets(dir, logSuffix)
	if err != nil {
		return vs, err
	}
	buf := make([]byte, verifyBuf)
	last := int64(-1)
	for i, base := range bases {
		end := int64(-1)
		if i+1 < len(bases) {
			end = bases[i+1] - 1
		}
		l, n, err := verifySegment(dir, base, end, last, i == 0, buf, report)
		vs.Segments++
		vs.Bytes += n
		if err != nil {
			return vs, err
		}
		last = max(last, l)
	}
	return vs, nil
}

// verifySegment checks the segment at base (whose offsets end at end, -1: the last
// segment) whose predecessors end at offset after; it returns the last offset of its
// last good batch and the segment's size.
func verifySegment(dir string, base, end, after int64, first bool, buf []byte, report func(Problem)) (int64, int64, error) {
	path := filepath.Join(dir, segmentName(base)+logSuffix)
	f, err := os.Open(path)
	if err != nil {
		return after, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return after, 0, err
	}
	if after >= base && !first {
		report(Problem{File: path, Offset: base, End: end, Position: 0, Batch: true,
			What: fmt.Sprintf("segment base %d overlaps the previous segment, which ends at offset %d", base, after)})
		return after, st.Size(), nil
	}
	oidx := filepath.Join(dir, segmentName(base)+indexSuffix)
	ib, err := os.ReadFile(oidx)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return after, 0, err // a missing index is rebuilt at open
	}
	if len(ib)%offsetEntrySize != 0 {
		report(Problem{File: oidx, Offset: -1, Position: -1, What: fmt.Sprintf("size %d is not a multiple of %d", len(ib), offsetEntrySize)})
	}
	rel, ipos, clean := parseOffsetIndex(ib)
	ib = nil
	if !clean {
		report(Problem{File: oidx, Offset: -1, Position: int64(len(rel) * offsetEntrySize), What: "entry out of order (offsets and positions must increase)"})
	}
	// Index entries are sorted by position, as batches are: walk both together.
	next := 0
	entry := func(i int) (int64, int64) { return base + int64(rel[i]), int64(ipos[i]) }
	bad := func(i int, what string) {
		off, _ := entry(i)
		report(Problem{File: oidx, Offset: off, Position: int64(i * offsetEntrySize), What: what})
	}
	pos, last, werr := walkBatches(f, 0, st.Size(), max(after, base-1), buf, func(bpos int64, h *recordbatch.Header) error {
		// The CRC does not cover the base offset: a flipped bit there is caught only
		// by the order of offsets, here against the next segment's base (and by
		// walkBatches against the next batch).
		if end >= 0 && h.LastOffset() > end {
			return fmt.Errorf("%w: offsets %d..%d run past the next segment's base %d", kernel.ErrCorrupt, h.BaseOffset, h.LastOffset(), end+1)
		}
		for ; next < len(rel); next++ {
			off, p := entry(next)
			if p > bpos {
				return nil
			}
			switch {
			case p < bpos:
				bad(next, fmt.Sprintf("entry points at position %d, not a batch start", p))
			case off != h.LastOffset():
				bad(next, fmt.Sprintf("entry names offset %d but the batch at %d ends at %d", off, p, h.LastOffset()))
			}
		}
		return nil
	})
	if werr != nil && !errors.Is(werr, kernel.ErrCorrupt) {
		return last, st.Size(), fmt.Errorf("%s: %w", path, werr)
	}
	// Entries past damage point into it: they go with it (a repair removes them).
	for ; next < len(rel); next++ {
		if _, p := entry(next); p < pos {
			bad(next, fmt.Sprintf("entry points at position %d, not a batch start", p))
		} else if werr == nil {
			bad(next, fmt.Sprintf("entry points at position %d, past the end of the segment (%d bytes)", p, pos))
		}
	}
	if werr != nil {
		report(Problem{File: path, Offset: last + 1, End: end, Position: pos, Batch: true,
			What: strings.TrimPrefix(werr.Error(), kernel.ErrCorrupt.Error()+": ")})
	}
	return last, st.Size(), verifyTimeIndex(dir, base, last, werr != nil, report)
}

// verifyTimeIndex checks the .timeindex of the segment at base: entries increasing,
// offsets inside the segment (at most last, unless the segment is damaged after last).
func verifyTimeIndex(dir string, base, last int64, damaged bool, report func(Problem)) error {
	path := filepath.Join(dir, segmentName(base)+timeIndexSuffix)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	ts, rel, clean := parseTimeIndex(b)
	if !clean || len(b)%timeEntrySize != 0 {
		report(Problem{File: path, Offset: -1, Position: int64(len(ts) * timeEntrySize), What: "entry out of order or malformed (timestamps must increase)"})
	}
	for i := range rel {
		if off := base + int64(rel[i]); off > last && !damaged {
			report(Problem{File: path, Offset: off, Position: int64(i * timeEntrySize), What: fmt.Sprintf("entry names offset %d, past the segment's last good offset %d", off, last)})
		}
	}
	return nil
}

// CutDamage repairs a partition directory offline at the first damaged batch p (a
// Problem with Batch set): the bytes from it to the end of its segment are moved to
// "<segment>.log.<position>.damaged", the segment is cut there and its indexes
// removed (rebuilt at open), and every later segment's files are renamed to
// "<name>.damaged". A segment damaged from its first byte that is not the
// partition's first is moved whole the same way (an empty segment there would name
// a log end below the previous segment's offsets). Nothing is deleted: the operator
// can inspect or remove the .damaged files. The broker recovers the rest at its next
// start (producer snapshots and leader epochs above the new log end are dropped
// then); the records from the damage on are gone from the log.
func CutDamage(dir string, p Problem) error {
	if !p.Batch {
		return fmt.Errorf("cut damage: %s is not a damaged batch", p.File)
	}
	stem, ok := strings.CutSuffix(filepath.Base(p.File), logSuffix)
	base, okb := parseBase(stem)
	if !ok || !okb {
		return fmt.Errorf("cut damage: %s is not a segment file", p.File)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	from := base + 1 // segments from this base on are moved whole
	if p.Position == 0 {
		bases, err := listOffsets(dir, logSuffix)
		if err != nil {
			return err
		}
		if len(bases) > 0 && bases[0] < base {
			from = base // not the first segment: moved whole
		}
	}
	if from > base {
		if err := cutSegment(dir, stem, p); err != nil {
			return err
		}
	}
	for _, e := range ents {
		name := e.Name()
		i := strings.IndexByte(name, '.')
		if i != 20 {
			continue
		}
		later, ok := parseBase(name[:i])
		if !ok || later < from {
			continue
		}
		switch name[i:] {
		case logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix:
			if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, name+damagedSuffix)); err != nil {
				return err
			}
		}
	}
	return syncDir(dir)
}

// damagedSuffix ends the names CutDamage moves damaged bytes to; the broker ignores
// them.
const damagedSuffix = ".damaged"

// cutSegment copies the segment's bytes from p.Position to a .damaged file, cuts the
// segment there and removes its offset and time indexes.
func cutSegment(dir, stem string, p Problem) error {
	f, err := os.OpenFile(p.File, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if p.Position > st.Size() || p.Position < 0 {
		return fmt.Errorf("cut damage: %s: position %d outside the file (%d bytes)", p.File, p.Position, st.Size())
	}
	tail, err := os.OpenFile(fmt.Sprintf("%s.%d%s", p.File, p.Position, damagedSuffix), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(tail, io.NewSectionReader(f, p.Position, st.Size()-p.Position)); err != nil {
		tail.Close()
		return err
	}
	if err := errors.Join(tail.Sync(), tail.Close()); err != nil {
		return err
	}
	if err := f.Truncate(p.Position); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if err := os.Remove(filepath.Join(dir, stem+suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
