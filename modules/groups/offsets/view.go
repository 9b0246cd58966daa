package offsets

// View is what the group coordinator needs of an offsets store: the materialized view
// of __consumer_offsets it serves OffsetFetch from and applies the log to. The log is
// the truth; a View only says how much of each partition it holds (AppliedOffset,
// TxnReplayStart), and the coordinator's load replays the rest. Store (badger, kept
// across restarts) and Memory (rebuilt from the log at every start) implement it;
// offsetstest is the conformance suite both pass.
//
// Every method is safe for concurrent use. After Close, the reads and applies return
// an error wrapping ErrClosed.
type View interface {
	// Fetch returns the committed offset of one partition, and whether there is one.
	Fetch(group, topic string, partition int32) (Committed, bool, error)
	// FetchGroup returns every committed offset of group (empty, not nil, if none).
	FetchGroup(group string) (map[TopicPartition]Committed, error)
	// GroupMetadata returns the group metadata last applied for group.
	GroupMetadata(group string) (GroupMetadata, bool, error)
	// GroupRecords returns the group records (Key.IsGroupRecord: KIP-848 consumer
	// group records, key versions 3, 5-8; KIP-932 share group records, 10-14; and
	// share state, 1001) last applied for group, as their Kafka key and value
	// bytes, sorted by key bytes (empty, not nil, if none). The caller owns the
	// returned bytes.
	GroupRecords(group string) ([]KV, error)
	// GroupRecord returns the value last applied for one group record's Kafka key,
	// and whether there is one. A key that is not a group record's is an error.
	GroupRecord(key []byte) ([]byte, bool, error)
	// Groups returns, sorted, every group with offsets, metadata or group records.
	Groups() ([]string, error)

	// ApplyBatch applies records of one __consumer_offsets partition, ascending
	// offsets, all or none; records at or below AppliedOffset are skipped.
	ApplyBatch(partition int32, recs []Record) error
	// Reapply is ApplyBatch without the skip; the applied offset never moves back.
	Reapply(partition int32, recs []Record) error
	// ApplyMarker applies a transaction's end at log offset marker: recs take effect,
	// the applied offset moves to marker if higher, TxnReplayStart becomes txnStart
	// (< 0: none).
	ApplyMarker(partition int32, recs []Record, marker, txnStart int64) error
	// AppliedOffset is the log offset of the last record applied, -1 if none.
	AppliedOffset(partition int32) int64
	// TxnReplayStart is the first offset of the earliest transactional batch whose
	// marker was pending when it was last set; ok is false if none.
	TxnReplayStart(partition int32) (int64, bool)
	// SetTxnReplayStart sets TxnReplayStart (off < 0: none pending).
	SetTxnReplayStart(partition int32, off int64) error

	// Close releases the store; a second Close is a no-op.
	Close() error
}

// KV is one stored record: its __consumer_offsets key and value bytes, as applied.
type KV struct {
	Key, Value []byte
}

var (
	_ View = (*Store)(nil)
	_ View = (*Memory)(nil)
)
