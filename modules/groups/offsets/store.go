package offsets

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// ErrClosed is returned by every Store method called after Close.
var ErrClosed = errors.New("offsets: store closed")

// ErrTooLong is returned for a group, topic or metadata longer than a Kafka
// string (32767 bytes) can carry.
var ErrTooLong = errors.New("offsets: string too long for the record format")

// ErrLayout is returned by Open for a directory written with another key layout.
var ErrLayout = errors.New("offsets: unknown store layout")

// Badger key prefixes; see "Badger key layout" in doc.go. Frozen.
const (
	prefixMeta     byte = 0x00 // 0x00 "layout" -> u32 layoutVersion
	prefixApplied  byte = 'a'  // 'a' | partition u32 -> last applied log offset i64
	prefixConsumer byte = 'c'  // 'c' | u16 len | group | type u16 | the Kafka key's fields after the group -> Kafka group record value
	prefixGroup    byte = 'g'  // 'g' | u16 len | group -> Kafka group metadata value
	prefixOffset   byte = 'o'  // 'o' | u16 len | group | u16 len | topic | partition u32 -> storedValue
	prefixTxn      byte = 'r'  // 'r' | partition u32 -> first offset of the earliest pending transactional batch, i64
)

const layoutVersion uint32 = 1

var layoutKey = []byte{prefixMeta, 'l', 'a', 'y', 'o', 'u', 't'}

// consumerRecordsKey marks a store that has applied every consumer group record
// since its applied offsets were last -1 (see load). Its value is u32 1. A layout 1
// store written before this package read those records lacks it.
var consumerRecordsKey = []byte{prefixMeta, 'k', 'i', 'p', '8', '4', '8'}

// storedValueV1 is the version byte of a committed offset inside badger.
const storedValueV1 byte = 1

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Entry is one commit of a CommitBatch.
type Entry struct {
	Group     string
	Topic     string
	Partition int32
	Committed Committed
}

// Store is the materialized view of committed offsets, group metadata and group
// records (KIP-848 consumer group, KIP-932 share group and share state records).
// All methods are safe for concurrent use.
type Store struct {
	log *slog.Logger

	// mu guards closed and db against Close: methods hold it shared.
	mu     sync.RWMutex
	closed bool
	db     *badger.DB

	// applyMu serializes Apply per partition (striped: partition % len), so the
	// check of a partition's applied offset and the write that advances it are one
	// step, while applies to different partitions overlap and badger can fold
	// their transactions into one sync. Order: mu, then applyMu.
	applyMu [32]sync.Mutex
	// expireMu keeps writes out of ExpireOffsets' judge-then-delete of one
	// group, so a commit landing in between is never deleted unjudged. Writes
	// hold it shared (they still run concurrently); expiry holds it alone.
	// Order: applyMu, expireMu, mu.
	expireMu sync.RWMutex
	// appliedMu guards applied; it is taken last and never held across I/O.
	appliedMu sync.Mutex
	applied   map[int32]int64
	// txnStart mirrors the 'r' keys (see TxnReplayStart); guarded by appliedMu.
	txnStart map[int32]int64
	// mayWrite, when set (SetWriteCheck, before first use), is asked before every
	// write: badger writes its memtable, value log and tables through mmap, so on a
	// full file system a write faults (SIGBUS) instead of failing. Its error is
	// returned instead of writing.
	mayWrite func() error
}

// SetWriteCheck makes every later write ask fn first and fail with its error (see
// Store.mayWrite). Call it before the store is used.
func (s *Store) SetWriteCheck(fn func() error) { s.mayWrite = fn }

// writable is mayWrite's answer, nil without one.
func (s *Store) writable() error {
	if s.mayWrite == nil {
		return nil
	}
	if err := s.mayWrite(); err != nil {
		return fmt.Errorf("offsets store: %w", err)
	}
	return nil
}

