package sharepart

import (
	"slices"
	"time"
)

// run is a range [first, last] of in-flight offsets that share one state,
// delivery count, holder and lock deadline. The window is a slice of runs; see
// doc.go for the invariants.
type run struct {
	first, last int64
	state       State
	count       int16
	member      string    // the holder; "" unless Acquired
	deadline    time.Time // when the lock expires; zero unless Acquired
}

func (r run) size() int64 { return r.last - r.first + 1 }

// sameAs reports whether r and o differ only in their offsets, so adjacent
// they must be one run.
func (r run) sameAs(o run) bool {
	return r.state == o.state && r.count == o.count && r.member == o.member && r.deadline.Equal(o.deadline)
}

// account adds (sign 1) or removes (sign -1) r to the state counters.
func (p *Partition) account(r run, sign int64) {
	switch r.state {
	case Acquired:
		p.acquired += sign * r.size()
	case Available:
		p.available += sign * r.size()
	}
}

// find returns the index of the run holding off, which is in [start, end).
func (p *Partition) find(off int64) int {
	lo, hi := 0, len(p.runs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.runs[m].last < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// splitAt makes off the first offset of a run and returns that run's index,
// len(runs) when off is end. off is in [start, end].
func (p *Partition) splitAt(off int64) int {
	if off >= p.end {
		return len(p.runs)
	}
	i := p.find(off)
	r := p.runs[i]
	if r.first == off {
		return i
	}
	p.runs = slices.Insert(p.runs, i+1, r)
	p.runs[i].last = off - 1
	p.runs[i+1].first = off
	return i + 1
}

// update replaces each run within [first, last] (clipped to the window, runs
// split at its ends) with f of it; f must keep the run's offsets. Runs are merged
// again afterwards, counters kept and the snapshot marked changed if it is.
func (p *Partition) update(first, last int64, f func(run) run) {
	first, last = max(first, p.start), min(last, p.end-1)
	if first > last {
		return
	}
	i := p.splitAt(first)
	j := p.splitAt(last + 1)
	for k := i; k < j; k++ {
		old := p.runs[k]
		r := f(old)
		r.first, r.last = old.first, old.last
		if r.state != Acquired {
			r.member, r.deadline = "", time.Time{}
		}
		if persisted(r.state) != persisted(old.state) || r.count != old.count {
			p.dirty = true
		}
		p.account(old, -1)
		p.account(r, 1)
		p.runs[k] = r
	}
	p.merge(i-1, j)
}

// merge joins equal adjacent runs among runs[lo..hi].
func (p *Partition) merge(lo, hi int) {
	lo, hi = max(lo, 0), min(hi, len(p.runs)-1)
	if lo >= hi {
		return
	}
	w := lo
	for k := lo + 1; k <= hi; k++ {
		if p.runs[w].sameAs(p.runs[k]) {
			p.runs[w].last = p.runs[k].last
			continue
		}
		w++
		p.runs[w] = p.runs[k]
	}
	if gone := hi - w; gone > 0 {
		n := len(p.runs)
		copy(p.runs[w+1:], p.runs[hi+1:])
		clear(p.runs[n-gone:])
		p.runs = p.runs[:n-gone]
	}
}

// appendRun adds the new offsets [end, last] to the window as r.
func (p *Partition) appendRun(last int64, r run) {
	r.first, r.last = p.end, last
	p.account(r, 1)
	p.dirty = true
	p.end = last + 1
	if n := len(p.runs); n > 0 && p.runs[n-1].sameAs(r) {
		p.runs[n-1].last = last
		return
	}
	p.runs = append(p.runs, r)
}

// trimFront forgets the leading done runs: SPSO moves to the first offset not
// done, or to SPEO.
func (p *Partition) trimFront() {
	k := 0
	for k < len(p.runs) && done(p.runs[k].state) {
		k++
	}
	if k == 0 {
		return
	}
	p.dirty = true
	if k == len(p.runs) {
		p.start = p.end
	} else {
		p.start = p.runs[k].first
	}
	p.dropFront(k)
}

// dropFront removes runs[:k] (already uncounted or done).
func (p *Partition) dropFront(k int) {
	if k == 0 {
		return
	}
	if rest := len(p.runs) - k; rest <= 64 {
		copy(p.runs, p.runs[k:])
		clear(p.runs[rest:])
		p.runs = p.runs[:rest]
		return
	}
	clear(p.runs[:k])
	p.runs = p.runs[k:]
}
