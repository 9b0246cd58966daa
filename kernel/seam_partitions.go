package kernel

import (
	"context"
	"errors"
	"time"
)

// Partitions is an optional interface of the replication module (found by type
// assertion on ctx.Lookup("replication")) for modules that keep their state in internal
// topics: the group coordinator in __consumer_offsets, the transaction coordinator in
// __transaction_state. It is the same leader path producers use, so those records are
// replicated, fenced and retained like any other.
type Partitions interface {
	// Append appends records (one or more concatenated, valid v2 batches) to tp as its
	// leader, assigning offsets, and returns once they are committed: the high
	// watermark has passed them and the ISR satisfies min.insync.replicas (acks=all).
	// It returns ErrNotLeader when this broker does not lead tp, and ctx.Err() if ctx
	// ends first (the records may still be committed later).
	Append(ctx context.Context, tp TopicPartition, records []byte) (AppendResult, error)
	// ReadCommitted calls fn with each batch of tp below the high watermark, starting
	// with the batch holding offset (or the log start, if offset is below it), in
	// order, until the high watermark as of the call. batch is only valid during fn;
	// an error from fn stops the read and is returned.
	ReadCommitted(ctx context.Context, tp TopicPartition, offset int64, fn func(batch []byte) error) error
	// ReadStable is ReadCommitted as a read_committed consumer sees it: batches below
	// the last stable offset only, without control batches and without the batches of
	// aborted transactions. (ReadCommitted returns every batch below the HW: the
	// coordinators that own internal topics interpret transactions themselves.)
	// It returns the offset it read up to: after a complete read, the last stable
	// offset as of the call (so a reader's position can pass trailing markers and
	// aborted batches it was not shown), or offset if that was already past it.
	ReadStable(ctx context.Context, tp TopicPartition, offset int64, fn func(batch []byte) error) (int64, error)
	// Leader reports whether this broker leads tp, and with which leader epoch.
	Leader(tp TopicPartition) (epoch int32, ok bool)
}

// ErrNotLeader: this broker does not lead the partition (or does not know it).
var ErrNotLeader = errors.New("not the leader of the partition")

// PartitionWaiter is an optional interface of the replication module (found by type
// assertion): wait, without polling, for something to change on partitions this broker
// leads. The share fetch path uses it to long-poll as Fetch does.
type PartitionWaiter interface {
	// WaitPartitions calls try, and again after every change (an append, a high
	// watermark or log start move, a leadership change) to one of tps, until try
	// reports true (then it returns true), timeout passes or ctx ends (false). try
	// runs on the caller's goroutine, never concurrently with itself.
	WaitPartitions(ctx context.Context, tps []TopicPartition, timeout time.Duration, try func() bool) bool
}

// PartitionOffsets is an optional interface of the replication module (found by type
// assertion): the offsets of a partition this broker leads, without a request. The
// group coordinator uses it to tell assignors each partition's end offset and lag.
type PartitionOffsets interface {
	// Offsets returns tp's log start offset and high watermark, if this broker leads
	// it.
	Offsets(tp TopicPartition) (logStart, highWatermark int64, ok bool)
}

// ReplicaOffsets is an optional interface of the replication module (found by type
// assertion) for metrics computed at scrape time (consumer lag): what this broker
// knows of a partition it holds a replica of, leader or follower, without a request
// and without opening anything.
type ReplicaOffsets interface {
	// ReplicaOffsets returns tp's log start offset and high watermark (on a follower,
	// the leader's as of the follower's last fetch); ok is false when this broker
	// holds no open replica of tp.
	ReplicaOffsets(tp TopicPartition) (logStart, highWatermark int64, ok bool)
	// BatchTimestamp returns the timestamp of the batch holding offset, an offset
	// below the high watermark (one at or below the log start reads the first batch):
	// its first record's create time, or its append time under LogAppendTime. It
	// costs one index lookup and one read of a batch header. ok is false when there
	// is no such batch here.
	BatchTimestamp(tp TopicPartition, offset int64) (timestampMs int64, ok bool)
}

// LeaderOffsets is an optional interface of the replication module (found by type
// assertion) for metrics of partitions this broker holds no replica of: their high
// watermarks, asked of their leaders.
type LeaderOffsets interface {
	// LeaderHighWatermarks asks the leaders of tps for their high watermarks
	// (ListOffsets, one request per leader, concurrently) and returns those it learned
	// before ctx ended. Partitions this broker leads, or without a leader, are not
	// asked.
	LeaderHighWatermarks(ctx context.Context, tps []TopicPartition) map[TopicPartition]int64
	// LeaderBatchTimestamps asks the leaders of the partitions in at for the batch
	// holding each offset (one consumer Fetch per leader, a few KiB per partition)
	// and returns their timestamps, as BatchTimestamp does. A batch larger than that
	// (a fetch returns only the first whole), an offset out of range or an error
	// leaves its partition out.
	LeaderBatchTimestamps(ctx context.Context, at map[TopicPartition]int64) map[TopicPartition]int64
}
