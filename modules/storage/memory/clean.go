package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/compact"
)

// Log compaction (cleanup.policy=compact), with the segment log's semantics: the same
// cleanable end, dirty ratio and grouping; compact.Mapper and compact.Filter decide
// what a pass keeps. See doc.go, "Compaction".

// errCleanAbandoned: the log changed under a pass (truncation, retention, reset,
// close); the cleaned segments are dropped and the next pass starts over. Not a
// failure.
var errCleanAbandoned = errors.New("log changed during cleaning")

// Name implements compact.Log.
func (l *Log) Name() string { return l.tp.String() }

func compacted(cfg *kernel.LogConfig) bool { return strings.Contains(cfg.CleanupPolicy, "compact") }

// cleanableEnd is the first offset the cleaner may not touch: the active segment's
// base, the high watermark, the first offset of an open transaction, and the first
// segment holding a record younger than min.compaction.lag.ms. mu held (read).
func (p *partition) cleanableEnd(nowMs, from int64) int64 {
	end := min(p.segs[len(p.segs)-1].base, min(max(p.hw.Load(), p.logStart), p.leo()))
	if fu, ok := p.prod.FirstUnstableOffset(); ok {
		end = min(end, fu)
	}
	if lag := p.cfg.MinCompactionLagMs; lag > 0 {
		for i, s := range p.segs[:len(p.segs)-1] {
			if p.segs[i+1].base <= from {
				continue
			}
			if s.maxTs > nowMs-lag {
				end = min(end, s.base)
				break
			}
		}
	}
	return end
}

// Cleanable implements compact.Log: the dirty ratio is the bytes of the segments at
// or after the first dirty offset and below the cleanable end, over those plus the
// cleaned segments below the first dirty offset (min.cleanable.dirty.ratio).
func (l *Log) Cleanable(nowMs int64) (compact.Candidate, bool) {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	if l.closed.Load() || !compacted(&p.cfg) {
		return compact.Candidate{}, false
	}
	from := max(p.firstDirty, p.logStart)
	end := p.cleanableEnd(nowMs, from)
	if from >= end {
		return compact.Candidate{}, false
	}
	var clean, dirty int64
	firstTs := int64(-1)
	for i, s := range p.segs[:len(p.segs)-1] {
		if s.base >= end {
			break
		}
		if p.segs[i+1].base <= from {
			clean += int64(len(s.data))
			continue
		}
		dirty += int64(len(s.data))
		if firstTs < 0 {
			firstTs = s.firstTs
		}
	}
	if dirty == 0 {
		return compact.Candidate{}, false
	}
	c := compact.Candidate{DirtyRatio: float64(dirty) / float64(clean+dirty), DirtyBytes: dirty}
	if lag := p.cfg.MaxCompactionLagMs; lag > 0 && lag < math.MaxInt64 && firstTs >= 0 && nowMs-firstTs > lag {
		c.Due = true
	}
	return c, c.Due || c.DirtyRatio >= p.cfg.MinCleanableDirtyRatio
}

// cleanPlan is what a pass read from the partition under its lock. The sealed
// segments it holds never change (only the active segment is appended to; Truncate
// and a swap replace segments instead of changing them), so the pass reads them
// without the lock.
type cleanPlan struct {
	segs     []*segment // every sealed segment with records below end
	from     int64      // first dirty offset
	end      int64      // cleanable end
	cfg      kernel.LogConfig
	aborted  []kernel.AbortedTxn
	lastData map[int64]int64
}

// Clean implements compact.Log: one pass. It maps the dirty section, then rewrites the
// log from its first segment up to the end of the mapped part, group by group
// (consecutive segments whose sizes sum to at most segment.bytes become one), each
// group swapped in under mu. Reads and appends go on during the pass; only the swaps
// take mu exclusively.
func (l *Log) Clean(ctx context.Context, env *compact.Env) (compact.Result, error) {
	pl, ok := l.planClean(env.NowMs)
	if !ok {
		return compact.Result{FirstDirty: pl.from}, nil
	}
	res := compact.Result{FirstDirty: pl.from}
	txns := compact.NewTxns(pl.aborted)
	// Map [from, end) until the map is full.
	env.Map.Reset(pl.end - pl.from)
	mp := &compact.Mapper{Map: env.Map, Txns: txns, From: pl.from, End: pl.from}
	full := false
	for i, s := range pl.segs {
		if i+1 < len(pl.segs) && pl.segs[i+1].base <= pl.from {
			continue
		}
		err := s.eachBatch(ctx, env.Throttle, func(batch []byte, bp batchPos) (bool, error) {
			if bp.base >= pl.end {
				return false, nil
			}
			ok, err := mp.Add(batch)
			full = !ok
			return ok, err
		})
		if err != nil {
			return res, fmt.Errorf("clean %v: map: %w", l.tp, err)
		}
		if full {
			break
		}
	}
	res.MapKeys, res.MapBytes = env.Map.Len(), env.Map.Bytes()
	if mp.End <= pl.from {
		return res, nil
	}
	f := &compact.Filter{
		Map: env.Map, Txns: txns, End: mp.End, NowMs: env.NowMs,
		DeleteRetentionMs: pl.cfg.DeleteRetentionMs,
		LastData:          func(pid int64) (int64, bool) { o, ok := pl.lastData[pid]; return o, ok },
	}
	// The segments to rewrite: from the first one to the one holding End-1.
	n := sort.Search(len(pl.segs), func(i int) bool { return pl.segs[i].base >= mp.End })
	groups := groupSegments(pl.segs[:n], pl.cfg.SegmentBytes)
	for k, g := range groups {
		ns, err := l.cleanGroup(ctx, env, f, g)
		if err == nil {
			// The last swap also records the progress, in the same critical section,
			// so that a Truncate after it lowers the first dirty offset again.
			firstDirty := int64(-1)
			if k == len(groups)-1 {
				firstDirty = mp.End
			}
			err = l.swap(g, ns, f.RemovedAborts, firstDirty)
		}
		if err != nil {
			res.Stats = f.Stats
			if errors.Is(err, errCleanAbandoned) {
				return res, nil
			}
			return res, fmt.Errorf("clean %v: %w", l.tp, err)
		}
	}
	res.Stats = f.Stats
	res.FirstDirty = mp.End
	return res, nil
}

