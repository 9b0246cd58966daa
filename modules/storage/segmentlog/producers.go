package segmentlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/producers"
)

// Producer state on disk (see doc.go): a .txnindex per segment holding the aborted
// transactions whose ABORT marker lies in it, and <offset>.snapshot files of the
// producer entries in the partition directory. Everything here runs with mu held.

// snapshotsKept is how many producer snapshots a log keeps (the newest ones).
const snapshotsKept = 3

func snapshotName(offset int64) string { return fmt.Sprintf("%020d%s", offset, snapshotSuffix) }

// listSnapshots returns the offsets of the snapshot files in dir, ascending.
func listSnapshots(dir string) ([]int64, error) { return listOffsets(dir, snapshotSuffix) }

// listOffsets returns the offsets named by dir's files "<20 digits><suffix>" (segments,
// snapshots), ascending.
func listOffsets(dir, suffix string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, e := range ents {
		if stem, ok := strings.CutSuffix(e.Name(), suffix); ok {
			if off, ok := parseBase(stem); ok {
				offs = append(offs, off)
			}
		}
	}
	slices.Sort(offs)
	return offs, nil
}

// removeSnapshot removes the snapshot at off, file and entry in l.snaps. mu held.
func (l *Log) removeSnapshot(off int64) {
	if i, ok := slices.BinarySearch(l.snaps, off); ok {
		l.snaps = slices.Delete(l.snaps, i, i+1)
	}
	if err := os.Remove(filepath.Join(l.dir, snapshotName(off))); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.logger.Warn("remove producer snapshot", "offset", off, "err", err)
	}
}

// writeSnapshot writes the producer state as the snapshot at the log end offset and
// keeps the newest snapshotsKept. The .txnindex entries written since the previous
// snapshot are synced first: recovery trusts the .txnindex below a snapshot's offset.
// The offsets of the snapshot files are kept in l.snaps (listed once by
// loadProducers), not listed here: a roll must cost the same whatever the number of
// segments in the directory. Without sync (an orderly stop that syncs the whole file
// system after, Store.Close) the file is not fsynced: a crash before that sync leaves
// at worst a torn snapshot, which loadProducers ignores for an older one. The
// .txnindex syncs stay, so no snapshot is ever durable before the entries below it.
func (l *Log) writeSnapshot(offset int64, sync bool) error {
	for _, base := range l.txnUnsynced {
		if err := syncFile(filepath.Join(l.dir, segmentName(base)+txnIndexSuffix)); err != nil {
			return fmt.Errorf("sync transaction index %d: %w", base, err)
		}
	}
	l.txnUnsynced = l.txnUnsynced[:0]
	data := producers.EncodeSnapshot(l.prod, offset)
	if _, ok := slices.BinarySearch(l.snaps, offset); ok && offset == l.snapOffset && bytes.Equal(data, l.snapData) {
		return nil // the file holds this state already (an idle log's close)
	}
	l.snapOffset, l.snapData = -1, nil
	if err := writeFileNoDirSync(filepath.Join(l.dir, snapshotName(offset)), data, sync); err != nil {
		return fmt.Errorf("write producer snapshot %d: %w", offset, err)
	}
	l.rememberSnapshot(offset, data)
	if i, ok := slices.BinarySearch(l.snaps, offset); !ok {
		l.snaps = slices.Insert(l.snaps, i, offset)
	}
	for len(l.snaps) > snapshotsKept {
		l.removeSnapshot(l.snaps[0])
	}
	return nil
}

// rememberSnapshot records that the snapshot file at offset holds (or loads as) the
// state data encodes, so that writeSnapshot skips rewriting it unchanged. Large
// states are not kept (they are rewritten).
func (l *Log) rememberSnapshot(offset int64, data []byte) {
	if len(data) > maxRememberedSnapshot {
		l.snapOffset, l.snapData = -1, nil
		return
	}
	l.snapOffset, l.snapData = offset, data
}

// maxRememberedSnapshot bounds the snapshot bytes a log keeps to skip rewrites.
const maxRememberedSnapshot = 4 << 10

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // deleted with its segment
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

// snapshotSkipRecords bounds the replay that a skipped snapshot leaves to the next
// open (snapshotNeedless): at most this many batch headers, read from the page cache
// in microseconds each.
const snapshotSkipRecords = 32

