package sharepart

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const lock = 30 * time.Second

// runCount returns the number of runs the window is kept as.
func (p *Partition) runCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.runs)
}

// checkInvariants fails t unless p keeps every invariant listed in doc.go.
func checkInvariants(t testing.TB, p *Partition) {
	t.Helper()
	if err := invariantError(p); err != nil {
		t.Fatalf("invariant broken: %v\n%s", err, p.dump())
	}
}

func invariantError(p *Partition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg := p.cfg
	if p.start < 0 || p.end < p.start {
		return fmt.Errorf("window [%d, %d)", p.start, p.end)
	}
	if p.end-p.start > cfg.MaxInFlight {
		return fmt.Errorf("window [%d, %d) over MaxInFlight %d", p.start, p.end, cfg.MaxInFlight)
	}
	if (len(p.runs) == 0) != (p.start == p.end) {
		return fmt.Errorf("%d runs for window [%d, %d)", len(p.runs), p.start, p.end)
	}
	var acquired, available int64
	var earliest time.Time
	next := p.start
	for i, r := range p.runs {
		if r.first != next || r.last < r.first {
			return fmt.Errorf("run %d [%d, %d] does not start at %d", i, r.first, r.last, next)
		}
		next = r.last + 1
		if i == 0 && done(r.state) {
			return fmt.Errorf("first run %d-%d is %v", r.first, r.last, r.state)
		}
		if i > 0 && p.runs[i-1].sameAs(r) {
			return fmt.Errorf("runs %d and %d not merged", i-1, i)
		}
		switch r.state {
		case Acquired:
			if r.member == "" || r.deadline.IsZero() {
				return fmt.Errorf("acquired run %d-%d without holder or deadline", r.first, r.last)
			}
			acquired += r.size()
			if earliest.IsZero() || r.deadline.Before(earliest) {
				earliest = r.deadline
			}
		case Available, Acknowledged, Archived:
			if r.member != "" || !r.deadline.IsZero() {
				return fmt.Errorf("%v run %d-%d has holder %q or deadline", r.state, r.first, r.last, r.member)
			}
			if r.state == Available {
				available += r.size()
				if int(r.count) >= cfg.DeliveryLimit {
					return fmt.Errorf("available run %d-%d at count %d", r.first, r.last, r.count)
				}
			}
		default:
			return fmt.Errorf("run %d-%d in state %v", r.first, r.last, r.state)
		}
		if r.count < 0 {
			return fmt.Errorf("run %d-%d count %d", r.first, r.last, r.count)
		}
	}
	if len(p.runs) > 0 && next != p.end {
		return fmt.Errorf("runs end at %d, SPEO %d", next, p.end)
	}
	if acquired != p.acquired || available != p.available {
		return fmt.Errorf("counters %d/%d, runs hold %d/%d", p.acquired, p.available, acquired, available)
	}
	if acquired > int64(cfg.MaxLocks) {
		return fmt.Errorf("%d acquired over MaxLocks %d", acquired, cfg.MaxLocks)
	}
	if acquired > 0 && earliest.Before(p.earliest) {
		return fmt.Errorf("lock until %v before the earliest noted %v", earliest, p.earliest)
	}
	if p.dirty {
		return errors.New("dirty between calls")
	}
	return nil
}

// dump renders the window, one run per line.
func (p *Partition) dump() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "SPSO %d SPEO %d acquired %d available %d version %d\n", p.start, p.end, p.acquired, p.available, p.version)
	for _, r := range p.runs {
		fmt.Fprintf(&b, "  %d-%d %v c=%d", r.first, r.last, r.state, r.count)
		if r.state == Acquired {
			fmt.Fprintf(&b, " %s until %v", r.member, r.deadline.Sub(t0))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// offsetState is one offset as tests see it.
type offsetState struct {
	state    State
	member   string
	count    int16
	deadline time.Time
}

// states returns the state of every offset of [first, last] (zero values
// outside the window).
func (p *Partition) states(first, last int64) []offsetState {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []offsetState
	for o := first; o <= last; o++ {
		var s offsetState
		if o >= p.start && o < p.end {
			r := p.runs[p.find(o)]
			s = offsetState{r.state, r.member, r.count, r.deadline}
		}
		out = append(out, s)
	}
	return out
}

// wantStates checks [first, last] are all in state st with count c (and, when
// Acquired, held by member).
func wantStates(t testing.TB, p *Partition, first, last int64, st State, member string, c int16) {
	t.Helper()
	for i, s := range p.states(first, last) {
		if s.state != st || s.count != c || (st == Acquired && s.member != member) {
			t.Fatalf("offset %d: %v %q c=%d, want %v %q c=%d\n%s",
				first+int64(i), s.state, s.member, s.count, st, member, c, p.dump())
		}
	}
}

// wantWindow checks SPSO and SPEO.
func wantWindow(t testing.TB, p *Partition, start, end int64) {
	t.Helper()
	if s, e := p.StartOffset(), p.EndOffset(); s != start || e != end {
		t.Fatalf("window [%d, %d), want [%d, %d)\n%s", s, e, start, end, p.dump())
	}
}

func wantRanges(t testing.TB, what string, got []Range, want ...Range) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// batches builds Batches from pairs of offsets.
func batches(pairs ...int64) []Batch {
	var bs []Batch
	for i := 0; i+1 < len(pairs); i += 2 {
		bs = append(bs, Batch{First: pairs[i], Last: pairs[i+1]})
	}
	return bs
}

func ack(first, last int64, types ...AckType) AckBatch {
	return AckBatch{First: first, Last: last, Types: types}
}

// mustAck acknowledges and checks the invariants.
func mustAck(t testing.TB, p *Partition, member string, now time.Time, acks ...AckBatch) {
	t.Helper()
	if err := p.Acknowledge(member, acks, now); err != nil {
		t.Fatalf("ack %v by %s: %v\n%s", acks, member, err, p.dump())
	}
	checkInvariants(t, p)
}

// acquire acquires, batch-aligned, from batches read at FetchOffset, and checks
// the invariants.
func acquire(t testing.TB, p *Partition, member string, bs []Batch, maxRecords int, now time.Time) []Range {
	t.Helper()
	from, _ := p.FetchOffset()
	got := p.Acquire(member, from, bs, maxRecords, true, now)
	checkInvariants(t, p)
	return got
}
