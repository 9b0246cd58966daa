package sharepart

import (
	"errors"
	"math"
	"slices"
	"time"
)

// mrec is one offset of the reference model.
type mrec struct {
	state    State
	member   string
	count    int16
	deadline time.Time
}

// model is the reference the randomized and fuzz tests compare a Partition
// with: a map with one entry per in-flight offset, every rule applied offset by
// offset, as plainly as it can be written.
type model struct {
	cfg        Config
	now        time.Time
	start, end int64
	recs       map[int64]*mrec
	atLimit    []Range          // one entry per offset, in the order archived
	reason     map[int64]string // why each done offset is done
}

func newModel(cfg Config, start int64) *model {
	return &model{cfg: cfg.withDefaults(), start: start, end: start, recs: map[int64]*mrec{}, reason: map[int64]string{}}
}

func (m *model) acquiredCount() (n int64) {
	for _, r := range m.recs {
		if r.state == Acquired {
			n++
		}
	}
	return n
}

// normalize moves SPSO over done offsets.
func (m *model) normalize() {
	for m.start < m.end && done(m.recs[m.start].state) {
		delete(m.recs, m.start)
		m.start++
	}
}

func (m *model) finish(o int64, st State, why string) {
	r := m.recs[o]
	r.state, r.member, r.deadline = st, "", time.Time{}
	if done(st) {
		m.reason[o] = why
	}
}

func (m *model) release(o int64) {
	r := m.recs[o]
	if int(r.count) >= m.cfg.DeliveryLimit {
		m.atLimit = append(m.atLimit, Range{o, o, r.count})
		m.finish(o, Archived, "limit")
		return
	}
	m.finish(o, Available, "")
}

func (m *model) advance(now time.Time) {
	if now.After(m.now) {
		m.now = now
	}
	for o := m.start; o < m.end; o++ {
		if r := m.recs[o]; r.state == Acquired && !r.deadline.After(m.now) {
			m.release(o)
		}
	}
	m.normalize()
}

func (m *model) bound() int64 {
	if m.start > math.MaxInt64-m.cfg.MaxInFlight {
		return math.MaxInt64
	}
	return m.start + m.cfg.MaxInFlight
}

// skip archives offsets [f, l] never to be delivered; false if the window
// cannot reach l.
func (m *model) skip(f, l int64, why string) bool {
	for o := max(f, m.start); o <= l; o++ {
		if o < m.end {
			if r := m.recs[o]; r.state == Available {
				m.finish(o, Archived, why)
			}
			continue
		}
		m.normalize()
		switch {
		case o > m.end:
			return false
		case m.start == m.end:
			m.reason[o] = why
			m.start, m.end = o+1, o+1
		case o >= m.bound():
			return false
		default:
			m.recs[o] = &mrec{state: Archived}
			m.reason[o] = why
			m.end++
		}
	}
	m.normalize()
	return true
}

func (m *model) acquire(member string, from int64, bs []Batch, maxRecords int, aligned bool, now time.Time) []Range {
	m.advance(now)
	if member == "" || maxRecords <= 0 {
		return nil
	}
	var out []Range
	got := 0
	deadline := m.now.Add(m.cfg.LockDuration)
	prevEnd := int64(math.MinInt64)
	locks := m.acquiredCount()
outer:
	for _, b := range bs {
		if got >= maxRecords || locks >= int64(m.cfg.MaxLocks) {
			break
		}
		if b.First < 0 || b.Last < b.First || b.Last == math.MaxInt64 || b.Last < prevEnd {
			continue
		}
		hole, lo := max(from, prevEnd), max(b.First, prevEnd)
		prevEnd = b.Last + 1
		if b.First > hole && !m.skip(hole, b.First-1, "absent") {
			break
		}
		if b.Skip {
			if !m.skip(lo, b.Last, "skip") {
				break
			}
			continue
		}
		for o := max(lo, m.start); o <= b.Last; o++ {
			if locks >= int64(m.cfg.MaxLocks) || !aligned && got >= maxRecords {
				break outer
			}
			if o < m.end {
				if r := m.recs[o]; r.state == Available {
					*r = mrec{Acquired, member, min(r.count+1, math.MaxInt16), deadline}
					out = appendRange(out, o, o, r.count)
					got++
					locks++
				}
				continue
			}
			if o > m.end || o >= m.bound() {
				break outer
			}
			m.recs[o] = &mrec{Acquired, member, 1, deadline}
			m.end++
			out = appendRange(out, o, o, 1)
			got++
			locks++
		}
	}
	m.normalize()
	return out
}