// snapshotNeedless reports whether a snapshot at offset (the log end, at close or
// after an open's replay) can be left out: no transaction is open and the next open
// rebuilds the same producer state by replaying at most snapshotSkipRecords records
// from the newest snapshot (or the first segment), the replay crash recovery relies
// on anyway. That costs less than creating a file: 0.3 ms of kernel time on this
// project's CI machines, where 100,000 partitions of a record or two each spent most
// of an orderly stop creating snapshot files. (A producer expired since the last
// snapshot comes back from the replay until the next expiry pass.) mu held.
func (l *Log) snapshotNeedless(offset int64) bool {
	if _, open := l.prod.FirstUnstableOffset(); open {
		return false
	}
	from := l.segs[0].base
	if i, _ := slices.BinarySearch(l.snaps, offset+1); i > 0 && l.snaps[i-1] >= from {
		from = l.snaps[i-1]
	} else if from > 0 {
		// No snapshot at or after the first segment, whose predecessors are gone
		// (retention): the producers they held are only in the state, so keep it.
		return false
	}
	return offset-from <= snapshotSkipRecords
}

// writeFileNoDirSync writes path atomically (temp file, fsync unless !sync, rename)
// without syncing the directory: losing the rename in a crash only makes recovery
// start from an older snapshot.
func writeFileNoDirSync(path string, data []byte, sync bool) error {
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, data, 0o644)
	if err == nil && sync {
		err = syncFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// appendTxnIndex appends entries to the .txnindex of the segment at base.
func (l *Log) appendTxnIndex(base int64, as []producers.Aborted) error {
	var buf []byte
	for _, a := range as {
		buf = producers.AppendTxnIndexEntry(buf, a)
	}
	f, err := os.OpenFile(filepath.Join(l.dir, segmentName(base)+txnIndexSuffix), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open transaction index %d: %w", base, err)
	}
	_, err = f.Write(buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write transaction index %d: %w", base, err)
	}
	if !slices.Contains(l.txnUnsynced, base) {
		l.txnUnsynced = append(l.txnUnsynced, base)
	}
	return nil
}

// rewriteTxnIndexes makes the .txnindex of every segment holding offsets >= from
// agree with the in-memory aborted transactions (after a replay re-derived them, or a
// truncation dropped some). Files already right are left alone.
func (l *Log) rewriteTxnIndexes(from int64) error {
	all := l.prod.AllAborted()
	for i, s := range l.segs {
		end := int64(1<<63 - 1)
		if i+1 < len(l.segs) {
			end = l.segs[i+1].base
		}
		if end <= from {
			continue
		}
		lo := sort.Search(len(all), func(j int) bool { return all[j].LastOffset >= s.base })
		hi := sort.Search(len(all), func(j int) bool { return all[j].LastOffset >= end })
		var want []byte
		for _, a := range all[lo:hi] {
			want = producers.AppendTxnIndexEntry(want, a)
		}
		path := s.path(txnIndexSuffix)
		have, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("read transaction index %d: %w", s.base, err)
		}
		if bytes.Equal(have, want) && (len(want) > 0 || err != nil) {
			continue
		}
		if len(want) == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove transaction index %d: %w", s.base, err)
			}
			continue
		}
		if err := writeFileAtomic(path, want); err != nil {
			return fmt.Errorf("write transaction index %d: %w", s.base, err)
		}
	}
	return nil
}

