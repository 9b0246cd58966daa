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

// StrayRemover is the optional side of a Storage whose logs outlive the process. A
// broker that was down while a topic was deleted, or while one of its replicas moved
// away, finds those partitions' directories at its next start: nothing opens them
// and nothing would ever remove them. The replication module calls RemoveStrays once,
// after this broker registered with the metadata quorum (its registration is a log
// entry committed after the process started, so the image then holds every change
// committed before: a partition missing from it is gone, not merely not yet known).
type StrayRemover interface {
	// RemoveStrays looks at every partition directory that is not open or being
	// opened and asks keep, with the topic id the directory records (zero when it
	// records none), while opens of that partition wait; the ones keep rejects are
	// removed. clusterID and nodeID are the metadata's: a data dir that cannot show it
	// belonged to this cluster and node before (first use of this check, or a
	// metadata log started afresh) has its strays moved aside, not deleted.
	RemoveStrays(clusterID string, nodeID int32, keep func(tp TopicPartition, topicID [16]byte) bool) (StrayResult, error)
}

// SpaceLog is the optional side of a Log whose directory is held to the free-space
// reserve on its own (sluice.data.dir.reserve.bytes, as BrokerInfo.AdmitWrite holds
// the data dir): with log.dirs on several file systems, one full disk refuses
// writes to its own partitions only. The replication module asks before a client's
// produce (KAFKA_STORAGE_ERROR) and a follower's append (the partition waits).
type SpaceLog interface {
	// AdmitWrite counts n bytes about to be written to the log and returns nil, or an
	// error wrapping ErrDiskFull when its directory is below the reserve. A few atomic
	// operations, no I/O.
	AdmitWrite(n int64) error
}

// StrayResult is what one RemoveStrays did.
type StrayResult struct {
	Kept, Removed, MovedAside int
	Bytes                     int64 // the .log bytes of the removed and moved-aside ones
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
	Path string
	// Err is why the directory is offline (DescribeLogDirs answers it with
	// KAFKA_STORAGE_ERROR and no partitions); nil while it serves.
	Err         error
	TotalBytes  int64
	UsableBytes int64
	Partitions  []LogDirPartition
}

// LogDirPartition is one partition's size in a log dir.
type LogDirPartition struct {
	TP   TopicPartition
	Size int64
	// IsFuture: a copy being made by a replica move (AlterReplicaLogDirs); OffsetLag
	// is then how far its log end is behind the current log's.
	IsFuture  bool
	OffsetLag int64
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
	// CleanupPolicy is cleanup.policy, canonical: "delete", "compact" or
	// "compact,delete". Time and size retention apply only when it includes delete
	// ("" counts as delete).
	CleanupPolicy string
	// Compaction (cleanup.policy includes compact).
	DeleteRetentionMs      int64   // delete.retention.ms: how long a tombstone survives cleaning
	MinCompactionLagMs     int64   // min.compaction.lag.ms
	MaxCompactionLagMs     int64   // max.compaction.lag.ms
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio
	// ProducerIDExpirationMs is producer.id.expiration.ms: a producer with no open
	// transaction whose last batch is older than this is forgotten. <= 0 = never.
	ProducerIDExpirationMs int64
}

// Log is one partition's append-only log of magic-2 record batches.
//
// Invariants every implementation keeps:
//   - Offsets are strictly increasing; LogStartOffset <= LogEndOffset.
//   - A batch is appended whole or not at all (a failed Append leaves the log as it was).
//   - Read never returns a partial batch.
//
// All methods are safe for concurrent use.
//
// It is composed of smaller interfaces, one per concern, so a reader (or a fake) finds
// the contract of each in one place.
type Log interface {
	RecordLog
	ProducerLog
	EpochLog
	WatermarkLog
}