// Open opens (creating if needed) the store in dir. log receives badger's own
// messages at debug level (warnings and errors at their level).
func Open(dir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := badger.DefaultOptions(dir).
		// Durability: a commit is acknowledged to the client only after Commit
		// returns, and DESIGN.md promises an acknowledged commit survives. With
		// SyncWrites off badger only msyncs the memtable WAL lazily, so a power
		// loss could drop acknowledged commits until replay from the log exists.
		WithSyncWrites(true).
		// Small footprint: offsets are tiny and the machine runs many brokers.
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithBaseTableSize(2 << 20).
		WithBaseLevelSize(8 << 20).
		WithValueLogFileSize(16 << 20).
		WithValueThreshold(1 << 10).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		WithCompression(options.None).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		WithMetricsEnabled(false).
		WithNumVersionsToKeep(1).
		// Last writer wins for offsets; conflict detection would only turn
		// concurrent commits to one key into retries.
		WithDetectConflicts(false).
		// Last: WithLoggingLevel would replace the logger with badger's own.
		WithLogger(slogAdapter{log: log})
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open offsets store %s: %w", dir, err)
	}
	s := &Store{log: log, db: db, applied: make(map[int32]int64), txnStart: make(map[int32]int64)}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open offsets store %s: %w", dir, err)
	}
	return s, nil
}

// load checks (or writes) the layout version and reads the applied offsets.
//
// A store without consumerRecordsKey was written by a version of this package that
// skipped the consumer group records (key versions 3, 5-8) while advancing its
// applied offsets past them: load deletes its applied offsets (its entries stay), so
// the next load replays every partition from the log's start and applies them, and
// sets the key. The layout version stays 1, so an older binary still opens the store
// (it ignores the 'c' keys).
func (s *Store) load() error {
	reset := 0
	err := s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(layoutKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			if err := txn.Set(layoutKey, binary.BigEndian.AppendUint32(nil, layoutVersion)); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if len(v) != 4 || binary.BigEndian.Uint32(v) != layoutVersion {
				return fmt.Errorf("layout %x: %w", v, ErrLayout)
			}
		}
		if reset, err = upgradeConsumerRecords(txn); err != nil {
			return err
		}
		for prefix, into := range map[byte]map[int32]int64{prefixApplied: s.applied, prefixTxn: s.txnStart} {
			if err := readPartitionOffsets(txn, prefix, into); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && reset > 0 {
		s.log.Info("offsets store predates consumer group records: applied offsets dropped, each partition's next load replays it from the log's start",
			"partitions", reset)
	}
	return err
}

// upgradeConsumerRecords sets consumerRecordsKey, deleting the applied offsets of a
// store that lacks it (see load), and returns how many it deleted. The applied
// offsets are one key per partition, so this fits one transaction.
func upgradeConsumerRecords(txn *badger.Txn) (int, error) {
	_, err := txn.Get(consumerRecordsKey)
	if !errors.Is(err, badger.ErrKeyNotFound) {
		return 0, err // nil: set already
	}
	var keys [][]byte
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixApplied}})
	for it.Rewind(); it.Valid(); it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), txn.Set(consumerRecordsKey, binary.BigEndian.AppendUint32(nil, 1))
}

// readPartitionOffsets reads the 'prefix | partition u32 -> i64' keys into into.
func readPartitionOffsets(txn *badger.Txn, prefix byte, into map[int32]int64) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefix}})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		if len(k) != 5 || len(v) != 8 {
			return fmt.Errorf("partition offset key %x value %x: %w", k, v, ErrCorrupt)
		}
		into[int32(binary.BigEndian.Uint32(k[1:]))] = int64(binary.BigEndian.Uint64(v))
	}
	return nil
}

// Close flushes and closes the store. It waits for running calls; later calls
// return ErrClosed. Closing twice is a no-op.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close offsets store: %w", err)
	}
	return nil
}

// Sync forces everything written so far to disk (a no-op beyond SyncWrites,
// kept for callers and tests that copy the directory).
func (s *Store) Sync() error {
	return s.with(func(db *badger.DB) error { return db.Sync() })
}

func (s *Store) with(fn func(db *badger.DB) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return fn(s.db)
}

func (s *Store) update(fn func(txn *badger.Txn) error) error {
	if err := s.writable(); err != nil {
		return err
	}
	return s.with(func(db *badger.DB) error { return db.Update(fn) })
}

func (s *Store) view(fn func(txn *badger.Txn) error) error {
	return s.with(func(db *badger.DB) error { return db.View(fn) })
}

// Commit stores one committed offset, replacing any earlier one.
func (s *Store) Commit(group, topic string, partition int32, c Committed) error {
	return s.CommitBatch([]Entry{{Group: group, Topic: topic, Partition: partition, Committed: c}})
}

