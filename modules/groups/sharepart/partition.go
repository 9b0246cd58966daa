package sharepart

import (
	"errors"
	"math"
	"sync"
	"time"
)

// Errors returned by Acknowledge. The broker maps them to Kafka's codes at the
// response edge; both wrap a description of the offending batch.
var (
	// ErrInvalidRequest: a malformed acknowledgement (INVALID_REQUEST).
	ErrInvalidRequest = errors.New("invalid acknowledgement")
	// ErrInvalidRecordState: an offset is not currently acquired by the member
	// (INVALID_RECORD_STATE).
	ErrInvalidRecordState = errors.New("record not acquired by member")
	// ErrInvalidSnapshot: Restore was given a snapshot that breaks the window's rules.
	ErrInvalidSnapshot = errors.New("invalid share-partition snapshot")
)

// State is the state of one in-flight offset.
type State int8

// The states of an offset; see the diagram in doc.go. The values are Kafka's
// RecordState values as the share group state records store them.
const (
	Available    State = 0
	Acquired     State = 1
	Acknowledged State = 2
	Archived     State = 4
)

// String returns the name Kafka uses for the state.
func (s State) String() string {
	switch s {
	case Available:
		return "AVAILABLE"
	case Acquired:
		return "ACQUIRED"
	case Acknowledged:
		return "ACKNOWLEDGED"
	case Archived:
		return "ARCHIVED"
	}
	return "UNKNOWN"
}

// done reports whether an offset in state s is finished: never delivered again.
func done(s State) bool { return s == Acknowledged || s == Archived }

// persisted is what a Snapshot shows of state s: a lock does not survive a leader
// change, so Acquired persists as Available.
func persisted(s State) State {
	if s == Acquired {
		return Available
	}
	return s
}

// Config bounds one share-partition. The zero value of a field means its default.
type Config struct {
	// LockDuration is how long an acquisition lasts before the records are
	// released (group.share.record.lock.duration.ms). Default 30s.
	LockDuration time.Duration
	// DeliveryLimit is how many times a record is delivered before it is
	// archived instead (group.share.delivery.count.limit). Default 5; at most
	// math.MaxInt16, since delivery counts are int16.
	DeliveryLimit int
	// MaxLocks caps the offsets Acquired at once
	// (group.share.partition.max.record.locks). Default 2000.
	MaxLocks int
	// MaxInFlight caps SPEO-SPSO: no offset at or beyond SPSO+MaxInFlight is
	// added to the window. Default 10×MaxLocks.
	MaxInFlight int64
}

func (c Config) withDefaults() Config {
	if c.LockDuration <= 0 {
		c.LockDuration = 30 * time.Second
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = 5
	}
	c.DeliveryLimit = min(c.DeliveryLimit, math.MaxInt16)
	if c.MaxLocks <= 0 {
		c.MaxLocks = 2000
	}
	c.MaxLocks = min(c.MaxLocks, math.MaxInt32)
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 10 * int64(c.MaxLocks)
	}
	return c
}

// Range is a range of offsets with one delivery count: what Acquire returns
// (Kafka's AcquiredRecords, the count after this delivery) and what
// TakeArchivedAtLimit returns.
type Range struct {
	First, Last   int64
	DeliveryCount int16
}

// Partition is the state of one share-partition: the in-flight window of one
// share group on one topic-partition. Its methods are safe for concurrent use;
// none blocks.
type Partition struct {
	mu  sync.Mutex
	cfg Config
	now time.Time // latest time seen; the clock never goes back

	start, end int64 // SPSO and SPEO
	runs       []run // the window [start, end); see doc.go for the invariants

	acquired, available int64     // offsets in Acquired and Available runs
	earliest            time.Time // no lock expires before this (valid while acquired > 0)

	atLimit []Range // archived at the delivery limit since the last TakeArchivedAtLimit

	version uint64 // see Version
	dirty   bool   // this call changed what Snapshot shows
}

// New returns a partition with an empty window at SPSO = SPEO = start (a
// negative start means 0).
func New(cfg Config, start int64) *Partition {
	start = max(start, 0)
	return &Partition{cfg: cfg.withDefaults(), start: start, end: start}
}

// StartOffset returns the share-partition start offset (SPSO): every offset
// below it is done.
func (p *Partition) StartOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start
}

// EndOffset returns the share-partition end offset (SPEO): the first offset
// never added to the window.
func (p *Partition) EndOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.end
}

// Version returns a counter that grows (by one per call) whenever a call changed
// what Snapshot shows: SPSO, SPEO, or an offset's persisted state or delivery
// count. Acquisition changes delivery counts, so it counts; lock renewals and
// releases of a lock back to Available do not. The broker persists a new
// snapshot when the version moved.
func (p *Partition) Version() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

// Stats returns the number of Acquired and of Available offsets in the window,
// and the window's size SPEO-SPSO.
func (p *Partition) Stats() (acquired, available, window int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acquired, p.available, p.end - p.start
}

