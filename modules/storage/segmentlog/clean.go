package segmentlog

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/compact"
	"github.com/sluicehq/sluice/modules/storage/internal/producers"
)

// Log compaction (cleanup.policy=compact). See doc.go, "Compaction", for the on-disk
// protocol; compact.Filter for what a pass keeps.

// cleanerOffset is the first dirty offset, for the checkpoint.
func (l *Log) cleanerOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.firstDirty
}

// errInjectedCrash stops a pass at a crash point a test asked for (Store.crashAt):
// nothing is undone or cleaned up, as if the process had died there.
var errInjectedCrash = errors.New("segmentlog: injected crash")

func (s *Store) crashed(point string) bool { return s.crashAt != nil && s.crashAt(point) }

// Name implements compact.Log.
func (l *Log) Name() string { return l.tp.String() }

func compacted(cfg *kernel.LogConfig) bool { return strings.Contains(cfg.CleanupPolicy, "compact") }

// compacted reports whether the log's cleanup.policy includes compact: the cleaner
// and its per-partition metrics serve only such logs.
func (l *Log) compacted() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return !l.closed && compacted(&l.cfg)
}

// cleanableEnd is compact.CleanableEnd of the log. mu held (read).
func (l *Log) cleanableEnd(nowMs, from int64) int64 {
	fu, unstable := l.prod.FirstUnstableOffset()
	return compact.CleanableEnd(&l.cfg, l.segs[:len(l.segs)-1], l.active().base, l.HighWatermark(), fu, unstable, from, nowMs)
}

// Cleanable implements compact.Log (compact.Dirtiness of the log).
func (l *Log) Cleanable(nowMs int64) (compact.Candidate, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || !compacted(&l.cfg) {
		return compact.Candidate{}, false
	}
	from := max(l.firstDirty, l.logStart.Load())
	return compact.Dirtiness(&l.cfg, l.segs[:len(l.segs)-1], l.active().base, from, l.cleanableEnd(nowMs, from), nowMs)
}

// cleanPlan is what a pass read from the log under its lock.
type cleanPlan struct {
	compact.Plan[*segment] // Segs are pinned
	cfg                    kernel.LogConfig
	aborted                []producers.Aborted // with their last stable offsets, for .txnindex
}

// Clean implements compact.Log: one pass. It maps the dirty section, then rewrites
// the log from its first segment up to the end of the mapped part, group by group
// (consecutive segments whose sizes sum to at most segment.bytes become one), each
// group written beside the old segments and swapped in under mu (swap). Reads,
// appends and flushes go on during the pass; only the swaps take mu exclusively.
func (l *Log) Clean(ctx context.Context, env *compact.Env) (compact.Result, error) {
	p, ok := l.planClean(env.NowMs)
	if !ok {
		return compact.Result{FirstDirty: p.From}, nil
	}
	defer func() {
		for _, s := range p.Segs {
			s.unref()
		}
	}()
	res, err := compact.Run(ctx, env, p.Plan, func(g []*segment, f *compact.Filter, firstDirty int64) error {
		return l.cleanGroup(ctx, env, f, g, p, firstDirty)
	})
	if err != nil {
		return res, fmt.Errorf("clean %v: %w", l.tp, err)
	}
	if res.FirstDirty <= p.From {
		return res, nil
	}
	if l.store.crashed("swapped") {
		return res, errInjectedCrash
	}
	return res, l.store.writeCleanerCheckpoint()
}

// planClean pins the sealed segments and copies what the pass needs.
func (l *Log) planClean(nowMs int64) (cleanPlan, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	p := cleanPlan{cfg: l.cfg}
	p.From = max(l.firstDirty, l.logStart.Load())
	if l.closed || !compacted(&l.cfg) {
		return p, false
	}
	var ok bool
	p.Plan, ok = compact.NewPlan(&l.cfg, l.segs[:len(l.segs)-1], l.active().base, l.HighWatermark(), l.prod, p.From, nowMs, (*segment).pin)
	if ok {
		p.aborted = append([]producers.Aborted(nil), l.prod.AllAborted()...)
	}
	return p, ok
}

// Base, Next and Size make a sealed segment a compact.Segment (read without the log's
// lock: a sealed segment's fields do not change while it is pinned).
func (s *segment) Base() int64 { return s.base }
func (s *segment) Next() int64 { return s.next }
func (s *segment) Size() int64 { return s.size }

