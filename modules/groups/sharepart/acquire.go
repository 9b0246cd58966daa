package sharepart

import (
	"math"
	"time"
)

// Batch is one record batch the caller read from the log, in log order.
type Batch struct {
	First, Last int64
	// Skip marks a batch never delivered: a control batch, or a batch of an
	// aborted transaction. Its offsets are archived.
	Skip bool
}

// acquisition is one Acquire call in progress.
type acquisition struct {
	member   string
	max      int64 // maxRecords
	aligned  bool
	deadline time.Time
	got      int64
	out      []Range
}

// Acquire acquires for member, at now, Available offsets of the given batches
// (in-flight ones, and new ones from SPEO on) until maxRecords offsets are
// acquired, and returns the acquired ranges, ascending, each with one delivery
// count (the count after this delivery). Each acquisition increments the offset's
// delivery count and locks it until now+LockDuration.
//
// from is the offset the caller started reading the log at (normally what
// FetchOffset returned), and batches are every batch that read returned, in log
// order (the first one may start before from). Offsets the read proved absent
// from the log (compacted away), those in [from, first batch) and between two
// batches, are archived without delivery if they are Available or new
// (from SPEO on); so are the offsets of Skip batches.
//
// batchAligned (Kafka's ShareAcquireMode 0, the default) takes whole batches
// and may exceed maxRecords to end at a batch boundary; otherwise (mode 1,
// record limit) at most maxRecords offsets are acquired. In both modes no more
// than MaxLocks offsets are ever Acquired at once and nothing at or beyond
// SPSO+MaxInFlight is added to the window. Malformed batches (negative or
// reversed offsets) are ignored, and a batch overlapping an earlier one counts
// only past the earlier one's end. An empty member or maxRecords <= 0 acquires
// nothing. Locks due at now are released first, as by Tick.
func (p *Partition) Acquire(member string, from int64, batches []Batch, maxRecords int, batchAligned bool, now time.Time) []Range {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(now)
	defer p.commit()
	if member == "" || maxRecords <= 0 {
		return nil
	}
	a := acquisition{
		member:   member,
		max:      int64(maxRecords),
		aligned:  batchAligned,
		deadline: p.now.Add(p.cfg.LockDuration),
	}
	hadLocks := p.acquired > 0
	prevEnd := int64(math.MinInt64) // one past the last batch seen
	for _, b := range batches {
		if a.got >= a.max || p.acquired >= int64(p.cfg.MaxLocks) {
			break
		}
		if b.First < 0 || b.Last < b.First || b.Last == math.MaxInt64 || b.Last < prevEnd {
			continue
		}
		hole, lo := max(from, prevEnd), max(b.First, prevEnd)
		prevEnd = b.Last + 1
		if b.First > hole && !p.skip(hole, b.First-1) {
			break
		}
		if b.Skip {
			if !p.skip(lo, b.Last) {
				break
			}
			continue
		}
		if !p.acquireRange(&a, lo, b.Last) {
			break
		}
	}
	if a.got > 0 {
		p.lockUntil(a.deadline, hadLocks)
	}
	return a.out
}

// acquireRange acquires the Available and new offsets of [lo, hi] for a, within
// the limits. It returns false when a limit stops the whole acquisition.
func (p *Partition) acquireRange(a *acquisition, lo, hi int64) bool {
	lo = max(lo, p.start)
	for lo <= hi {
		n := int64(p.cfg.MaxLocks) - p.acquired
		if !a.aligned {
			n = min(n, a.max-a.got)
		}
		if n <= 0 {
			return false
		}
		if lo < p.end {
			r := p.runs[p.find(lo)]
			end := min(r.last, hi)
			if r.state == Available {
				end = upTo(lo, n, end)
				c := r.count
				if c < math.MaxInt16 {
					c++
				}
				p.update(lo, end, func(x run) run {
					x.state, x.count, x.member, x.deadline = Acquired, c, a.member, a.deadline
					return x
				})
				a.take(lo, end, c)
			}
			lo = end + 1
			continue
		}
		bound := p.bound()
		if lo > p.end || lo >= bound {
			return false
		}
		end := upTo(lo, n, min(hi, bound-1))
		p.appendRun(end, run{state: Acquired, count: 1, member: a.member, deadline: a.deadline})
		a.take(lo, end, 1)
		lo = end + 1
	}
	return true
}

// upTo returns the last of n offsets from lo, at most last (>= lo).
func upTo(lo, n, last int64) int64 {
	if n-1 >= last-lo {
		return last
	}
	return lo + n - 1
}

func (a *acquisition) take(first, last int64, c int16) {
	a.out = appendRange(a.out, first, last, c)
	a.got += last - first + 1
}

// skip archives the offsets of [f, l] that are never to be delivered (absent
// from the log, or in a Skip batch): the Available ones in the window keep their
// count, new ones get count 0. It returns false if the window could not be
// extended through l: SPEO would pass the MaxInFlight bound, or offsets between
// SPEO and f are unknown.
func (p *Partition) skip(f, l int64) bool {
	f = max(f, p.start)
	if f > l {
		return true
	}
	if f < p.end {
		p.update(f, min(l, p.end-1), func(r run) run {
			if r.state == Available {
				r.state = Archived
			}
			return r
		})
		p.trimFront()
	}
	if l < p.end {
		return true
	}
	if f > p.end {
		return false
	}
	for p.end <= l {
		if len(p.runs) == 0 { // all done: nothing to remember
			p.start, p.end = l+1, l+1
			p.dirty = true
			return true
		}
		bound := p.bound()
		if p.end >= bound {
			return false
		}
		p.appendRun(min(l, bound-1), run{state: Archived})
	}
	return true
}
