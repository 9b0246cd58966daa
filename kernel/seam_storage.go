package kernel

import (
	"errors"
	"fmt"
)

// Storage is the role interface of the storage module ("storage.segmentlog",
// "storage.memory"): a set of partition logs. Implementations must pass the conformance
// suite in modules/storage/storagetest.
type Storage interface {
	// Open opens the log of tp, creating it empty if it does not exist. Opening an open
	// log returns the same Log and applies cfg.
	Open(tp TopicPartition, topicID [16]byte, cfg LogConfig) (Log, error)
	// Remove closes the log of tp (if open) and deletes its data.
	Remove(tp TopicPartition) error
	// Dirs describes the log directories and the partitions in them (DescribeLogDirs).
	Dirs() []LogDir
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is "topic-partition", the partition's directory name.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// LogDir is one log directory as DescribeLogDirs reports it.
type LogDir struct {
	Path        string
	TotalBytes  int64
	UsableBytes int64
	Partitions  []LogDirPartition
}

// LogDirPartition is one partition's size in a log dir.
type LogDirPartition struct {
	TP   TopicPartition
	Size int64
}

// LogConfig is the per-partition configuration storage honours, resolved from topic
// configs and broker defaults (see internal/kconfig).
type LogConfig struct {
	SegmentBytes       int64 // segment.bytes
	SegmentMs          int64 // segment.ms
	SegmentJitterMs    int64 // segment.jitter.ms
	IndexIntervalBytes int64 // index.interval.bytes
	SegmentIndexBytes  int64 // segment.index.bytes (max index file size, preallocated)
	RetentionMs        int64 // retention.ms; -1 = forever
	RetentionBytes     int64 // retention.bytes; -1 = unbounded
	FlushMessages      int64 // flush.messages; <=0 or MaxInt64 = leave to page cache
	FlushMs            int64 // flush.ms; MaxInt64 = leave to page cache
	FileDeleteDelayMs  int64 // file.delete.delay.ms
	CleanupPolicy      string
}

// Log is one partition's append-only log of magic-2 record batches.
//
// Invariants every implementation keeps:
//   - Offsets are strictly increasing; LogStartOffset <= LogEndOffset.
//   - A batch is appended whole or not at all (a failed Append leaves the log as it was).
//   - Read never returns a partial batch.
//
// All methods are safe for concurrent use.
type Log interface {
	// AppendLeader assigns offsets to the batches in records (one or more concatenated,
	// already validated v2 batches), starting at LogEndOffset, by rewriting each batch's
	// baseOffset field in place, then appends them.
	AppendLeader(records []byte) (AppendResult, error)
	// AppendFollower appends batches that already carry offsets (>= LogEndOffset).
	AppendFollower(records []byte) (AppendResult, error)
	// Read returns whole batches starting with the one containing offset, up to maxBytes
	// in total, none with a base offset >= maxOffset (the high watermark for consumers).
	// If the first batch alone exceeds maxBytes it is returned whole when minOneBatch.
	// offset == LogEndOffset yields an empty result; an offset outside
	// [LogStartOffset, LogEndOffset] yields ErrOffsetOutOfRange.
	// A batch that starts below maxOffset is returned whole even if it ends above it;
	// callers pass a maxOffset that lies on a batch boundary (the HW always does: every
	// replica appends whole batches). Chunks may span several segments (several file
	// ranges). The caller must call ReadResult.Release when done with the chunks.
	Read(offset int64, maxBytes int64, maxOffset int64, minOneBatch bool) (ReadResult, error)
	LogStartOffset() int64
	LogEndOffset() int64
	// OffsetForTimestamp returns the first offset whose timestamp is >= ts, and that
	// record's timestamp; ok is false when there is none.
	OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error)
	// MaxTimestamp returns the largest timestamp in the log and the offset of the batch
	// that holds it (ListOffsets -3); ok is false for an empty log.
	MaxTimestamp() (timestamp, offset int64, ok bool)
	// DeleteRecordsBefore moves the log start offset up to offset (<= LogEndOffset),
	// deleting whole segments that fall below it. It never moves it down.
	DeleteRecordsBefore(offset int64) error
	// Truncate removes every record at or above offset (replication's divergence repair).
	// It removes the whole batch holding offset, so the log end may fall below it; below
	// the log start the log is emptied and restarts at the log start.
	Truncate(offset int64) error
	// SetConfig applies a changed configuration (retention, flush, segment size).
	SetConfig(cfg LogConfig)
	// Flush writes everything appended so far to stable storage.
	Flush() error
	// Size is the log's total size in bytes.
	Size() int64
	// Close flushes and closes the log.
	Close() error
}

// AppendResult describes an append.
type AppendResult struct {
	BaseOffset     int64 // first offset of the first batch
	LastOffset     int64 // last offset of the last batch
	LogAppendTime  int64 // ms; the time of the append
	LogStartOffset int64
}

// ReadResult holds the bytes of a read as chunks (file ranges for the segment log).
type ReadResult struct {
	Chunks []Chunk
	Size   int64
	// Release unpins the files in Chunks. Never nil.
	Release func()
}

// Errors a Log returns.
var (
	// ErrOffsetOutOfRange: the offset is below the log start or above the log end.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrCorrupt marks bytes that fail validation (CRC, lengths). Recovery truncates a
	// torn tail marked so; anything else is an I/O failure.
	ErrCorrupt = errors.New("corrupt record batch")
	// ErrLogClosed: the log was closed or removed.
	ErrLogClosed = errors.New("log closed")
	// ErrInvalidOffset: AppendFollower batches start below the log end.
	ErrInvalidOffset = errors.New("invalid offset")
)