// FirstTimestamp and MaxTimestamp make it a compact.Sealed.
func (s *segment) FirstTimestamp() int64 { return s.firstTs }
func (s *segment) MaxTimestamp() int64   { return s.maxTs }

// Batches implements compact.Segment: it reads the file through a 64 KiB buffer; the
// batch buffer is reused, so fn must not keep batch.
func (s *segment) Batches(ctx context.Context, throttle func(context.Context, int) error, fn func(batch []byte, base int64) (bool, error)) error {
	r := bufio.NewReaderSize(io.NewSectionReader(s.log, 0, s.size), 64<<10)
	var buf []byte
	for pos := int64(0); pos < s.size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		var pre [recordbatch.LogOverhead]byte
		if _, err := io.ReadFull(r, pre[:]); err != nil {
			return fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		size := int64(int32(binary.BigEndian.Uint32(pre[recordbatch.OffBatchLength:]))) + recordbatch.LogOverhead
		if size < recordbatch.HeaderSize || pos+size > s.size {
			return fmt.Errorf("%w: batch at %d of segment %d has length %d", kernel.ErrCorrupt, pos, s.base, size)
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		copy(buf, pre[:])
		if _, err := io.ReadFull(r, buf[recordbatch.LogOverhead:]); err != nil {
			return fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		if throttle != nil {
			if err := throttle(ctx, int(size)); err != nil {
				return err
			}
		}
		more, err := fn(buf, int64(binary.BigEndian.Uint64(pre[:])))
		if err != nil || !more {
			return err
		}
		pos += size
	}
	return nil
}

// Suffixes of a clean in progress (see doc.go, "Compaction").
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// cleanGroup writes the cleaned form of the segments g beside them as
// <base>.{log,index,timeindex,txnindex}.cleaned and swaps it in.
// firstDirty, when not -1, becomes the log's first dirty offset with the swap.
func (l *Log) cleanGroup(ctx context.Context, env *compact.Env, f *compact.Filter, g []*segment, p cleanPlan, firstDirty int64) error {
	base := g[0].base
	ns, err := createSegmentFiles(l.store.files, l.dir, base, cleanedSuffix, p.cfg.SegmentIndexBytes, env.NowMs, l.logger)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			ns.unref()
			removeCleaned(l.dir, base)
		}
	}()
	changed := f.Stats.Changed
	var out []byte
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		if env.Throttle != nil {
			if err := env.Throttle(ctx, len(out)); err != nil {
				return err
			}
		}
		err := ns.append(out, p.cfg.IndexIntervalBytes)
		out = out[:0]
		return err
	}
	for _, s := range g {
		err := s.Batches(ctx, env.Throttle, func(batch []byte, _ int64) (bool, error) {
			var err error
			if out, err = f.Batch(out, batch); err != nil {
				return false, err
			}
			if len(out) >= 1<<20 {
				return true, flush()
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if f.Stats.Changed == changed {
		// Every batch kept as it was: the group is already clean, and swapping in a
		// copy of it would only cost fsyncs (they slow other writes on the disk).
		return l.keepGroup(g, firstDirty)
	}
	end := g[len(g)-1].next
	// The aborted transactions whose markers the group keeps go to its .txnindex.
	var txnIdx []byte
	for _, a := range p.aborted {
		if a.LastOffset >= base && a.LastOffset < end && !f.RemovedAborts[a.LastOffset] {
			txnIdx = producers.AppendTxnIndexEntry(txnIdx, a)
		}
	}
	// Written even when empty, so that each of the four files has its .cleaned
	// counterpart until it is renamed (recoverSwaps relies on it). An empty one needs
	// no fsync: the manifest's directory sync makes its name durable.
	txnPath := filepath.Join(l.dir, segmentName(base)+txnIndexSuffix+cleanedSuffix)
	if len(txnIdx) == 0 {
		err = os.WriteFile(txnPath, nil, 0o644)
	} else {
		err = writeFileNoDirSync(txnPath, txnIdx, true)
	}
	if err != nil {
		return err
	}
	if err := ns.seal(); err != nil {
		return err
	}
	if err := ns.sync(); err != nil {
		return err
	}
	if err := ns.closeIndexFiles(); err != nil {
		return err
	}
	if l.store.crashed("written") {
		done = true
		return errInjectedCrash
	}
	if err := l.swap(g, ns, end, f.RemovedAborts, firstDirty); err != nil {
		done = errors.Is(err, errInjectedCrash)
		return err
	}
	done = true
	return nil
}

// swap replaces the segments g (still in the log, unchanged) by ns, which covers the
// same offsets [g[0].base, end). The steps and what a crash after each leaves (the
// next open finishes or forgets the swap, see recoverSwaps):
//
//  1. <base>.swap, the manifest, is written and the directory synced: the commit
//     point. Before it the old segments are the log and the .cleaned files are
//     deleted at open; from here on the open completes the swap.
//  2. The old segments are renamed to *.deleted (readers keep their descriptors).
//  3. The .cleaned files are renamed to their final names, the .log last.
//  4. The directory is synced, the manifest removed and the directory synced again.
//
// An empty ns (the group held only removed records) is swapped in like any other
// when it is the log's first segment (it holds the log start offset); otherwise the
// old segments simply go. mu is taken for the whole swap; firstDirty, when not -1,
// becomes the log's first dirty offset in it.
func (l *Log) swap(g []*segment, ns *segment, end int64, removedAborts map[int64]bool, firstDirty int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return compact.ErrAbandoned
	}
	i, ok := l.groupAt(g)
	if !ok {
		return compact.ErrAbandoned
	}
	base := g[0].base
	replace := ns.size > 0 || i == 0
	m := swapManifest{base: base, end: end, replace: replace}
	if err := writeFileAtomic(filepath.Join(l.dir, segmentName(base)+swapSuffix), m.encode()); err != nil {
		return fmt.Errorf("write swap manifest: %w", err)
	}
	if l.store.crashed("committed") {
		return errInjectedCrash
	}
	var errs []error
	for k := len(g) - 1; k >= 0; k-- {
		if err := g[k].markDeleted(); err != nil {
			errs = append(errs, err)
		}
		if k == len(g)/2 && l.store.crashed("deleting") {
			return errInjectedCrash
		}
	}
	segs := append([]*segment(nil), l.segs[:i]...)
	if replace {
		if err := renameCleaned(l.dir, base); err != nil {
			errs = append(errs, err)
		}
		ns.renamedTo()
		segs = append(segs, ns)
	} else {
		ns.unref()
		removeCleaned(l.dir, base)
	}
	l.segs = append(segs, l.segs[i+len(g):]...)
	if l.store.crashed("renamed") {
		return errInjectedCrash
	}
	// The renames are durable before the manifest goes. Its removal is made durable
	// by the directory's next sync: until then a crash finishes this swap again, which
	// finds nothing left to do (a segment created in the directory after it, say by a
	// roll past a truncation, is durable only once the directory is synced, and that
	// sync removes the manifest for good too).
	if err := syncDir(l.dir); err != nil {
		errs = append(errs, err)
	} else if err := os.Remove(filepath.Join(l.dir, segmentName(base)+swapSuffix)); err != nil {
		errs = append(errs, err)
	} else {
		l.markDirDirty()
	}
	l.prod.ForgetAborted(removedAborts)
	if firstDirty >= 0 {
		l.firstDirty = firstDirty
	}
	if err := errors.Join(errs...); err != nil {
		// The swap is committed (the manifest is durable): what is left undone here is
		// finished by the next open. Serving goes on from the new segment list.
		l.logger.Warn("finishing a segment swap failed; the next open completes it", "base_offset", base, "err", err)
	}
	return nil
}

// groupAt returns where the segments g still stand in the log, unchanged and sealed
// (not the active segment); false when a truncation, retention or swap changed them.
// mu held.
func (l *Log) groupAt(g []*segment) (int, bool) {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base >= g[0].base })
	if i+len(g) >= len(l.segs) {
		return 0, false
	}
	for k, s := range g {
		if l.segs[i+k] != s || s.deleted.Load() {
			return 0, false
		}
	}
	return i, true
}