// RecordLog appends, reads and trims the records of a Log.
type RecordLog interface {
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
	// that holds it; ok is false for an empty log. (ListOffsets -3 then finds the record
	// with OffsetForTimestamp.)
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

// ProducerLog is the producer state of a Log (idempotence and transactions). The log
// keeps, per producer id, the latest epoch, the last (up to 5) appended batches'
// sequence ranges and offsets, the coordinator epoch of its last marker and the first
// offset of its open transaction; and the aborted transactions (Kafka's .txnindex).
// Every append updates it (AppendLeader, AppendProducer, AppendFollower) from the batch
// headers; recovery rebuilds it (snapshot plus log tail), Truncate rolls it back, and
// producers idle for LogConfig.ProducerIDExpirationMs with no open transaction are
// forgotten.
//
// Checks on AppendLeader and AppendProducer (never on AppendFollower, whose batches
// the leader checked), for batches with a producer id (>= 0):
//   - an epoch older than the producer's: ErrInvalidProducerEpoch;
//   - a non-transactional data batch from a producer with an open transaction:
//     ErrInvalidTxnState; a transactional one opens a transaction at its base offset
//     if none is open;
//   - a control batch (COMMIT/ABORT marker, one control record) ends the producer's
//     open transaction (an ABORT adds it to the aborted transactions); its
//     coordinator epoch must not be older than the producer's last:
//     ErrTxnCoordinatorFenced. A marker with no open transaction is appended and
//     changes nothing else (a retried marker).
//
// AppendLeader does not check sequences (coordinator writes use base sequence -1);
// AppendProducer does.
type ProducerLog interface {
	// AppendProducer appends one batch of an idempotent or transactional producer
	// (producer id >= 0, base sequence >= 0) as the leader, atomically with its
	// sequence check:
	//   - a batch with the producer's epoch and seq equal to one of the last 5 batches'
	//     ranges is a duplicate: nothing is appended and the result describes the
	//     original append (Duplicate set; BaseOffset, LastOffset and LogAppendTime of
	//     the original);
	//   - same epoch: seq.First must be the last sequence + 1 (wrapping from MaxInt32
	//     to 0), else ErrOutOfOrderSequence;
	//   - a newer epoch must start at sequence 0, else ErrOutOfOrderSequence;
	//   - an unknown producer (never seen, expired or deleted by retention) may start
	//     anywhere.
	// seq is the range the batch stands for: its header's (base sequence .. base
	// sequence + LastOffsetDelta), or, for a produce transform's output, the input
	// batch's range, so a retry of the input is recognised. (Recovery can only read
	// headers: after a crash, a transformed batch whose record count changed is
	// remembered with its header's range. See modules/replication/doc.go.)
	//
	// An empty batch (nil) with ProducerID/Epoch set in seq records the range without
	// appending anything (a produce transform dropped every record of the batch): the
	// producer's sequence moves on and a retry is answered as a duplicate with
	// BaseOffset = LastOffset = the log end offset at the time. It lives in memory and
	// in snapshots only, so after a crash the producer's next batch may see
	// ErrOutOfOrderSequence once.
	AppendProducer(batch []byte, seq SeqRange) (AppendResult, error)
	// Producer returns what the log remembers about one producer (cheap: the
	// replication module asks it on the produce path).
	Producer(id int64) (ProducerState, bool)
	// FirstUnstableOffset is the first offset of the earliest open transaction; ok is
	// false when none is open. The last stable offset is min(HW, this).
	FirstUnstableOffset() (offset int64, ok bool)
	// AbortedTxns appends to dst the aborted transactions that overlap [from, to): those
	// whose marker is at or after from and whose first offset is before to, in marker
	// order (a read_committed Fetch's aborted_transactions).
	AbortedTxns(dst []AbortedTxn, from, to int64) []AbortedTxn
	// Producers lists the producers the log remembers (DescribeProducers), by id.
	Producers() []ProducerState
}

// EpochLog is the leader-epoch history of a Log (Kafka's leader-epoch-checkpoint). The
// log keeps, in ascending order, each leader epoch it holds records of (or was
// assigned) with the first offset of that epoch. Invariants every implementation keeps:
//   - epochs strictly increase, start offsets never decrease;
//   - an append (AppendLeader, AppendProducer, AppendFollower) of a batch whose
//     partition leader epoch is newer than the latest entry adds (that epoch, the
//     batch's base offset); a batch with an older or equal epoch adds nothing;
//   - AssignEpoch adds an entry explicitly (a new leader assigns its epoch at its
//     log end before it appends anything, as Kafka's makeLeader does);
//   - Truncate(offset) drops the entries that start at or after the new log end;
//     Reset drops them all; moving the log start (DeleteRecordsBefore, retention)
//     drops the entries wholly below the new log start and moves the start of the
//     one holding it up to it;
//   - they survive a restart (segmentlog: the partition's leader-epoch-checkpoint
//     file, Kafka's text format, rewritten when the entries change; when it is
//     missing or unreadable the entries are rebuilt from the batch headers).
type EpochLog interface {
	// AssignEpoch records that epoch starts at startOffset. An epoch not newer than
	// the latest entry's (or negative) is ignored (nil error); a startOffset below the
	// latest entry's start, below LogStartOffset or above LogEndOffset is
	// ErrInvalidOffset. At open, entries starting at or after the log end are dropped
	// (as Kafka): an epoch assigned but never written in does not survive a restart,
	// the leader assigns it again.
	//
	// AppendLeader and AppendProducer do not stamp the partition leader epoch (batch
	// bytes 12-16, outside the CRC; clients send -1): the replication module writes it
	// before the append, as Kafka's leader does.
	AssignEpoch(epoch int32, startOffset int64) error
	// Epochs returns a copy of the entries, oldest first.
	Epochs() []EpochEntry
	// EndOffsetForEpoch answers OffsetForLeaderEpoch (and the Fetch diverging-epoch
	// check) as Kafka's LeaderEpochFileCache.endOffsetFor does:
	//   - requested == the latest epoch: (latest, LogEndOffset);
	//   - requested below every entry: (requested, the first entry's start offset);
	//   - otherwise the largest epoch <= requested and the start offset of the first
	//     entry after it;
	//   - requested < 0, newer than every entry, or no entries: (-1, -1).
	EndOffsetForEpoch(requested int32) (epoch int32, endOffset int64)
}

// WatermarkLog restarts a Log at an offset and keeps its high watermark.
type WatermarkLog interface {
	// Reset empties the log and restarts it at offset (log start = log end = HW =
	// offset), forgetting producer state and leader epochs: a follower whose log lies
	// wholly below the leader's log start (Kafka's truncateFullyAndStartAt).
	Reset(offset int64) error

	// SetHighWatermark records the partition's high watermark. The replication module
	// owns the value; the log only persists it: segmentlog writes every log dir's
	// high watermarks to its replication-offset-checkpoint (Kafka's format) every
	// replica.high.watermark.checkpoint.interval.ms when one changed, and at Close.
	SetHighWatermark(hw int64)
	// HighWatermark returns the last recorded high watermark (after a restart, the
	// checkpointed one) clamped to [LogStartOffset, LogEndOffset]; the log start
	// offset when none was ever recorded.
	HighWatermark() int64
}

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// SeqRange is the first and last sequence number of a producer batch (Last may be
// below First when the sequence wrapped past MaxInt32).
//
// ProducerID and Epoch are only read for an empty AppendProducer (there is no header
// to read them from); otherwise the batch header's are used.
type SeqRange struct {
	First, Last int32
	ProducerID  int64
	Epoch       int16
}

// AbortedTxn is one aborted transaction in a partition: the producer, the offset of
// its first batch in the partition and the offset of its ABORT marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// ProducerState is what a log remembers about one producer.
type ProducerState struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32 // -1 when only markers/coordinator writes were seen
	LastTimestamp    int64 // max timestamp of its last batch (ms)
	CoordinatorEpoch int32 // of its last marker; -1 if none
	TxnStartOffset   int64 // first offset of its open transaction; -1 if none
}

