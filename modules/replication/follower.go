package replication

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// The follower side of a partition: what a fetcher does with the leader's answers.
// Every method takes Partition.mu and first checks that the partition still follows
// the same leader in the same epoch and that its log end is still the offset the
// fetch was sent at; otherwise the answer is stale (a new image re-targeted the
// partition, or another answer moved the log) and is dropped: the next fetch asks
// again from the current log end.

// followsLocked reports whether the partition still follows leader in epoch with its
// log ending at offset (mu held).
func (p *Partition) followsLocked(leader, epoch int32, offset int64) bool {
	pl := p.place.Load()
	return !p.closed && pl.leader == leader && pl.leader != p.self && pl.epoch == epoch && p.log.LogEndOffset() == offset
}

// fetchPosition is what a follower's fetch of this partition sends: its log end
// offset, the epoch of its last batch (LastFetchedEpoch) and its log start.
func (p *Partition) fetchPosition() (offset int64, lastEpoch int32, logStart int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.LogEndOffset(), p.latestEpoch(), p.log.LogStartOffset()
}

// appendFetched appends the leader's batches fetched at offset (whole batches only; a
// trailing partial batch is left for the next fetch) with their offsets
// (Log.AppendFollower), follows the leader's log start offset, and sets the follower's
// HW to min(leader HW, own LEO). It returns the bytes appended. A batch that fails its
// header or CRC check is an error (nothing after it is appended).
func (p *Partition) appendFetched(leader, epoch int32, offset int64, records []byte, leaderHW, leaderStart int64) (int, error) {
	p.mu.Lock()
	n, changed, err := p.appendFetchedLocked(leader, epoch, offset, records, leaderHW, leaderStart)
	p.mu.Unlock()
	if changed {
		p.changed()
	}
	return n, err
}

func (p *Partition) appendFetchedLocked(leader, epoch int32, offset int64, records []byte, leaderHW, leaderStart int64) (n int, changed bool, err error) {
	if !p.followsLocked(leader, epoch, offset) {
		return 0, false, nil
	}
	if cut, err := p.cutDamageLocked(); err != nil {
		return 0, false, err
	} else if cut {
		// The answer was for the old log end: ask again from the cut (offline.go).
		return 0, true, errRefetch
	}
	valid, first, verr := wholeBatches(records)
	if valid > 0 && first < offset {
		// The leader's batch holding our log end starts below it.
		if first <= p.log.LogStartOffset() {
			// It holds everything we have: the leader's log start is inside a batch
			// (DeleteRecords, or our Reset to its log start), as Kafka handles it:
			// restart the log at the batch's base and take the leader's copy; the log
			// start follows the leader's below.
			if err := p.log.Reset(first); err != nil {
				return 0, false, fmt.Errorf("restart %s at %d: %w", p.tp, first, err)
			}
			p.repairedLocked() // every old segment went
		} else {
			// Our last batch is not the leader's (a divergence the epochs did not
			// show): cut ours back to the leader's boundary.
			p.env.log.Warn("follower log ends inside a leader batch; truncating", "topic", p.tp.Topic, "partition", p.tp.Partition, "log_end", offset, "leader_batch", first)
			if err := p.truncateLocked(first); err != nil {
				return 0, false, err
			}
		}
		if leo := p.log.LogEndOffset(); p.hw.Load() > leo {
			p.setHWLocked(leo)
		}
		if p.log.LogEndOffset() != first {
			// Our batch boundary lies below the leader's: fetch again from there.
			if verr != nil {
				return 0, true, errors.Join(verr, errRefetch)
			}
			return 0, true, errRefetch
		}
	}
	if valid > 0 {
		if _, err := p.log.AppendFollower(records[:valid]); err != nil {
			if errors.Is(err, kernel.ErrLogOffline) {
				p.offline.Store(true) // cut at the next answer
			}
			return 0, false, fmt.Errorf("append fetched records to %s: %w", p.tp, err)
		}
		n, changed = valid, true
	}
	leo := p.log.LogEndOffset()
	if leaderStart > p.log.LogStartOffset() && leaderStart <= leo {
		if err := p.log.DeleteRecordsBefore(leaderStart); err != nil {
			return n, changed, fmt.Errorf("follow log start of %s: %w", p.tp, err)
		}
		changed = true
	}
	// A follower's HW is the leader's, bounded by what it has; it may move down (a new
	// leader may know a lower HW than the old one told us), as Kafka's follower does.
	if leaderHW >= 0 {
		if hw := min(leaderHW, leo); hw != p.hw.Load() {
			p.setHWLocked(hw)
			changed = true
		}
	}
	return n, changed, verr
}

// errRefetch: the answer cut the follower's log back without appending; the fetcher
// waits replica.fetch.backoff.ms before it asks again (so a leader whose answers keep
// cutting the log cannot spin the fetcher).
var errRefetch = errors.New("follower log cut back to the leader's batch boundary; fetching again")