// keepGroup is swap for a group the pass left unchanged: nothing is replaced, but
// the last group still records the pass's progress, under mu, if the group is still
// in the log (else the pass is abandoned, as swap would).
func (l *Log) keepGroup(g []*segment, firstDirty int64) error {
	if firstDirty < 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return compact.ErrAbandoned
	}
	if _, ok := l.groupAt(g); !ok {
		return compact.ErrAbandoned
	}
	l.firstDirty = firstDirty
	return nil
}

// swapManifest is the content of <base>.swap: "1\n<base> <end> <replace 0|1>\n".
type swapManifest struct {
	base, end int64
	replace   bool // the .cleaned files replace the segments; false: they just go
}

func (m swapManifest) encode() []byte {
	r := 0
	if m.replace {
		r = 1
	}
	return fmt.Appendf(nil, "1\n%d %d %d\n", m.base, m.end, r)
}

func parseSwapManifest(b []byte) (swapManifest, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "1" {
		return swapManifest{}, fmt.Errorf("bad swap manifest %q", b)
	}
	f := strings.Fields(lines[1])
	if len(f) != 3 {
		return swapManifest{}, fmt.Errorf("bad swap manifest %q", b)
	}
	base, err1 := strconv.ParseInt(f[0], 10, 64)
	end, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || base < 0 || end < base || (f[2] != "0" && f[2] != "1") {
		return swapManifest{}, fmt.Errorf("bad swap manifest %q", b)
	}
	return swapManifest{base: base, end: end, replace: f[2] == "1"}, nil
}