func (m *model) ack(member string, acks []AckBatch, now time.Time) error {
	m.advance(now)
	for i, a := range acks {
		if a.First < 0 || a.Last < a.First || i > 0 && a.First <= acks[i-1].Last {
			return ErrInvalidRequest
		}
		if len(a.Types) != 1 && (a.Last-a.First >= math.MaxInt32 || len(a.Types) != int(a.Last-a.First+1)) {
			return ErrInvalidRequest
		}
		for _, t := range a.Types {
			if t != Gap && t != Accept && t != Release && t != Reject && t != Renew {
				return ErrInvalidRequest
			}
		}
	}
	for _, a := range acks {
		if a.First < m.start || a.Last >= m.end {
			return ErrInvalidRecordState
		}
		for o := a.First; o <= a.Last; o++ {
			if r := m.recs[o]; r.state != Acquired || r.member != member {
				return ErrInvalidRecordState
			}
		}
	}
	for _, a := range acks {
		for o := a.First; o <= a.Last; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.First]
			}
			switch t {
			case Accept:
				m.finish(o, Acknowledged, "accept")
			case Release:
				m.release(o)
			case Reject:
				m.finish(o, Archived, "reject")
			case Gap:
				m.finish(o, Archived, "gap")
			case Renew:
				m.recs[o].deadline = m.now.Add(m.cfg.LockDuration)
			}
		}
	}
	m.normalize()
	return nil
}

func (m *model) releaseMember(member string, now time.Time) {
	m.advance(now)
	for o := m.start; o < m.end; o++ {
		if r := m.recs[o]; r.state == Acquired && r.member == member {
			m.release(o)
		}
	}
	m.normalize()
}

func (m *model) advanceStart(ls int64) {
	if ls <= m.start {
		return
	}
	for o := m.start; o < ls; o++ {
		delete(m.recs, o)
		if m.reason[o] == "" {
			m.reason[o] = "truncated"
		}
	}
	m.start = ls
	m.end = max(m.end, ls)
	m.normalize()
}

func (m *model) reset(off int64) {
	off = max(off, 0)
	clear(m.recs)
	clear(m.reason)
	m.start, m.end = off, off
}

func (m *model) fetchOffset() (int64, bool) {
	locked := m.acquiredCount() >= int64(m.cfg.MaxLocks)
	for o := m.start; o < m.end; o++ {
		if m.recs[o].state == Available {
			return o, !locked
		}
	}
	return m.end, !locked && m.end < m.bound()
}

func (m *model) nextDeadline() (time.Time, bool) {
	var t time.Time
	for _, r := range m.recs {
		if r.state == Acquired && (t.IsZero() || r.deadline.Before(t)) {
			t = r.deadline
		}
	}
	return t, !t.IsZero()
}

func (m *model) stats() (acquired, available, window int64) {
	for _, r := range m.recs {
		switch r.state {
		case Acquired:
			acquired++
		case Available:
			available++
		}
	}
	return acquired, available, m.end - m.start
}

// projection is what a snapshot holds, offset by offset.
type projection struct {
	start, end int64
	recs       []StateBatch // one per offset
}

func (a projection) equal(b projection) bool {
	return a.start == b.start && a.end == b.end && slices.Equal(a.recs, b.recs)
}

func (m *model) projection() projection {
	pr := projection{start: m.start, end: m.end}
	for o := m.start; o < m.end; o++ {
		r := m.recs[o]
		pr.recs = append(pr.recs, StateBatch{o, o, persisted(r.state), r.count})
	}
	return pr
}

// failover is what a new leader restoring the last snapshot sees: every lock
// gone, as if it had expired (archived at the delivery limit), and nothing
// pending for the dead-letter topic from before.
func (m *model) failover() {
	m.atLimit = nil
	for o := m.start; o < m.end; o++ {
		if m.recs[o].state == Acquired {
			m.release(o)
		}
	}
	m.normalize()
	m.now = time.Time{} // a new partition has seen no time yet
}

// errKind names the sentinel err wraps, for comparing model and partition.
func errKind(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, ErrInvalidRequest):
		return "INVALID_REQUEST"
	case errors.Is(err, ErrInvalidRecordState):
		return "INVALID_RECORD_STATE"
	}
	return "other: " + err.Error()
}
