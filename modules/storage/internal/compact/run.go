package compact

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/producers"
)

// ErrAbandoned: the log changed under a pass (truncation, retention, close) and a
// group's swap was refused; the pass stops without error and the next one starts
// over. A storage's rewrite returns it (wrapped or not).
var ErrAbandoned = errors.New("compact: log changed during cleaning")

// Segment is a sealed segment as a pass reads it.
type Segment interface {
	// Base is the segment's base offset, Next the offset after its last batch, Size
	// its bytes.
	Base() int64
	Next() int64
	Size() int64
	// Batches calls fn with each whole batch (and its base offset) in order, until fn
	// returns false; throttle (nil: none) is asked before each batch. fn must not keep
	// batch.
	Batches(ctx context.Context, throttle func(context.Context, int) error, fn func(batch []byte, base int64) (bool, error)) error
}

// Plan is what a pass copied from its log under the log's lock.
type Plan[S Segment] struct {
	Segs              []S   // the sealed segments with records below End, in order
	From, End         int64 // the cleanable range [first dirty offset, cleanable end)
	SegmentBytes      int64 // segment.bytes: the largest group rewritten as one segment
	DeleteRetentionMs int64
	Aborted           []kernel.AbortedTxn
	LastData          map[int64]int64 // producer id -> last offset of its last data batch
}

// Run is one pass over p, shared by the storage modules: it maps [From, End) until
// the map is full, then hands each group of segments to rewrite, from the log's first
// segment to the one holding the end of the mapped part. Groups are consecutive
// segments whose sizes sum to at most SegmentBytes (always at least one), offsets
// within the 32-bit relative range of an index. rewrite writes the group's cleaned
// form through f and swaps it in; for the last group firstDirty is the new first dirty
// offset, to be set in the same critical section as the swap (so that a Truncate
// after it lowers it again), and -1 for the others.
func Run[S Segment](ctx context.Context, env *Env, p Plan[S], rewrite func(g []S, f *Filter, firstDirty int64) error) (Result, error) {
	res := Result{FirstDirty: p.From}
	txns := NewTxns(p.Aborted)
	env.Map.Reset(p.End - p.From)
	mp := &Mapper{Map: env.Map, Txns: txns, From: p.From, End: p.From}
	full := false
	for i, s := range p.Segs {
		if i+1 < len(p.Segs) && p.Segs[i+1].Base() <= p.From {
			continue
		}
		err := s.Batches(ctx, env.Throttle, func(batch []byte, base int64) (bool, error) {
			if base >= p.End {
				return false, nil
			}
			yield()
			ok, err := mp.Add(batch)
			full = !ok
			return ok, err
		})
		if err != nil {
			return res, fmt.Errorf("map: %w", err)
		}
		if full {
			break
		}
	}
	res.MapKeys, res.MapBytes = env.Map.Len(), env.Map.Bytes()
	if mp.End <= p.From {
		return res, nil
	}
	f := &Filter{
		Map: env.Map, Txns: txns, End: mp.End, NowMs: env.NowMs,
		DeleteRetentionMs: p.DeleteRetentionMs,
		LastData:          func(pid int64) (int64, bool) { o, ok := p.LastData[pid]; return o, ok },
	}
	n := sort.Search(len(p.Segs), func(i int) bool { return p.Segs[i].Base() >= mp.End })
	groups := group(p.Segs[:n], p.SegmentBytes)
	for k, g := range groups {
		firstDirty := int64(-1)
		if k == len(groups)-1 {
			firstDirty = mp.End
		}
		if err := rewrite(g, f, firstDirty); err != nil {
			res.Stats = f.Stats
			if errors.Is(err, ErrAbandoned) {
				return res, nil
			}
			return res, err
		}
	}
	res.Stats = f.Stats
	res.FirstDirty = mp.End
	return res, nil
}

// yield lets every runnable goroutine run before the cleaner goes on with the next
// batch. A pass is CPU-bound for as long as it lasts, and Go's scheduler would let it
// keep a P for a whole 10 ms time slice while request goroutines wait behind it: on a
// two-core broker that added about a slice to produce p99 (BENCHMARKS.md). The
// cleaner works in the background; the requests come first.
func yield() { runtime.Gosched() }

func group[S Segment](segs []S, segBytes int64) [][]S {
	var out [][]S
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].Size()
		for j < len(segs) && size+segs[j].Size() <= segBytes && segs[j].Next()-segs[i].Base() <= math.MaxInt32 {
			size += segs[j].Size()
			j++
		}
		out = append(out, segs[i:j])
		i = j
	}
	return out
}