// segmentFileSuffixes are a segment's files, in the order a swap renames them (the
// .log last: its presence under the final name means the others are in place).
var segmentFileSuffixes = []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix}

func renameCleaned(dir string, base int64) error {
	var errs []error
	for _, suf := range segmentFileSuffixes {
		from := filepath.Join(dir, segmentName(base)+suf+cleanedSuffix)
		if err := os.Rename(from, filepath.Join(dir, segmentName(base)+suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeCleaned(dir string, base int64) {
	for _, suf := range segmentFileSuffixes {
		_ = os.Remove(filepath.Join(dir, segmentName(base)+suf+cleanedSuffix))
	}
}

// recoverSwaps finishes the swaps whose manifest is in dir and deletes the .cleaned
// files of any other (a pass a crash interrupted before its commit point). Run at open,
// before the segments are listed.
//
// For a manifest (base, end, replace): the old segments are those with a base in
// (base, end), and base itself without replace; their files are deleted. With
// replace, each of <base>'s four files that still has a .cleaned counterpart is
// replaced by it (a rename over the old file); one without has been renamed already.
// When it changed nothing it returns the directory's listing, which the caller reuses
// instead of listing again (a directory listing is a tenth of a partition's open at
// 100,000 partitions).
func recoverSwaps(dir string, logger *slog.Logger) (unchanged []os.DirEntry, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var manifests []swapManifest
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), swapSuffix)
		if !ok {
			continue
		}
		if _, ok := parseBase(stem); !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		m, err := parseSwapManifest(b)
		if err != nil {
			// Written atomically: a bad one is not ours to act on.
			logger.Warn("ignoring unreadable segment swap manifest", "file", e.Name(), "err", err)
			continue
		}
		manifests = append(manifests, m)
	}
	for _, m := range manifests {
		if err := finishSwap(dir, m); err != nil {
			return nil, fmt.Errorf("finish segment swap at %d: %w", m.base, err)
		}
		logger.Warn("finished an interrupted segment swap of the log cleaner", "base_offset", m.base, "end_offset", m.end)
	}
	if len(manifests) > 0 {
		// The swaps renamed files: list again.
		if ents, err = os.ReadDir(dir); err != nil {
			return nil, err
		}
	}
	// Whatever .cleaned file is left belongs to no committed swap.
	removed := false
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			removed = true
		}
	}
	if len(manifests) > 0 {
		return nil, syncDir(dir)
	}
	if removed {
		return nil, nil
	}
	return ents, nil
}

func finishSwap(dir string, m swapManifest) error {
	bases, err := segmentBases(dir)
	if err != nil {
		return err
	}
	for _, b := range bases {
		if b < m.base || b >= m.end || (b == m.base && m.replace) {
			continue
		}
		for _, suf := range segmentFileSuffixes {
			if err := os.Remove(filepath.Join(dir, segmentName(b)+suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if m.replace {
		if err := renameCleaned(dir, m.base); err != nil {
			return err
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return os.Remove(filepath.Join(dir, segmentName(m.base)+swapSuffix))
}

// segmentBases lists the base offsets of the .log files in dir, ascending.
func segmentBases(dir string) ([]int64, error) { return listOffsets(dir, logSuffix) }

var _ compact.Log = (*Log)(nil)