// planClean copies what the pass needs.
func (l *Log) planClean(nowMs int64) (cleanPlan, bool) {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	pl := cleanPlan{from: max(p.firstDirty, p.logStart), cfg: p.cfg}
	if l.closed.Load() || !compacted(&p.cfg) {
		return pl, false
	}
	pl.end = p.cleanableEnd(nowMs, pl.from)
	if pl.from >= pl.end {
		return pl, false
	}
	for _, s := range p.segs[:len(p.segs)-1] {
		if s.base >= pl.end {
			break
		}
		pl.segs = append(pl.segs, s)
	}
	for _, a := range p.prod.AllAborted() {
		pl.aborted = append(pl.aborted, a.AbortedTxn)
	}
	pl.lastData = p.prod.LastDataOffsets()
	return pl, len(pl.segs) > 0
}

// groupSegments splits segs into runs to rewrite as one segment each: sizes summing to
// at most segBytes (always at least one segment), offsets within the 32-bit relative
// range a segment log's indexes allow (kept so both modules group alike).
func groupSegments(segs []*segment, segBytes int64) [][]*segment {
	var out [][]*segment
	for i := 0; i < len(segs); {
		j, size := i+1, int64(len(segs[i].data))
		for j < len(segs) && size+int64(len(segs[j].data)) <= segBytes && segs[j].next()-segs[i].base <= math.MaxInt32 {
			size += int64(len(segs[j].data))
			j++
		}
		out = append(out, segs[i:j])
		i = j
	}
	return out
}

// eachBatch calls fn with each batch of a sealed segment in order, until fn returns
// false. throttle, if set, is charged each batch's size first.
func (s *segment) eachBatch(ctx context.Context, throttle func(context.Context, int) error, fn func(batch []byte, bp batchPos) (bool, error)) error {
	for j, bp := range s.batches {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := len(s.data)
		if j+1 < len(s.batches) {
			end = s.batches[j+1].pos
		}
		if throttle != nil {
			if err := throttle(ctx, end-bp.pos); err != nil {
				return err
			}
		}
		more, err := fn(s.data[bp.pos:end], bp)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// cleanGroup builds the cleaned form of the segments g as one new segment at g's base.
func (l *Log) cleanGroup(ctx context.Context, env *compact.Env, f *compact.Filter, g []*segment) (*segment, error) {
	ns := &segment{base: g[0].base, firstTs: -1, maxTs: -1, createdMs: g[0].createdMs}
	for _, s := range g {
		err := s.eachBatch(ctx, env.Throttle, func(batch []byte, bp batchPos) (bool, error) {
			pos := len(ns.data)
			var err error
			if ns.data, err = f.Batch(ns.data, batch); err != nil {
				return false, err
			}
			if len(ns.data) == pos {
				return true, nil
			}
			h, err := recordbatch.ParseHeader(ns.data[pos:])
			if err != nil {
				return false, err
			}
			ns.add(batchPos{base: h.BaseOffset, last: h.LastOffset(), pos: pos, maxTs: h.MaxTimestamp, appendMs: bp.appendMs})
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	if env.Throttle != nil {
		if err := env.Throttle(ctx, len(ns.data)); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// add records a batch already in s.data.
func (s *segment) add(bp batchPos) {
	s.batches = append(s.batches, bp)
	if s.firstTs < 0 {
		s.firstTs = bp.maxTs
	}
	if bp.maxTs > s.maxTs {
		s.maxTs, s.maxTsOff = bp.maxTs, bp.base
	}
}

// swap replaces the segments g (still in the log, unchanged, sealed) by ns, which
// covers the same offsets. An empty ns replaces them only when g starts the log (it
// holds the log start offset); otherwise the old segments simply go. The aborted
// transactions whose markers the pass removed leave the producer state; firstDirty,
// when not -1, becomes the partition's first dirty offset.
func (l *Log) swap(g []*segment, ns *segment, removedAborts map[int64]bool, firstDirty int64) error {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return errCleanAbandoned
	}
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base >= g[0].base })
	if i+len(g) >= len(p.segs) { // the group must still be there, and not be the active segment
		return errCleanAbandoned
	}
	for k, s := range g {
		if p.segs[i+k] != s {
			return errCleanAbandoned
		}
	}
	segs := append([]*segment(nil), p.segs[:i]...)
	if len(ns.batches) > 0 || i == 0 {
		segs = append(segs, ns)
	}
	p.segs = append(segs, p.segs[i+len(g):]...)
	p.prod.ForgetAborted(removedAborts)
	if firstDirty >= 0 {
		p.firstDirty = firstDirty
	}
	return nil
}

var _ compact.Log = (*Log)(nil)
