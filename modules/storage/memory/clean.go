package memory

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/compact"
)

// Log compaction (cleanup.policy=compact), with the segment log's semantics: the same
// cleanable end, dirty ratio and grouping; compact.Mapper and compact.Filter decide
// what a pass keeps. See doc.go, "Compaction".

// Name implements compact.Log.
func (l *Log) Name() string { return l.tp.String() }

func compacted(cfg *kernel.LogConfig) bool { return strings.Contains(cfg.CleanupPolicy, "compact") }

// cleanableEnd is compact.CleanableEnd of the partition. mu held (read).
func (p *partition) cleanableEnd(nowMs, from int64) int64 {
	fu, unstable := p.prod.FirstUnstableOffset()
	hw := min(max(p.hw.Load(), p.logStart), p.leo())
	return compact.CleanableEnd(&p.cfg, p.segs[:len(p.segs)-1], p.segs[len(p.segs)-1].base, hw, fu, unstable, from, nowMs)
}

// Cleanable implements compact.Log (compact.Dirtiness of the partition).
func (l *Log) Cleanable(nowMs int64) (compact.Candidate, bool) {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	if l.closed.Load() || !compacted(&p.cfg) {
		return compact.Candidate{}, false
	}
	from := max(p.firstDirty, p.logStart)
	return compact.Dirtiness(&p.cfg, p.segs[:len(p.segs)-1], p.segs[len(p.segs)-1].base, from, p.cleanableEnd(nowMs, from), nowMs)
}

// cleanPlan is what a pass read from the partition under its lock. The sealed
// segments it holds never change (only the active segment is appended to; Truncate
// and a swap replace segments instead of changing them), so the pass reads them
// without the lock.
type cleanPlan = compact.Plan[*segment]

// Clean implements compact.Log: one pass. It maps the dirty section, then rewrites the
// log from its first segment up to the end of the mapped part, group by group
// (consecutive segments whose sizes sum to at most segment.bytes become one), each
// group swapped in under mu. Reads and appends go on during the pass; only the swaps
// take mu exclusively.
func (l *Log) Clean(ctx context.Context, env *compact.Env) (compact.Result, error) {
	pl, ok := l.planClean(env.NowMs)
	if !ok {
		return compact.Result{FirstDirty: pl.From}, nil
	}
	res, err := compact.Run(ctx, env, pl, func(g []*segment, f *compact.Filter, firstDirty int64) error {
		ns, err := l.cleanGroup(ctx, env, f, g)
		if err != nil {
			return err
		}
		return l.swap(g, ns, f.RemovedAborts, firstDirty)
	})
	if err != nil {
		return res, fmt.Errorf("clean %v: %w", l.tp, err)
	}
	return res, nil
}

// planClean copies what the pass needs.
func (l *Log) planClean(nowMs int64) (cleanPlan, bool) {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	from := max(p.firstDirty, p.logStart)
	if l.closed.Load() || !compacted(&p.cfg) {
		return cleanPlan{From: from}, false
	}
	hw := min(max(p.hw.Load(), p.logStart), p.leo())
	return compact.NewPlan(&p.cfg, p.segs[:len(p.segs)-1], p.segs[len(p.segs)-1].base, hw, p.prod, from, nowMs, nil)
}

// Base, Next and Size make a sealed segment a compact.Segment.
func (s *segment) Base() int64 { return s.base }
func (s *segment) Next() int64 { return s.next() }
func (s *segment) Size() int64 { return int64(len(s.data)) }

// FirstTimestamp and MaxTimestamp make it a compact.Sealed.
func (s *segment) FirstTimestamp() int64 { return s.firstTs }
func (s *segment) MaxTimestamp() int64   { return s.maxTs }

// Batches implements compact.Segment.
func (s *segment) Batches(ctx context.Context, throttle func(context.Context, int) error, fn func(batch []byte, base int64) (bool, error)) error {
	return s.eachBatch(ctx, throttle, func(batch []byte, bp batchPos) (bool, error) { return fn(batch, bp.base) })
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
		return compact.ErrAbandoned
	}
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base >= g[0].base })
	if i+len(g) >= len(p.segs) { // the group must still be there, and not be the active segment
		return compact.ErrAbandoned
	}
	for k, s := range g {
		if p.segs[i+k] != s {
			return compact.ErrAbandoned
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