// Sealed is what the cleanable range and the dirty ratio need of a sealed segment.
type Sealed interface {
	Base() int64
	Size() int64
	FirstTimestamp() int64 // max timestamp of its first batch; -1 when empty
	MaxTimestamp() int64   // its largest batch max timestamp; -1 when empty
}

// CleanableEnd is the first offset a pass may not touch, for a log whose sealed
// segments are sealed (in order; the active segment starts at activeBase): the lowest
// of the active segment's base, the high watermark (above it a record may still be
// truncated, and with it the value that superseded an older one), the first offset of
// an open transaction (firstUnstable, when unstable), and the base of the first
// segment at or after from holding a record younger than min.compaction.lag.ms.
func CleanableEnd[S Sealed](cfg *kernel.LogConfig, sealed []S, activeBase, hw, firstUnstable int64, unstable bool, from, nowMs int64) int64 {
	end := min(activeBase, hw)
	if unstable {
		end = min(end, firstUnstable)
	}
	if lag := cfg.MinCompactionLagMs; lag > 0 {
		for i, s := range sealed {
			if nextBase(sealed, i, activeBase) <= from {
				continue
			}
			if s.MaxTimestamp() > nowMs-lag {
				end = min(end, s.Base())
				break
			}
		}
	}
	return end
}

// Dirtiness is Log.Cleanable's answer for the range [from, end): the dirty ratio is
// the bytes of the sealed segments at or after from and below end, over those plus
// the cleaned segments below from (Kafka's min.cleanable.dirty.ratio); Due when the
// oldest dirty segment's first batch is older than max.compaction.lag.ms.
func Dirtiness[S Sealed](cfg *kernel.LogConfig, sealed []S, activeBase, from, end, nowMs int64) (Candidate, bool) {
	if from >= end {
		return Candidate{}, false
	}
	var clean, dirty int64
	firstTs := int64(-1)
	for i, s := range sealed {
		if s.Base() >= end {
			break
		}
		if nextBase(sealed, i, activeBase) <= from {
			clean += s.Size()
			continue
		}
		dirty += s.Size()
		if firstTs < 0 {
			firstTs = s.FirstTimestamp()
		}
	}
	if dirty == 0 {
		return Candidate{}, false
	}
	c := Candidate{DirtyRatio: float64(dirty) / float64(clean+dirty), DirtyBytes: dirty}
	if lag := cfg.MaxCompactionLagMs; lag > 0 && lag < math.MaxInt64 && firstTs >= 0 && nowMs-firstTs > lag {
		c.Due = true
	}
	return c, c.Due || c.DirtyRatio >= cfg.MinCleanableDirtyRatio
}

func nextBase[S Sealed](sealed []S, i int, activeBase int64) int64 {
	if i+1 < len(sealed) {
		return sealed[i+1].Base()
	}
	return activeBase
}

// CleanSegment is a segment a pass can both plan with and read.
type CleanSegment interface {
	Segment
	Sealed
}

// NewPlan is the plan of a pass over a log with sealed segments sealed (its active
// segment starts at activeBase), first dirty offset from and producer state prod, at
// nowMs: the cleanable range, the sealed segments with records below its end (pin,
// when set, is called on each: a storage that reads files keeps them open), the
// aborted transactions and each producer's last data batch. ok is false when there is
// nothing to clean. Call it under the log's lock.
func NewPlan[S CleanSegment](cfg *kernel.LogConfig, sealed []S, activeBase, hw int64, prod *producers.State, from, nowMs int64, pin func(S)) (p Plan[S], ok bool) {
	p = Plan[S]{From: from, SegmentBytes: cfg.SegmentBytes, DeleteRetentionMs: cfg.DeleteRetentionMs}
	fu, unstable := prod.FirstUnstableOffset()
	p.End = CleanableEnd(cfg, sealed, activeBase, hw, fu, unstable, from, nowMs)
	if p.From >= p.End {
		return p, false
	}
	for _, s := range sealed {
		if s.Base() >= p.End {
			break
		}
		if pin != nil {
			pin(s)
		}
		p.Segs = append(p.Segs, s)
	}
	for _, a := range prod.AllAborted() {
		p.Aborted = append(p.Aborted, a.AbortedTxn)
	}
	p.LastData = prod.LastDataOffsets()
	return p, len(p.Segs) > 0
}