// CommitBatch stores all entries in one transaction: all of them or none.
// A batch too large for one badger transaction fails whole (badger.ErrTxnTooBig).
func (s *Store) CommitBatch(entries []Entry) error {
	for _, e := range entries {
		if err := checkLens(e.Group, e.Topic, e.Committed.Metadata); err != nil {
			return err
		}
	}
	s.expireMu.RLock()
	defer s.expireMu.RUnlock()
	err := s.update(func(txn *badger.Txn) error {
		for _, e := range entries {
			if err := txn.Set(offsetKey(e.Group, e.Topic, e.Partition), encodeStored(e.Committed)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit %d offsets: %w", len(entries), err)
	}
	return nil
}

// get reads the value of key with decode; found is false (and decode not called)
// when there is none.
func (s *Store) get(key []byte, decode func(v []byte) error) (found bool, err error) {
	err = s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return item.Value(decode)
	})
	return found, err
}

// Fetch returns the committed offset of one partition, and whether there is one.
func (s *Store) Fetch(group, topic string, partition int32) (Committed, bool, error) {
	var c Committed
	found, err := s.get(offsetKey(group, topic, partition), func(v []byte) (err error) {
		c, err = decodeStored(v)
		return err
	})
	if err != nil {
		return Committed{}, false, fmt.Errorf("fetch %s/%s/%d: %w", group, topic, partition, err)
	}
	return c, found, nil
}

// FetchGroup returns every committed offset of group (empty, not nil, if none).
func (s *Store) FetchGroup(group string) (map[TopicPartition]Committed, error) {
	out := make(map[TopicPartition]Committed)
	err := s.view(func(txn *badger.Txn) error {
		return scanGroup(txn, group, true, func(tp TopicPartition, c Committed) error {
			out[tp] = c
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("fetch group %s: %w", group, err)
	}
	return out, nil
}

// GroupMetadata returns the group metadata last applied for group.
func (s *Store) GroupMetadata(group string) (GroupMetadata, bool, error) {
	var g GroupMetadata
	found, err := s.get(groupKey(group), func(v []byte) (err error) {
		g, err = DecodeGroupMetadataValue(v)
		return err
	})
	if err != nil {
		return GroupMetadata{}, false, fmt.Errorf("group metadata %s: %w", group, err)
	}
	return g, found, nil
}

// GroupRecords returns the group records (IsGroupRecord) last applied for group,
// as their Kafka key and value bytes, sorted by key bytes (empty, not nil, if none).
func (s *Store) GroupRecords(group string) ([]KV, error) {
	out := []KV{}
	prefix := groupPrefix(prefixConsumer, group)
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k, err := groupRecordKafkaKey(group, item.Key()[len(prefix):])
			if err != nil {
				return fmt.Errorf("key %x: %w", item.Key(), err)
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, KV{Key: k, Value: v})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("group records %s: %w", group, err)
	}
	return out, nil
}

// GroupRecord returns the value last applied for one group record's Kafka key, and
// whether there is one.
func (s *Store) GroupRecord(key []byte) ([]byte, bool, error) {
	k, err := DecodeKey(key)
	if err == nil && !k.IsGroupRecord() {
		err = fmt.Errorf("key version %d: not a group record: %w", k.Version, ErrUnsupportedVersion)
	}
	if err != nil {
		return nil, false, err
	}
	var v []byte
	found, err := s.get(groupRecordKey(k), func(b []byte) error {
		v = append([]byte(nil), b...)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("group record %s: %w", k.Group, err)
	}
	return v, found, nil
}

// PutGroupMetadata stores group metadata for group, replacing any earlier one.
func (s *Store) PutGroupMetadata(group string, g GroupMetadata) error {
	if err := checkLens(group, "", ""); err != nil {
		return err
	}
	s.expireMu.RLock()
	defer s.expireMu.RUnlock()
	if err := s.update(func(txn *badger.Txn) error {
		return txn.Set(groupKey(group), EncodeGroupMetadataValue(g))
	}); err != nil {
		return fmt.Errorf("put group metadata %s: %w", group, err)
	}
	return nil
}

// DeleteOffsets removes the given partitions' offsets of group; missing ones
// are ignored.
func (s *Store) DeleteOffsets(group string, tps []TopicPartition) error {
	s.expireMu.RLock()
	defer s.expireMu.RUnlock()
	return s.deleteOffsets(group, tps)
}

func (s *Store) deleteOffsets(group string, tps []TopicPartition) error {
	err := s.update(func(txn *badger.Txn) error {
		for _, tp := range tps {
			if err := txn.Delete(offsetKey(group, tp.Topic, tp.Partition)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %d offsets of %s: %w", len(tps), group, err)
	}
	return nil
}

// DeleteGroup removes the group's metadata, all its offsets and all its group
// records. A group with more keys than one transaction holds is deleted in
// several; deletes are idempotent, so a crash in between leaves a group that a retry
// finishes.
func (s *Store) DeleteGroup(group string) error {
	prefixes := [][]byte{groupOffsetPrefix(group), groupPrefix(prefixConsumer, group)}
	err := s.with(func(db *badger.DB) error {
		for {
			// Chunks well inside badger's transaction limit (15% of a memtable),
			// by count and by bytes: group names may be 32 KiB long.
			var keys [][]byte
			size, last := 0, true
			err := db.View(func(txn *badger.Txn) error {
				for _, prefix := range prefixes {
					it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
					for it.Rewind(); it.Valid() && last; it.Next() {
						if len(keys) == 1000 || size > 256<<10 {
							last = false
							break
						}
						k := it.Item().KeyCopy(nil)
						keys = append(keys, k)
						size += len(k)
					}
					it.Close()
				}
				return nil
			})
			if err != nil {
				return err
			}
			if err = s.writable(); err != nil {
				return err
			}
			err = db.Update(func(txn *badger.Txn) error {
				for _, k := range keys {
					if err := txn.Delete(k); err != nil {
						return err
					}
				}
				if last {
					return txn.Delete(groupKey(group))
				}
				return nil
			})
			if err != nil || last {
				return err
			}
		}
	})
	if err != nil {
		return fmt.Errorf("delete group %s: %w", group, err)
	}
	return nil
}

// Groups returns, sorted, every group with offsets, metadata or group records in
// the store.
func (s *Store) Groups() ([]string, error) {
	seen := make(map[string]struct{})
	err := s.view(func(txn *badger.Txn) error {
		for _, p := range []byte{prefixOffset, prefixGroup, prefixConsumer} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
			for it.Rewind(); it.Valid(); {
				g, ok := keyGroup(it.Item().Key())
				if !ok {
					it.Close()
					return fmt.Errorf("key %x: %w", it.Item().Key(), ErrCorrupt)
				}
				seen[g] = struct{}{}
				// Skip the group's other keys: seek past its prefix.
				if p == prefixGroup {
					it.Next()
				} else {
					it.Seek(prefixEnd(groupPrefix(p, g)))
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	slices.Sort(out)
	return out, nil
}

// ExpireOffsets deletes the expired offsets of groups for which isEmpty
// reports true (Kafka's offsets.retention.minutes, KIP-211), and returns how
// many it deleted. An offset expires when its explicit expire timestamp (value
// v1) is at or before now; without one, when now - base >= retention, where
// base is the group's current state timestamp if the group is a classic group
// with metadata with a protocol type and a timestamp (it became Empty then),
// else the commit timestamp. A group with a consumer group metadata record (key
// version 3) is a KIP-848 group, whose offsets Kafka expires by commit timestamp
// even if a classic metadata record is left. Groups with members keep their
// offsets. Expiry deletes offsets only: a group's metadata and group records
// stay (and so does the group, in Groups). The caller must also write
// tombstones to __consumer_offsets, or a replay from the log restores them.
func (s *Store) ExpireOffsets(now time.Time, retention time.Duration, isEmpty func(group string) bool) (int, error) {
	groups, err := s.Groups()
	if err != nil {
		return 0, err
	}
	total := 0
	for _, g := range groups {
		if !isEmpty(g) {
			continue
		}
		n, err := s.expireGroup(g, now.UnixMilli(), retention.Milliseconds())
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// expireGroup judges and deletes one group's offsets with writes held off.
func (s *Store) expireGroup(g string, nowMs, retentionMs int64) (int, error) {
	s.expireMu.Lock()
	defer s.expireMu.Unlock()
	meta, hasMeta, err := s.GroupMetadata(g)
	if err != nil {
		return 0, err
	}
	isConsumerGroup, err := s.get(groupRecordKey(Key{Version: ConsumerGroupMetadataKeyV3, Group: g}), func([]byte) error { return nil })
	if err != nil {
		return 0, fmt.Errorf("consumer group metadata %s: %w", g, err)
	}
	offs, err := s.FetchGroup(g)
	if err != nil {
		return 0, err
	}
	var expired []TopicPartition
	for tp, c := range offs {
		if c.ExpireTimestamp > 0 {
			if c.ExpireTimestamp <= nowMs {
				expired = append(expired, tp)
			}
			continue
		}
		base := c.CommitTimestamp
		if !isConsumerGroup && hasMeta && meta.ProtocolType != "" && meta.CurrentStateTimestamp >= 0 {
			base = meta.CurrentStateTimestamp
		}
		if nowMs-base >= retentionMs {
			expired = append(expired, tp)
		}
	}
	if len(expired) == 0 {
		return 0, nil
	}
	if err := s.deleteOffsets(g, expired); err != nil {
		return 0, err
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("expired offsets", "group", g, "count", len(expired))
	}
	return len(expired), nil
}

// Apply materializes one __consumer_offsets record at log offset offset of
// __consumer_offsets partition partition: an offset commit sets or (nil value,
// a tombstone) deletes an offset; group metadata and group records (consumer
// group, share group and share state records) are stored (their values as
// applied, once they decode) or deleted likewise.
// The partition's applied offset advances in the same transaction. Records at
// or below AppliedOffset(partition) were applied already and are skipped, so
// replaying a log prefix twice is harmless. Records with key versions this
// package does not read (KIP-848 types 4 and 16, KIP-932 types 9 and 15) only
// advance the applied offset.
//
// The partition is an argument, not derived from the key, because the store
// does not know offsets.topic.num.partitions (see PartitionFor).
func (s *Store) Apply(partition int32, key, value []byte, offset int64) error {
	return s.ApplyBatch(partition, []Record{{Key: key, Value: value, Offset: offset}})
}

// Record is one __consumer_offsets record at a log offset, for ApplyBatch.
type Record struct {
	Key, Value []byte // Value nil: a tombstone
	Offset     int64
}

// ApplyBatch applies records of one partition, in ascending offset order, in one
// transaction (one fsync): all or none. It is Apply for many records; records at or
// below AppliedOffset(partition) are skipped. The coordinator applies each appended
// batch with it.
func (s *Store) ApplyBatch(partition int32, recs []Record) error {
	return s.apply(partition, recs, applyOpts{skipApplied: true})
}

// Reapply is ApplyBatch without the skip: every record is applied, even at or below
// AppliedOffset(partition), and the applied offset moves to the last record's if
// that is higher. The replay of a partition that starts below the applied offset
// (pending transactional offsets, see TxnReplayStart) re-applies that stretch of the
// log in log order with it, which leaves every key as the log says.
func (s *Store) Reapply(partition int32, recs []Record) error {
	return s.apply(partition, recs, applyOpts{})
}

// ApplyMarker materializes the end of a transaction at log offset marker of
// partition, in one transaction: recs (the transaction's offset commits that take
// effect, ascending offsets, any of them possibly at or below the applied offset) are
// applied, the applied offset moves to marker if that is higher, and the partition's
// TxnReplayStart becomes txnStart (< 0: none). recs may be empty (an ABORT).
func (s *Store) ApplyMarker(partition int32, recs []Record, marker, txnStart int64) error {
	return s.apply(partition, recs, applyOpts{through: marker, setTxn: true, txnStart: txnStart})
}

// TxnReplayStart returns the first offset of the earliest transactional batch of
// partition whose marker was not applied when it was last set (SetTxnReplayStart,
// ApplyMarker); ok is false when none was pending. The replay of the partition starts
// at min(AppliedOffset+1, this), so transactional offset commits that were pending at
// a crash are pending again after it.
func (s *Store) TxnReplayStart(partition int32) (int64, bool) {
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	o, ok := s.txnStart[partition]
	return o, ok
}

// SetTxnReplayStart persists TxnReplayStart of partition (off < 0: none pending).
func (s *Store) SetTxnReplayStart(partition int32, off int64) error {
	return s.apply(partition, nil, applyOpts{setTxn: true, txnStart: off})
}

func (s *Store) apply(partition int32, recs []Record, o applyOpts) error {
	ops, err := decodeApply(partition, recs)
	if err != nil {
		return err
	}
	if len(recs) == 0 && !o.setTxn {
		return nil
	}
	mu := &s.applyMu[uint32(partition)%uint32(len(s.applyMu))]
	mu.Lock()
	defer mu.Unlock()
	applied := s.AppliedOffset(partition)
	last := o.last(recs)
	if o.skipApplied && last <= applied {
		return nil
	}
	newApplied := max(applied, last)
	s.expireMu.RLock()
	defer s.expireMu.RUnlock()
	err = s.update(func(txn *badger.Txn) error {
		for i, op := range ops {
			if (o.skipApplied && recs[i].Offset <= applied) || op.skip {
				continue
			}
			var err error
			if bk, stored := storedKV(op); stored == nil {
				err = txn.Delete(bk)
			} else {
				err = txn.Set(bk, stored)
			}
			if err != nil {
				return err
			}
		}
		if o.setTxn {
			var err error
			if o.txnStart < 0 {
				err = txn.Delete(txnKey(partition))
			} else {
				err = txn.Set(txnKey(partition), binary.BigEndian.AppendUint64(nil, uint64(o.txnStart)))
			}
			if err != nil {
				return err
			}
		}
		if newApplied == applied {
			return nil
		}
		return txn.Set(appliedKey(partition), binary.BigEndian.AppendUint64(nil, uint64(newApplied)))
	})
	if err != nil {
		return fmt.Errorf("apply %d@..%d: %w", partition, last, err)
	}
	s.appliedMu.Lock()
	if newApplied != applied {
		s.applied[partition] = newApplied
	}
	if o.setTxn {
		if o.txnStart < 0 {
			delete(s.txnStart, partition)
		} else {
			s.txnStart[partition] = o.txnStart
		}
	}
	s.appliedMu.Unlock()
	for i, op := range ops {
		if op.skip && recs[i].Offset > applied && s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("skipped record with unread key version", "partition", partition, "offset", recs[i].Offset, "version", op.key.Version)
		}
	}
	return nil
}

// storedKV is the badger key and stored value (nil for a tombstone) of op, a record
// that is not skipped.
func storedKV(op applyOp) (key, value []byte) {
	switch {
	case op.key.IsGroupRecord():
		return groupRecordKey(op.key), op.value // value is nil for a tombstone
	case !op.key.IsOffset():
		return groupKey(op.key.Group), op.value // group metadata; nil for a tombstone
	}
	key = offsetKey(op.key.Group, op.key.Topic, op.key.Partition)
	if !op.delete {
		value = encodeStored(op.c)
	}
	return key, value
}

// AppliedOffset returns the log offset of the last record applied from
// __consumer_offsets partition partition, or -1 if none: replay resumes at
// AppliedOffset(p)+1.
func (s *Store) AppliedOffset(partition int32) int64 {
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	if o, ok := s.applied[partition]; ok {
		return o
	}
	return -1
}

func checkLens(group, topic, metadata string) error {
	for _, v := range []string{group, topic, metadata} {
		if len(v) > math.MaxInt16 {
			return fmt.Errorf("%d bytes: %w", len(v), ErrTooLong)
		}
	}
	return nil
}

func groupOffsetPrefix(group string) []byte { return groupPrefix(prefixOffset, group) }

// groupPrefix is prefix | u16 len | group: every key of group under prefix ('o',
// 'c') starts with it, and no other group's does.
func groupPrefix(prefix byte, group string) []byte {
	k := make([]byte, 0, 3+len(group))
	k = append(k, prefix)
	return appendString(k, group)
}

// groupRecordKey is the badger key of a group record (IsGroupRecord): the group's 'c'
// prefix, then the Kafka key without its group (the record type, then the member for
// types 5, 7, 8, 10, 13 and 14, or the topic id and partition for share state).
// Within a group these sort as the Kafka keys do.
func groupRecordKey(k Key) []byte {
	b := make([]byte, 0, 27+len(k.Group)+len(k.Member))
	b = append(b, prefixConsumer)
	b = appendString(b, k.Group)
	b = binary.BigEndian.AppendUint16(b, uint16(k.Version))
	switch {
	case hasMember(k.Version):
		b = appendString(b, k.Member)
	case k.Version == ShareStateKeyV1001:
		b = append(b, k.TopicID[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(k.Partition))
	}
	return b
}

// groupRecordKafkaKey rebuilds the Kafka key of a group record of group from the
// rest of its badger key (after the group's prefix).
func groupRecordKafkaKey(group string, rest []byte) ([]byte, error) {
	r := reader{b: rest}
	k := Key{Version: r.int16(), Group: group}
	if r.err == nil && !k.IsGroupRecord() {
		return nil, fmt.Errorf("record type %d: %w", k.Version, ErrCorrupt)
	}
	switch {
	case hasMember(k.Version):
		k.Member = r.string()
	case k.Version == ShareStateKeyV1001:
		copy(k.TopicID[:], r.take(16))
		k.Partition = r.int32()
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return encodeGroupRecordKey(k), nil
}

func offsetKey(group, topic string, partition int32) []byte {
	k := make([]byte, 0, 9+len(group)+len(topic))
	k = append(k, prefixOffset)
	k = appendString(k, group)
	k = appendString(k, topic)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

func groupKey(group string) []byte {
	return appendString([]byte{prefixGroup}, group)
}

func appliedKey(partition int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixApplied}, uint32(partition))
}

func txnKey(partition int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixTxn}, uint32(partition))
}

// keyGroup extracts the group of an 'o', 'g' or 'c' key.
func keyGroup(k []byte) (string, bool) {
	if len(k) < 3 {
		return "", false
	}
	n := int(binary.BigEndian.Uint16(k[1:]))
	if len(k) < 3+n {
		return "", false
	}
	return string(k[3 : 3+n]), true
}

// prefixEnd returns the smallest key greater than every key with prefix p.
// p always starts with a prefix byte below 0xFF, so a successor exists.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// scanGroup calls fn for each offset of group, in key order.
func scanGroup(txn *badger.Txn, group string, values bool, fn func(TopicPartition, Committed) error) error {
	prefix := groupOffsetPrefix(group)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: values, PrefetchSize: 16})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		r := reader{b: item.Key()[len(prefix):]}
		tp := TopicPartition{Topic: r.string(), Partition: r.int32()}
		if err := r.done(); err != nil {
			return fmt.Errorf("key %x: %w", item.Key(), err)
		}
		var c Committed
		if err := item.Value(func(v []byte) error {
			var err error
			c, err = decodeStored(v)
			return err
		}); err != nil {
			return err
		}
		if err := fn(tp, c); err != nil {
			return err
		}
	}
	return nil
}

// encodeStored is the badger value of a committed offset; see doc.go.
func encodeStored(c Committed) []byte {
	b := make([]byte, 0, 29+len(c.Metadata))
	b = append(b, storedValueV1)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(c.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(c.CommitTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(c.ExpireTimestamp))
	return append(b, c.Metadata...)
}

func decodeStored(b []byte) (Committed, error) {
	if len(b) < 29 || b[0] != storedValueV1 {
		return Committed{}, fmt.Errorf("stored offset %x: %w", b, ErrCorrupt)
	}
	return Committed{
		Offset:          int64(binary.BigEndian.Uint64(b[1:])),
		LeaderEpoch:     int32(binary.BigEndian.Uint32(b[9:])),
		CommitTimestamp: int64(binary.BigEndian.Uint64(b[13:])),
		ExpireTimestamp: int64(binary.BigEndian.Uint64(b[21:])),
		Metadata:        string(b[29:]),
	}, nil
}

// slogAdapter routes badger's logging to slog: its chatty Info and Debug at
// Debug, so a healthy store is silent at the default level.
type slogAdapter struct{ log *slog.Logger }

func (a slogAdapter) Errorf(f string, args ...any) { a.logf(slog.LevelError, f, args) }
func (a slogAdapter) Warningf(f string, args ...any) {
	a.logf(slog.LevelWarn, f, args)
}
func (a slogAdapter) Infof(f string, args ...any)  { a.logf(slog.LevelDebug, f, args) }
func (a slogAdapter) Debugf(f string, args ...any) { a.logf(slog.LevelDebug, f, args) }

func (a slogAdapter) logf(l slog.Level, f string, args []any) {
	ctx := context.Background()
	if !a.log.Enabled(ctx, l) {
		return
	}
	a.log.Log(ctx, l, fmt.Sprintf(f, args...), "component", "badger")
}

var _ badger.Logger = slogAdapter{}
