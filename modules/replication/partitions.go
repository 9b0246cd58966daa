package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// Errors of the kernel.Partitions seam (besides kernel.ErrNotLeader, kernel.ErrCorrupt,
// ErrNotEnoughReplicas and ctx.Err()).
var (
	// ErrNotEnoughReplicasAfterAppend: the records were appended, but when the HW passed
	// them the ISR was smaller than min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	// The records stay in the log; a retry may duplicate them.
	ErrNotEnoughReplicasAfterAppend = errors.New("in-sync replicas fewer than min.insync.replicas after append")
	// ErrRecordsRejected: valid batches the topic does not accept (larger than
	// max.message.bytes or segment.bytes, timestamps out of bounds, control batches).
	ErrRecordsRejected = errors.New("records rejected by the topic's limits")
	// ErrStopping: the module stopped while Append waited for the HW.
	ErrStopping = errStopped
)

// readCommittedChunk bounds one Log.Read of ReadCommitted.
const readCommittedChunk = 1 << 20

// Append appends records to tp as its leader and waits until they are committed; see
// kernel.Partitions. It takes the same path as a Produce with acks=all: validation
// (corrupt input wraps kernel.ErrCorrupt), the max timestamp rewrite, leader epoch
// stamping, offset assignment, then the purgatory until the HW passes the last offset.
// records is not modified (Append works on a copy). It may write internal topics.
func (m *Module) Append(ctx context.Context, tp kernel.TopicPartition, records []byte) (kernel.AppendResult, error) {
	p := m.partition(tp)
	if p == nil {
		return kernel.AppendResult{}, fmt.Errorf("append to %s: %w", tp, kernel.ErrNotLeader)
	}
	if !p.IsLeader() {
		return kernel.AppendResult{}, fmt.Errorf("append to %s: %w", tp, kernel.ErrNotLeader)
	}
	cfg := p.Config()
	if int64(len(records)) > cfg.SegmentBytes {
		return kernel.AppendResult{}, fmt.Errorf("append to %s: %d bytes exceed segment.bytes: %w", tp, len(records), ErrRecordsRejected)
	}
	records = slices.Clone(records)
	pc := produceCtx{m: m, version: (&kmsg.ProduceRequest{}).MaxVersion(), now: m.now().UnixMilli()}
	var out kmsg.ProduceResponseTopicPartition
	if code, msg := pc.validate(tp, records, cfg, &out); code != 0 {
		if code == kerr.CorruptMessage.Code || code == kerr.InvalidRecord.Code {
			return kernel.AppendResult{}, fmt.Errorf("append to %s: %s: %w", tp, msg, kernel.ErrCorrupt)
		}
		return kernel.AppendResult{}, fmt.Errorf("append to %s: %s: %w", tp, msg, ErrRecordsRejected)
	}
	res, epoch, err := p.appendLeader(records, true)
	switch {
	case errors.Is(err, ErrNotLeader):
		return res, fmt.Errorf("append to %s: %w", tp, kernel.ErrNotLeader)
	case errors.Is(err, ErrClosed):
		return res, fmt.Errorf("append to %s: %w (%w)", tp, kernel.ErrNotLeader, ErrClosed)
	case err != nil:
		return res, err
	}
	m.produceBytes.Add(int64(len(records)))
	p.stats.in(int64(len(records)), res.LastOffset-res.BaseOffset+1)
	var werr error
	try := func() bool {
		done, err := p.ackState(res.LastOffset, epoch)
		switch {
		case !done:
			return false
		case errors.Is(err, ErrClosed):
			werr = fmt.Errorf("append to %s: %w (%w)", tp, kernel.ErrNotLeader, ErrClosed)
		case errors.Is(err, ErrNotLeader):
			werr = fmt.Errorf("append to %s: %w", tp, kernel.ErrNotLeader)
		case err != nil:
			werr = fmt.Errorf("append to %s: %w", tp, err)
		}
		return true
	}
	done, err := m.pg.wait(ctx, []kernel.TopicPartition{tp}, time.Duration(math.MaxInt64), try)
	switch {
	case err != nil:
		return res, err // ctx.Err() or ErrStopping
	case !done: // unreachable: the timeout is ~292 years
		return res, fmt.Errorf("append to %s: %w", tp, context.DeadlineExceeded)
	}
	return res, werr
}

// ReadCommitted calls fn with each batch of tp below the high watermark as of the call,
// starting with the batch holding offset (or the log start); see kernel.Partitions. It
// reads in chunks of at most 1 MiB (a batch larger than that whole), copying file
// chunks into one reused buffer: a cold path (coordinator loading). Only the leader
// serves it (kernel.ErrNotLeader otherwise).
func (m *Module) ReadCommitted(ctx context.Context, tp kernel.TopicPartition, offset int64, fn func(batch []byte) error) error {
	_, err := m.readBelow(ctx, tp, offset, false, fn)
	return err
}

