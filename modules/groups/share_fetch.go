package groups

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/sharepart"
)

// shareDefaultMaxRecords is the record budget of a ShareFetch that names none (v0).
const shareDefaultMaxRecords = 500

// shareMaxResponseBytes caps the record bytes of one ShareFetch response (Kafka's
// fetch.max.bytes default, 55 MiB), since they are copied from the log into memory.
const shareMaxResponseBytes = 55 << 20

// errShareReadDone stops a log read once the budget is met.
var errShareReadDone = errors.New("share read budget met")

// shareBudget is what a ShareFetch may still return.
type shareBudget struct {
	records int
	bytes   int
	aligned bool // ShareAcquireMode 0: whole batches
}

// shareFetched is one partition's share fetch result.
type shareFetched struct {
	records  []byte
	acquired []sharepart.Range
}

// fetch acquires records of tp for member of group within b, and returns them with
// the batches that hold them (whole batches, as Kafka returns them). It acquires
// nothing when the share-partition has no room (record locks) or no new data.
func (l *shareLeader) fetch(ctx context.Context, group, member string, tp kernel.TopicPartition, b *shareBudget) (shareFetched, *kerr.Error) {
	if b.records <= 0 || b.bytes <= 0 {
		return shareFetched{}, nil
	}
	sp, e := l.part(ctx, group, tp)
	if e != nil {
		return shareFetched{}, e
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.dead {
		return shareFetched{}, kerr.NotLeaderForPartition
	}
	logStart, hw, ok := l.m.poffs.Offsets(tp)
	if !ok {
		return shareFetched{}, kerr.NotLeaderForPartition
	}
	if sp.p.StartOffset() < logStart {
		sp.p.AdvanceStart(logStart) // retention or DeleteRecords passed records never delivered
	}
	from, ok := sp.p.FetchOffset()
	if !ok || from >= hw {
		return shareFetched{}, nil
	}
	cfg := l.m.shareConfig(group)
	var (
		batches []sharepart.Batch
		raws    [][]byte
		size    int
		offs    int64
	)
	read := func(batch []byte) error {
		h, err := recordbatch.ParseHeader(batch)
		if err != nil {
			return err
		}
		if h.LastOffset() < from {
			return nil
		}
		batches = append(batches, sharepart.Batch{First: h.BaseOffset, Last: h.LastOffset(), Skip: h.IsControl()})
		raws = append(raws, slices.Clone(batch))
		size += len(batch)
		if !h.IsControl() {
			offs += h.LastOffset() - max(h.BaseOffset, from) + 1
		}
		if size >= b.bytes || offs >= int64(b.records) {
			return errShareReadDone
		}
		return nil
	}
	var err error
	if cfg.readCommitted {
		_, err = l.m.parts.ReadStable(ctx, tp, from, read)
	} else {
		err = l.m.parts.ReadCommitted(ctx, tp, from, read)
	}
	if err != nil && !errors.Is(err, errShareReadDone) {
		if errors.Is(err, kernel.ErrNotLeader) {
			return shareFetched{}, kerr.NotLeaderForPartition
		}
		return shareFetched{}, kerr.UnknownServerError
	}
	if len(batches) == 0 {
		return shareFetched{}, nil
	}
	acquired := sp.p.Acquire(member, from, batches, b.records, b.aligned, l.m.now())
	if len(acquired) == 0 {
		return shareFetched{}, nil
	}
	var out shareFetched
	out.acquired = acquired
	for i, bt := range batches {
		if bt.Skip || !overlaps(acquired, bt.First, bt.Last) {
			continue
		}
		out.records = append(out.records, raws[i]...)
	}
	b.records -= int(rangeCount(acquired))
	b.bytes -= len(out.records)
	return out, nil
}

// overlaps reports whether any range of rs shares an offset with [first, last].
func overlaps(rs []sharepart.Range, first, last int64) bool {
	for _, r := range rs {
		if r.First <= last && r.Last >= first {
			return true
		}
	}
	return false
}

// ackBatch is one acknowledgement batch of a request, either API's.
type ackBatch struct {
	first, last int64
	types       []int8
}

// ack applies member's acknowledgements of tp and writes the resulting state before
// returning: INVALID_RECORD_STATE when an offset is not acquired by member (all or
// nothing), INVALID_REQUEST for malformed batches, or the state write's error.
func (l *shareLeader) ack(ctx context.Context, group, member string, tp kernel.TopicPartition, batches []ackBatch) *kerr.Error {
	sp, e := l.part(ctx, group, tp)
	if e != nil {
		return e
	}
	acks := make([]sharepart.AckBatch, 0, len(batches))
	for _, b := range batches {
		types := make([]sharepart.AckType, len(b.types))
		for i, t := range b.types {
			types[i] = sharepart.AckType(t)
		}
		acks = append(acks, sharepart.AckBatch{First: b.first, Last: b.last, Types: types})
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.dead {
		return kerr.NotLeaderForPartition
	}
	if err := sp.p.Acknowledge(member, acks, l.m.now()); err != nil {
		if errors.Is(err, sharepart.ErrInvalidRecordState) {
			return kerr.InvalidRecordState
		}
		return kerr.InvalidRequest
	}
	if e := l.persist(ctx, sp); e != nil {
		// The acknowledgement is not known to be durable: unload the share-partition,
		// so the next request reloads the state the coordinator holds (with the
		// records still acquired, hence redelivered, unless the write landed after
		// all), instead of serving acknowledgements that may not exist.
		l.drop(sp)
		return e
	}
	return nil
}