// wholeBatches returns the length of the prefix of records made of whole batches with
// valid headers and CRCs, and the first batch's base offset (-1 when none). err is set
// when a batch is corrupt (a trailing partial batch is not an error: a fetch's byte
// limit may cut one).
func wholeBatches(records []byte) (valid int, first int64, err error) {
	first = -1
	for b := records; len(b) >= recordbatch.HeaderSize; {
		h, herr := recordbatch.ParseHeader(b)
		if herr != nil {
			return valid, first, fmt.Errorf("fetched batch at byte %d: %w", valid, herr)
		}
		size := h.Size()
		if size > len(b) {
			break // partial
		}
		if size < recordbatch.HeaderSize || h.LastOffsetDelta < 0 {
			return valid, first, fmt.Errorf("fetched batch at byte %d: length %d: %w", valid, size, kernel.ErrCorrupt)
		}
		if cerr := recordbatch.CheckCRC(b[:size]); cerr != nil {
			return valid, first, fmt.Errorf("fetched batch at offset %d: %w", h.BaseOffset, cerr)
		}
		if first < 0 {
			first = h.BaseOffset
		}
		valid += size
		b = b[size:]
	}
	return valid, first, nil
}

// truncateLocked cuts the log back to offset (Log.Truncate: the whole batch holding
// it goes) and clamps the HW to the new log end (mu held).
func (p *Partition) truncateLocked(offset int64) error {
	if err := p.log.Truncate(offset); err != nil {
		return fmt.Errorf("truncate %s to %d: %w", p.tp, offset, err)
	}
	p.repairedLocked() // Truncate cuts any damage first
	if leo := p.log.LogEndOffset(); p.hw.Load() > leo {
		p.setHWLocked(leo)
	}
	return nil
}

// truncateDiverging handles a fetch answer with a diverging epoch (the leader's
// largest epoch <= our last fetched one, and where it ends there): the log is cut back
// to the divergence point, as Kafka's follower computes it:
//   - no end offset: to our HW (what was committed);
//   - no epoch: to min(leader end, our LEO);
//   - we hold that epoch: to min(its end here, its end at the leader, our LEO);
//   - we do not (our largest epoch below it is older): to where our older epoch
//     ends; the next fetch sends that epoch and the leader checks again;
//   - we know no epochs at all: to min(leader end, our LEO).
//
// It returns the offset the log was truncated to (-1: nothing done).
func (p *Partition) truncateDiverging(leader, epoch int32, offset int64, div kmsg.FetchResponseTopicPartitionDivergingEpoch) (int64, error) {
	p.mu.Lock()
	if !p.followsLocked(leader, epoch, offset) {
		p.mu.Unlock()
		return -1, nil
	}
	leo := offset
	var target int64
	switch {
	case div.EndOffset < 0:
		target = min(p.hw.Load(), leo)
	case div.Epoch < 0:
		target = min(div.EndOffset, leo)
	default:
		fe, fend := p.log.EndOffsetForEpoch(div.Epoch)
		switch {
		case fe < 0 || fend < 0:
			target = min(div.EndOffset, leo)
		case fe == div.Epoch:
			target = min(fend, div.EndOffset, leo)
		default:
			target = min(fend, leo)
		}
	}
	target = max(target, 0)
	err := p.truncateLocked(target)
	// An offline log is cut at its damage first (offline.go): possibly below target.
	target = min(target, p.log.LogEndOffset())
	p.mu.Unlock()
	p.changed()
	if err != nil {
		return -1, err
	}
	return target, nil
}

// errLeaderRange: a ListOffsets answer of the leader was unusable.
var errLeaderRange = errors.New("leader offsets unknown")

// fixOutOfRange handles OFFSET_OUT_OF_RANGE for a fetch at offset, given the leader's
// log start and log end offsets: a log end past the leader's is cut back to it (the
// leader never had those records: a divergence the epochs did not catch), a log end
// below the leader's log start restarts the log empty at it (Log.Reset: what we have
// was deleted at the leader). It returns what it did ("" when nothing).
func (p *Partition) fixOutOfRange(leader, epoch int32, offset, leaderStart, leaderEnd int64) (string, error) {
	if leaderStart < 0 || leaderEnd < leaderStart {
		return "", fmt.Errorf("%s: start %d end %d: %w", p.tp, leaderStart, leaderEnd, errLeaderRange)
	}
	p.mu.Lock()
	if !p.followsLocked(leader, epoch, offset) {
		p.mu.Unlock()
		return "", nil
	}
	var what string
	var err error
	switch {
	case offset > leaderEnd:
		what = "truncated"
		err = p.truncateLocked(leaderEnd)
	case offset < leaderStart:
		what = "reset"
		if err = p.log.Reset(leaderStart); err == nil {
			p.repairedLocked()
			p.setHWLocked(leaderStart)
		}
	}
	p.mu.Unlock()
	if what != "" {
		p.changed()
	}
	if err != nil {
		return "", fmt.Errorf("%s %s at %d: %w", what, p.tp, offset, err)
	}
	return what, nil
}