// ReadStable is ReadCommitted for read_committed readers (kernel.Partitions): below
// the last stable offset, control batches and aborted transactions' batches left out.
func (m *Module) ReadStable(ctx context.Context, tp kernel.TopicPartition, offset int64, fn func(batch []byte) error) (int64, error) {
	return m.readBelow(ctx, tp, offset, true, fn)
}

// readBelow reads tp from offset up to the HW as of the call, or, when stable, up to
// the LSO as of the call, skipping control batches and batches of transactions
// aborted below it (a transactional batch of producer P at offset B is aborted when
// an aborted transaction of P spans B: FirstOffset <= B < LastOffset, its marker).
func (m *Module) readBelow(ctx context.Context, tp kernel.TopicPartition, offset int64, stable bool, fn func(batch []byte) error) (int64, error) {
	p := m.partition(tp)
	if p == nil || !p.IsLeader() {
		return offset, fmt.Errorf("read %s: %w", tp, kernel.ErrNotLeader)
	}
	hw, lso := p.stableOffsets()
	off := max(offset, p.log.LogStartOffset())
	var aborted []kernel.AbortedTxn
	if stable {
		hw = lso
		aborted = p.log.AbortedTxns(nil, off, lso)
		inner := fn
		fn = func(batch []byte) error {
			attrs := binary.BigEndian.Uint16(batch[recordbatch.OffAttributes:])
			if attrs&recordbatch.AttrControl != 0 {
				return nil
			}
			if attrs&recordbatch.AttrTransactional != 0 && len(aborted) > 0 {
				pid := int64(binary.BigEndian.Uint64(batch[recordbatch.OffProducerID:]))
				base := int64(binary.BigEndian.Uint64(batch[recordbatch.OffBaseOffset:]))
				for _, a := range aborted {
					if a.ProducerID == pid && a.FirstOffset <= base && base < a.LastOffset {
						return nil
					}
				}
			}
			return inner(batch)
		}
	}
	var buf []byte
	for off < hw {
		if err := ctx.Err(); err != nil {
			return off, err
		}
		rr, err := p.log.Read(off, readCommittedChunk, hw, true)
		if err != nil {
			if errors.Is(err, kernel.ErrOffsetOutOfRange) {
				if lso := p.log.LogStartOffset(); off < lso {
					off = lso // retention moved the log start meanwhile
					continue
				}
			}
			return off, fmt.Errorf("read %s at %d: %w", tp, off, err)
		}
		buf, err = copyChunks(buf[:0], &rr)
		rr.Release()
		if err != nil {
			return off, fmt.Errorf("read %s at %d: %w", tp, off, err)
		}
		if len(buf) == 0 {
			return off, nil
		}
		next := off
		err = recordbatch.Split(buf, func(h recordbatch.Header, batch []byte) error {
			next = h.LastOffset() + 1
			return fn(batch)
		})
		if err != nil {
			return off, err
		}
		if next <= off {
			return off, fmt.Errorf("read %s at %d: no progress: %w", tp, off, kernel.ErrCorrupt)
		}
		off = next
	}
	return off, nil
}

// copyChunks appends the bytes of rr's chunks to dst.
func copyChunks(dst []byte, rr *kernel.ReadResult) ([]byte, error) {
	for i := range rr.Chunks {
		c := &rr.Chunks[i]
		if c.File == nil {
			dst = append(dst, c.Bytes...)
			continue
		}
		n := len(dst)
		dst = slices.Grow(dst, int(c.N))[:n+int(c.N)]
		if _, err := c.File.ReadAt(dst[n:], c.Off); err != nil {
			return dst[:n], err
		}
	}
	return dst, nil
}

// Leader reports whether this broker leads tp, and with which leader epoch.
func (m *Module) Leader(tp kernel.TopicPartition) (int32, bool) {
	p := m.partition(tp)
	if p == nil {
		return -1, false
	}
	pl := p.place.Load()
	return pl.epoch, pl.leader == p.self
}

// Offsets returns tp's log start offset and high watermark if this broker leads it;
// see kernel.PartitionOffsets.
func (m *Module) Offsets(tp kernel.TopicPartition) (int64, int64, bool) {
	p := m.partition(tp)
	if p == nil || !p.IsLeader() {
		return 0, 0, false
	}
	return p.log.LogStartOffset(), p.HighWatermark(), true
}

var (
	_ kernel.Partitions       = (*Module)(nil)
	_ kernel.PartitionOffsets = (*Module)(nil)
	_ kernel.PartitionWaiter  = (*Module)(nil)
)

// WaitPartitions implements kernel.PartitionWaiter with the purgatory fetches wait in.
func (m *Module) WaitPartitions(ctx context.Context, tps []kernel.TopicPartition, timeout time.Duration, try func() bool) bool {
	ok, _ := m.pg.wait(ctx, tps, timeout, try)
	return ok
}