// loadProducers rebuilds the producer state at open or after a truncation: the newest
// snapshot at or below the log end (snapshots above it are deleted, undecodable ones
// skipped with a warning), the aborted transactions of the .txnindex files below the
// snapshot's offset, then a replay of the batch headers from there to the log end,
// which re-derives the aborted transactions above it (their .txnindex entries are
// rewritten, never duplicated). replayed reports whether any batch was replayed.
func (l *Log) loadProducers() (replayed bool, err error) {
	l.prod.Reset()
	leo, first := l.leo.Load(), l.segs[0].base
	offs, err := listSnapshots(l.dir)
	if err != nil {
		return false, fmt.Errorf("list producer snapshots: %w", err)
	}
	l.snaps = slices.Clone(offs)
	from := first
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off > leo {
			l.removeSnapshot(off)
			continue
		}
		b, err := os.ReadFile(filepath.Join(l.dir, snapshotName(off)))
		if err != nil {
			return false, fmt.Errorf("read producer snapshot %d: %w", off, err)
		}
		soff, es, err := producers.DecodeSnapshot(b)
		if err == nil && soff != off {
			err = fmt.Errorf("%w: holds offset %d", producers.ErrBadSnapshot, soff)
		}
		if err != nil {
			l.logger.Warn("ignoring corrupt producer snapshot", "offset", off, "err", err)
			continue
		}
		if off >= first {
			l.prod.Load(es)
			from = off
		}
		break
	}
	l.snapOffset, l.snapData = -1, nil
	for _, s := range l.segs {
		if s.base >= from && s.base > first {
			break
		}
		b, err := os.ReadFile(s.path(txnIndexSuffix))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read transaction index %d: %w", s.base, err)
		}
		as, torn, err := producers.ParseTxnIndex(b)
		if err != nil || torn {
			l.logger.Warn("transaction index damaged; keeping the entries before the damage", "base_offset", s.base, "torn", torn, "err", err)
		}
		have := l.prod.AllAborted()
		for _, a := range as {
			if a.LastOffset >= from {
				break
			}
			if a.LastOffset < s.base {
				continue
			}
			if n := len(have); n > 0 && a.LastOffset <= have[n-1].LastOffset {
				continue
			}
			l.prod.AddAborted(a)
			have = l.prod.AllAborted()
		}
	}
	if err := l.replayProducers(from); err != nil {
		return false, err
	}
	if err := l.rewriteTxnIndexes(from); err != nil {
		return false, err
	}
	l.prod.TruncateHead(l.logStart.Load())
	if from == leo {
		// Loaded from the snapshot at the log end, nothing replayed: that file
		// loads as this state.
		if _, ok := slices.BinarySearch(l.snaps, leo); ok {
			l.rememberSnapshot(leo, producers.EncodeSnapshot(l.prod, leo))
		}
	}
	return from < leo, nil
}

// replayProducers applies the batches from offset from (a batch boundary) to the log
// end to the producer state, without checks. Append times are not on disk: a replayed
// batch's is its max timestamp.
func (l *Log) replayProducers(from int64) error {
	var buf []byte
	return l.walkHeaders(from, "replay producer state", func(s *segment, pos int64, h *recordbatch.Header) error {
		if h.BaseOffset < from || h.ProducerID < 0 {
			return nil
		}
		var batch []byte // only a marker's records are read (FromHeader parses them)
		if h.IsControl() {
			n := int64(h.Size())
			if cap(buf) < int(n) {
				buf = make([]byte, n)
			}
			batch = buf[:n]
			if _, err := s.log.ReadAt(batch, pos); err != nil {
				return err
			}
		}
		pb, err := producers.FromHeader(h, batch, h.MaxTimestamp)
		if err != nil {
			l.logger.Warn("skipping undecodable transaction marker in replay", "offset", h.BaseOffset, "err", err)
			return nil
		}
		l.prod.Apply(pb)
		return nil
	})
}

// AppendProducer implements kernel.Log: the sequence check and the append happen under
// mu, so a retry racing its original sees it either appended or not.
func (l *Log) AppendProducer(batch []byte, seq kernel.SeqRange) (kernel.AppendResult, error) {
	if len(batch) > 0 {
		return l.append(batch, producers.Client, &seq)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return kernel.AppendResult{}, kernel.ErrLogClosed
	}
	return l.prod.RecordEmpty(seq, l.leo.Load(), l.logStart.Load(), l.nowMs())
}

// Producer implements kernel.Log.
func (l *Log) Producer(id int64) (kernel.ProducerState, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.prod.Producer(id)
}

// FirstUnstableOffset implements kernel.Log.
func (l *Log) FirstUnstableOffset() (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.prod.FirstUnstableOffset()
}

// AbortedTxns implements kernel.Log.
func (l *Log) AbortedTxns(dst []kernel.AbortedTxn, from, to int64) []kernel.AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.prod.AbortedTxns(dst, from, to)
}

// Producers implements kernel.Log.
func (l *Log) Producers() []kernel.ProducerState {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.prod.Producers()
}
