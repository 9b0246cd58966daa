package sharepart

import (
	"fmt"
	"time"
)

// AckType is how a member acknowledges a record; the values are Kafka's.
type AckType int8

// The acknowledgement types.
const (
	Gap     AckType = 0 // the offset is absent (compacted or a control record): archived
	Accept  AckType = 1 // processed: Acknowledged
	Release AckType = 2 // give it back: Available, or Archived at the delivery limit
	Reject  AckType = 3 // unprocessable: Archived, never redelivered
	Renew   AckType = 4 // keep it: the lock lasts LockDuration from now (KIP-1222)
)

// String returns the type's name.
func (t AckType) String() string {
	switch t {
	case Gap:
		return "GAP"
	case Accept:
		return "ACCEPT"
	case Release:
		return "RELEASE"
	case Reject:
		return "REJECT"
	case Renew:
		return "RENEW"
	}
	return fmt.Sprintf("AckType(%d)", int8(t))
}

// AckBatch acknowledges the offsets [First, Last]: with one type when Types has
// one element, else with one type per offset (exactly Last-First+1 of them).
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// Acknowledge applies member's acknowledgements, at now, all or nothing.
//
// It first checks every batch: ErrInvalidRequest for a negative or reversed
// range, a Types of the wrong length, an unknown type, or a batch not strictly
// after the previous one; then ErrInvalidRecordState if any offset is not
// Acquired by member now (never acquired, already acknowledged, held by another
// member, or released when its lock expired). On error nothing changes, except
// that locks due at now expire first, as by Tick.
//
// Accept makes an offset Acknowledged; Release makes it Available (keeping its
// delivery count) or Archived if the count reached DeliveryLimit (reported by
// TakeArchivedAtLimit); Reject and Gap make it Archived; Renew keeps it Acquired
// with a lock deadline of now+LockDuration.
func (p *Partition) Acknowledge(member string, acks []AckBatch, now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(now)
	defer p.commit()
	if err := validate(acks); err != nil {
		return err
	}
	for _, a := range acks {
		if !p.heldBy(member, a.First, a.Last) {
			return fmt.Errorf("%w: offsets %d-%d", ErrInvalidRecordState, a.First, a.Last)
		}
	}
	for _, a := range acks {
		if len(a.Types) == 1 {
			p.ack(a.First, a.Last, a.Types[0])
			continue
		}
		for i := 0; i < len(a.Types); {
			j := i + 1
			for j < len(a.Types) && a.Types[j] == a.Types[i] {
				j++
			}
			p.ack(a.First+int64(i), a.First+int64(j-1), a.Types[i])
			i = j
		}
	}
	p.trimFront()
	return nil
}

// validate checks the form of acknowledgement batches.
func validate(acks []AckBatch) error {
	for i, a := range acks {
		if a.First < 0 || a.Last < a.First {
			return fmt.Errorf("%w: range %d-%d", ErrInvalidRequest, a.First, a.Last)
		}
		if i > 0 && a.First <= acks[i-1].Last {
			return fmt.Errorf("%w: batch %d-%d overlaps or precedes %d-%d",
				ErrInvalidRequest, a.First, a.Last, acks[i-1].First, acks[i-1].Last)
		}
		if n := uint64(len(a.Types)); n != 1 && n != uint64(a.Last-a.First)+1 {
			return fmt.Errorf("%w: %d types for offsets %d-%d", ErrInvalidRequest, n, a.First, a.Last)
		}
		for _, t := range a.Types {
			if t < Gap || t > Renew {
				return fmt.Errorf("%w: acknowledgement type %d for offsets %d-%d", ErrInvalidRequest, t, a.First, a.Last)
			}
		}
	}
	return nil
}

// heldBy reports whether every offset of [first, last] is Acquired by member.
func (p *Partition) heldBy(member string, first, last int64) bool {
	if first < p.start || last >= p.end {
		return false
	}
	for i := p.find(first); i < len(p.runs) && p.runs[i].first <= last; i++ {
		if r := p.runs[i]; r.state != Acquired || r.member != member {
			return false
		}
	}
	return true
}

// ack applies one type to [first, last], all Acquired by the caller.
func (p *Partition) ack(first, last int64, t AckType) {
	switch t {
	case Accept:
		p.update(first, last, func(r run) run { r.state = Acknowledged; return r })
	case Release:
		p.update(first, last, p.release)
	case Reject, Gap:
		p.update(first, last, func(r run) run { r.state = Archived; return r })
	case Renew:
		d := p.now.Add(p.cfg.LockDuration)
		p.update(first, last, func(r run) run { r.deadline = d; return r })
		p.lockUntil(d, true)
	}
}

// ReleaseMember releases everything member holds (its share session closed, or
// it left the group): Available, or Archived at the delivery limit. Locks due at
// now expire first, as by Tick.
func (p *Partition) ReleaseMember(member string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(now)
	defer p.commit()
	if p.acquired == 0 {
		return
	}
	for off := p.start; off < p.end; {
		r := p.runs[p.find(off)]
		if r.state == Acquired && r.member == member {
			p.update(r.first, r.last, p.release)
		}
		off = r.last + 1
	}
	p.trimFront()
}