// FetchOffset returns where the caller should start reading the log: the first
// Available offset in the window, else SPEO. ok is false when Acquire could not
// acquire anything now: MaxLocks offsets are Acquired, or there is no Available
// offset and SPEO is at SPSO+MaxInFlight.
func (p *Partition) FetchOffset() (offset int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	locked := p.acquired >= int64(p.cfg.MaxLocks)
	for _, r := range p.runs {
		if r.state == Available {
			return r.first, !locked
		}
	}
	return p.end, !locked && p.end < p.bound()
}

// NextDeadline returns the earliest lock deadline, when Tick has something to
// do; ok is false when nothing is Acquired.
func (p *Partition) NextDeadline() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acquired == 0 {
		return time.Time{}, false
	}
	p.earliest = p.minDeadline()
	return p.earliest, true
}

// Tick releases every lock whose deadline is at or before now: its offsets
// become Available again, or Archived when their delivery count reached
// DeliveryLimit (reported by TakeArchivedAtLimit).
func (p *Partition) Tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(now)
	p.commit()
}

// TakeArchivedAtLimit returns, and forgets, the ranges archived since the last
// call because their delivery count reached DeliveryLimit, with their counts, in
// the order they were archived: the broker sends those records to a dead-letter
// topic. Rejected records are not included. The list grows until it is taken.
func (p *Partition) TakeArchivedAtLimit() []Range {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.atLimit
	p.atLimit = nil
	return out
}

// AdvanceStart tells the partition the log now starts at logStart (retention,
// DeleteRecords): offsets below it are forgotten, whatever their state (their
// locks too), and SPSO, and SPEO if below, move up to it. A no-op if logStart <=
// SPSO.
func (p *Partition) AdvanceStart(logStart int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if logStart <= p.start {
		return
	}
	if logStart >= p.end {
		p.forget(logStart)
	} else {
		i := p.splitAt(logStart)
		for _, r := range p.runs[:i] {
			p.account(r, -1)
		}
		p.dropFront(i)
		p.start = logStart
		p.trimFront()
	}
	p.dirty = true
	p.commit()
}

// Reset forgets the window and sets SPSO = SPEO = offset (a negative offset
// means 0), as AlterShareGroupOffsets does; the caller only calls it when the
// group has no members. Archived-at-limit ranges not yet taken are kept.
func (p *Partition) Reset(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	offset = max(offset, 0)
	if p.start != offset || p.end != offset {
		p.dirty = true
	}
	p.forget(offset)
	p.commit()
}

// forget empties the window at offset.
func (p *Partition) forget(offset int64) {
	clear(p.runs)
	p.runs = p.runs[:0]
	p.acquired, p.available = 0, 0
	p.start, p.end = offset, offset
}

// bound is the first offset that may not be added to the window.
func (p *Partition) bound() int64 {
	if p.start > math.MaxInt64-p.cfg.MaxInFlight {
		return math.MaxInt64
	}
	return p.start + p.cfg.MaxInFlight
}

// advance moves the clock to now (never back) and releases the locks due.
func (p *Partition) advance(now time.Time) {
	if now.After(p.now) {
		p.now = now
	}
	if p.acquired == 0 || p.now.Before(p.earliest) {
		return
	}
	for off := p.start; off < p.end; {
		r := p.runs[p.find(off)]
		if r.state == Acquired && !r.deadline.After(p.now) {
			p.update(r.first, r.last, p.release)
		}
		off = r.last + 1
	}
	p.trimFront()
	if p.acquired > 0 {
		p.earliest = p.minDeadline()
	}
}

// minDeadline returns the earliest deadline of an Acquired run; acquired > 0.
func (p *Partition) minDeadline() time.Time {
	var t time.Time
	for _, r := range p.runs {
		if r.state == Acquired && (t.IsZero() || r.deadline.Before(t)) {
			t = r.deadline
		}
	}
	return t
}

// lockUntil notes that a lock now lasts until t.
func (p *Partition) lockUntil(t time.Time, hadLocks bool) {
	if !hadLocks || t.Before(p.earliest) {
		p.earliest = t
	}
}

// release is what a lock's end (Release, timeout, ReleaseMember) makes of an
// Acquired run: Available, or Archived, and reported, at the delivery limit.
func (p *Partition) release(r run) run {
	if int(r.count) >= p.cfg.DeliveryLimit {
		p.atLimit = appendRange(p.atLimit, r.first, r.last, r.count)
		r.state = Archived
		return r
	}
	r.state = Available
	return r
}

// commit ends a mutating call: the version moves if the call changed the snapshot.
func (p *Partition) commit() {
	if p.dirty {
		p.version++
		p.dirty = false
	}
}

// appendRange appends [first, last] with count c to rs, extending the last
// range when it is adjacent with the same count.
func appendRange(rs []Range, first, last int64, c int16) []Range {
	if n := len(rs); n > 0 && rs[n-1].Last+1 == first && rs[n-1].DeliveryCount == c {
		rs[n-1].Last = last
		return rs
	}
	return append(rs, Range{First: first, Last: last, DeliveryCount: c})
}
