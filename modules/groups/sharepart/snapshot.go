package sharepart

import (
	"fmt"
	"math"
)

// StateBatch is a range of offsets with one persisted state and delivery count
// (a ShareSnapshot's state batch). Its State is never Acquired.
type StateBatch struct {
	First, Last   int64
	State         State
	DeliveryCount int16
}

// Snapshot is the durable state of a share-partition, as Kafka's share group
// state (KIP-932 ShareSnapshot) holds it: SPSO and the window's ranges, ascending
// and contiguous from StartOffset up to SPEO-1. Locks are not persisted: an
// Acquired offset is stored as Available with its delivery count, so a new
// leader delivers it again.
type Snapshot struct {
	StartOffset int64
	Batches     []StateBatch
}

// Snapshot returns the partition's durable state; Version tells when it changed.
func (p *Partition) Snapshot() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Snapshot{StartOffset: p.start}
	for _, r := range p.runs {
		st := persisted(r.state)
		if n := len(s.Batches); n > 0 && s.Batches[n-1].State == st && s.Batches[n-1].DeliveryCount == r.count {
			s.Batches[n-1].Last = r.last
			continue
		}
		s.Batches = append(s.Batches, StateBatch{First: r.first, Last: r.last, State: st, DeliveryCount: r.count})
	}
	return s
}

// Restore builds a partition from a snapshot, after checking it: StartOffset >=
// 0; batches ascending and not overlapping, each within [StartOffset,
// StartOffset+MaxInFlight) with First <= Last, a state of Available, Acknowledged
// or Archived and a delivery count >= 0. A bad snapshot gives an error wrapping
// ErrInvalidSnapshot.
//
// SPEO becomes the last batch's Last+1 (StartOffset without batches); offsets
// between batches are Available with delivery count 0. Available offsets whose
// count already reached DeliveryLimit are archived (and reported by
// TakeArchivedAtLimit), and SPSO moves over leading done offsets; either makes
// Version 1, else it is 0.
func Restore(cfg Config, s Snapshot) (*Partition, error) {
	p := New(cfg, s.StartOffset)
	if s.StartOffset < 0 {
		return nil, fmt.Errorf("%w: start offset %d", ErrInvalidSnapshot, s.StartOffset)
	}
	next := s.StartOffset
	for _, b := range s.Batches {
		switch {
		case b.Last < b.First:
			return nil, fmt.Errorf("%w: batch %d-%d reversed", ErrInvalidSnapshot, b.First, b.Last)
		case b.Last == math.MaxInt64:
			return nil, fmt.Errorf("%w: batch %d-%d ends at the last offset", ErrInvalidSnapshot, b.First, b.Last)
		case b.First < next:
			return nil, fmt.Errorf("%w: batch %d-%d before offset %d", ErrInvalidSnapshot, b.First, b.Last, next)
		case b.Last-s.StartOffset >= p.cfg.MaxInFlight:
			return nil, fmt.Errorf("%w: batch %d-%d beyond %d in-flight offsets from %d",
				ErrInvalidSnapshot, b.First, b.Last, p.cfg.MaxInFlight, s.StartOffset)
		case b.State != Available && b.State != Acknowledged && b.State != Archived:
			return nil, fmt.Errorf("%w: batch %d-%d in state %v", ErrInvalidSnapshot, b.First, b.Last, b.State)
		case b.DeliveryCount < 0:
			return nil, fmt.Errorf("%w: batch %d-%d delivery count %d", ErrInvalidSnapshot, b.First, b.Last, b.DeliveryCount)
		}
		if b.First > next {
			p.appendRun(b.First-1, run{state: Available})
		}
		r := run{state: b.State, count: b.DeliveryCount}
		if r.state == Available && int(r.count) >= p.cfg.DeliveryLimit {
			p.atLimit = appendRange(p.atLimit, b.First, b.Last, r.count)
			r.state = Archived
		}
		p.appendRun(b.Last, r)
		next = b.Last + 1
	}
	start := p.start
	p.trimFront()
	p.dirty = false
	if len(p.atLimit) > 0 || p.start != start {
		p.version = 1
	}
	return p, nil
}