// Producer-state errors of AppendLeader and AppendProducer. The replication module maps
// them to Kafka codes.
var (
	// ErrInvalidProducerEpoch: the batch's epoch is older than the producer's
	// (INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("producer epoch older than the current one")
	// ErrOutOfOrderSequence: a sequence gap or a new epoch not starting at 0
	// (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidTxnState: a non-transactional batch from a producer with an open
	// transaction (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrTxnCoordinatorFenced: a marker with an older coordinator epoch than the
	// producer's last (TRANSACTION_COORDINATOR_FENCED).
	ErrTxnCoordinatorFenced = errors.New("transaction coordinator fenced")
)

// AppendResult describes an append.
type AppendResult struct {
	BaseOffset     int64 // first offset of the first batch
	LastOffset     int64 // last offset of the last batch
	LogAppendTime  int64 // ms; the time of the append
	LogStartOffset int64
	// Duplicate: AppendProducer found the batch among the producer's last five and
	// appended nothing; the offsets and time are the original append's.
	Duplicate bool
}

// ReadResult holds the bytes of a read as chunks (file ranges for the segment log).
type ReadResult struct {
	Chunks []Chunk
	Size   int64
	// NextOffset is where the next read would start: past the last batch in Chunks
	// (its last offset + 1, or further where a compacted log has a gap after it) and
	// no later than the first batch not returned; 0 when the log does not say (or
	// nothing was read). Metrics count the offsets a fetch sent with it.
	NextOffset int64
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
	// ErrLogOffline: the log found a corrupt batch among bytes it had stored (a failing
	// disk, not bad input): it refuses reads and appends until Truncate cuts the damage
	// off; or its log dir failed (JBOD: only that dir's logs), and it refuses every
	// call until the broker restarts with the dir healthy (KAFKA_STORAGE_ERROR).
	ErrLogOffline = errors.New("log offline")
)

// OfflineLog is the optional side of a Log that says whether it is offline without a
// call failing: the replication module asks its led partitions periodically, so a
// leader whose log dir failed while the partition was idle resigns too.
type OfflineLog interface {
	// Offline returns an error wrapping ErrLogOffline while the log is offline.
	Offline() error
}
