// Package batches holds record-batch helpers shared by the storage implementations:
// locating a record by timestamp inside a batch, and the roll and retention rules that
// both implementations must apply identically.
//
// # Invariants
//
// The helpers only read the bytes they are given; they never modify or retain them.
//
// # Concurrency
//
// Everything here is a pure function and safe for concurrent use.
package batches

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// FirstAtOrAfter returns the offset and timestamp of the first record in batch (a whole
// v2 batch with header h) whose timestamp is >= ts and whose offset is >= minOffset.
//
// Records of an uncompressed batch are walked by their framing only. A compressed batch
// is decompressed with a recordbatch.Decoder (this is not a hot path). A LogAppendTime
// batch needs neither: every record has the batch's MaxTimestamp. If the records cannot
// be decoded, the batch's first eligible offset and its MaxTimestamp are returned. ok is
// false when no record qualifies.
func FirstAtOrAfter(batch []byte, h recordbatch.Header, ts, minOffset int64) (offset, timestamp int64, ok bool) {
	if h.MaxTimestamp < ts || h.LastOffset() < minOffset {
		return 0, 0, false
	}
	if h.Attributes&recordbatch.AttrLogAppendTime != 0 {
		return max(h.BaseOffset, minOffset), h.MaxTimestamp, true
	}
	if h.Codec() != recordbatch.CodecNone {
		var d recordbatch.Decoder
		_, err := d.Records(batch, func(r *recordbatch.Record) error {
			if r.Offset >= minOffset && r.Timestamp >= ts {
				offset, timestamp, ok = r.Offset, r.Timestamp, true
				return errFound
			}
			return nil
		})
		if ok {
			return offset, timestamp, true
		}
		if err == nil {
			return 0, 0, false
		}
		return max(h.BaseOffset, minOffset), h.MaxTimestamp, true
	}
	b := batch[recordbatch.HeaderSize:]
	for i := int32(0); i < h.RecordCount && len(b) > 0; i++ {
		length, n := binary.Varint(b)
		if n <= 0 || length < 0 || int64(len(b)-n) < length {
			break
		}
		rec := b[n : n+int(length)]
		b = b[n+int(length):]
		if len(rec) < 1 {
			break
		}
		tsDelta, m := binary.Varint(rec[1:])
		if m <= 0 {
			break
		}
		offDelta, k := binary.Varint(rec[1+m:])
		if k <= 0 {
			break
		}
		off := h.BaseOffset + offDelta
		rts := h.BaseTimestamp + tsDelta
		if off >= minOffset && rts >= ts {
			return off, rts, true
		}
	}
	// Framing we cannot follow: fall back to the batch as a whole.
	return max(h.BaseOffset, minOffset), h.MaxTimestamp, true
}

// errFound stops a record iteration early.
var errFound = errors.New("found")

// Corrupt wraps err (a recordbatch parse error) so that errors.Is(err, kernel.ErrCorrupt).
func Corrupt(err error) error { return fmt.Errorf("%w: %w", kernel.ErrCorrupt, err) }

// RollInfo is what the roll rule needs to know about the active segment.
type RollInfo struct {
	Size         int64 // bytes in the segment
	FirstBatchTs int64 // max timestamp of the segment's first batch; -1 when unknown
	CreatedMs    int64 // wall-clock creation time of the segment, ms
	BaseOffset   int64
}

// ShouldRoll reports whether an append of n bytes whose batches have the largest
// timestamp maxTs and the last offset lastOffset must go to a new segment. An empty
// segment is never rolled. The rule is Kafka's: segment.bytes, segment.ms measured from
// the first batch's timestamp (or the creation time when no batch has one) less the
// segment's jitter, and the
// 32-bit relative offsets and positions of the index files.
func ShouldRoll(cfg *kernel.LogConfig, s RollInfo, n int64, maxTs, lastOffset, nowMs int64) bool {
	if s.Size == 0 {
		return false
	}
	if cfg.SegmentBytes > 0 && s.Size+n > cfg.SegmentBytes {
		return true
	}
	if s.Size+n > 1<<31-1 || lastOffset-s.BaseOffset > 1<<31-1 {
		return true
	}
	if cfg.SegmentMs > 0 {
		waited := nowMs - s.CreatedMs
		if s.FirstBatchTs >= 0 && maxTs >= 0 {
			waited = maxTs - s.FirstBatchTs
		}
		if waited > cfg.SegmentMs-jitter(cfg.SegmentJitterMs, s.BaseOffset) {
			return true
		}
	}
	return false
}

// jitter is the segment's share of segment.jitter.ms: Kafka draws it at random per
// segment; here it is derived from the base offset, so it is the same after a restart
// and in both implementations.
func jitter(jitterMs, base int64) int64 {
	if jitterMs <= 0 {
		return 0
	}
	return int64(uint64(base) * 0x9E3779B97F4A7C15 % uint64(jitterMs))
}

// SegmentSummary is what retention needs to know about one segment.
type SegmentSummary struct {
	Size  int64
	MaxTs int64 // largest batch MaxTimestamp in the segment; -1 when empty
	Next  int64 // the offset after the segment's last record
}

// Deletable returns how many of the oldest segments retention removes: segments wholly
// below logStart (never the last, active one), then segments whose largest timestamp is
// older than retention.ms, then the oldest ones while the log exceeds retention.bytes by
// at least their size. Each rule deletes a prefix, as Kafka does.
//
// The time and size rules apply only when cfg.CleanupPolicy includes delete (an empty
// policy counts as delete): as in Kafka, a compact-only log is never trimmed by
// retention.ms or retention.bytes, only by its log start offset (DeleteRecords).
//
// The time and size rules may take the active segment too when it is not empty (Kafka
// does): the result is then len(segs), and the caller must first roll a new, empty
// active segment at the log end offset, then delete every old segment, so the log is
// empty but keeps its offsets.
func Deletable(cfg *kernel.LogConfig, segs []SegmentSummary, logStart, nowMs int64) int {
	if len(segs) == 0 {
		return 0
	}
	last := len(segs) - 1
	limit := last // the log start rule never takes the active segment
	if segs[last].Size > 0 {
		limit = len(segs)
	}
	n := 0
	for n < last && segs[n].Next <= logStart {
		n++
	}
	if !retentionDeletes(cfg.CleanupPolicy) {
		return n
	}
	if cfg.RetentionMs >= 0 {
		for n < limit && segs[n].MaxTs >= 0 && nowMs-segs[n].MaxTs > cfg.RetentionMs {
			n++
		}
	}
	if cfg.RetentionBytes >= 0 {
		var total int64
		for i := n; i < len(segs); i++ {
			total += segs[i].Size
		}
		diff := total - cfg.RetentionBytes
		for n < limit && diff-segs[n].Size >= 0 {
			diff -= segs[n].Size
			n++
		}
	}
	return n
}

// retentionDeletes reports whether a cleanup.policy (canonical, or "" for callers that
// predate it) lets time and size retention delete segments.
func retentionDeletes(policy string) bool {
	return policy == "" || strings.Contains(policy, "delete")
}
