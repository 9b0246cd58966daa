// Package offsets is the committed-offset store of the group coordinator: the Kafka
// __consumer_offsets record format, View (what the coordinator needs of a store), and
// two Views: Store, a badger/v4 store that materializes those records for fast reads
// and quick restarts, and Memory, which keeps them in memory only.
//
// The log (__consumer_offsets) is the truth; a store is a view of it that a load
// completes by replaying the log from AppliedOffset(p)+1. Store keeps its view across
// restarts; Memory starts empty (AppliedOffset -1), so every start replays each
// partition from the log's start. offsetstest is the conformance suite both pass.
//
// Usage sketch:
//
//	s, err := offsets.Open(filepath.Join(dataDir, "groups", "offsets"), log) // or offsets.NewMemory()
//	defer s.Close()
//	key := offsets.EncodeOffsetKey("g", "orders", 3)
//	val := offsets.EncodeOffsetValue(offsets.Committed{Offset: 42, LeaderEpoch: 5, CommitTimestamp: nowMs})
//	off := appendToConsumerOffsets(p, key, val)     // the caller's replicated append
//	err = s.ApplyBatch(p, []offsets.Record{{Key: key, Value: val, Offset: off}})
//	c, ok, err := s.Fetch("g", "orders", 3)
//
// # Record format (__consumer_offsets)
//
// Kafka's GroupCoordinator formats, so tools that read the topic understand
// it. Big-endian. string = int16 length + UTF-8 bytes; nullable string uses
// length -1 for null; bytes = int32 length + bytes; array = int32 count.
// Every key and value starts with an int16 version. Frozen: these are Kafka's.
//
// Keys:
//
//	| version 0/1 | group string | topic string | partition int32 |   offset commit key (written: 1; read: 0, 1)
//	| version 2   | group string |                                    group metadata key (written and read: 2)
//
// Key versions 3 and up (KIP-848 consumer group records) return
// ErrUnsupportedVersion; Apply skips them.
//
// Offset commit value (written: 1 if ExpireTimestamp > 0, else 3; read: 0-4):
//
//	field              v0  v1  v2  v3  v4
//	version int16       x   x   x   x   x
//	offset int64        x   x   x   x   x
//	leader_epoch int32              x   x   (absent: NoLeaderEpoch, -1)
//	metadata string     x   x   x   x   x
//	commit_ts int64     x   x   x   x   x
//	expire_ts int64         x               (absent: 0, meaning none)
//	tagged fields                       x   (tag 0: topic id; skipped)
//
// Version 4 and group value version 4 are "flexible": strings, bytes and
// arrays carry uvarint(length+1) (0 is null), and tagged-field sections
// (uvarint count, then uvarint tag, uvarint size, bytes) follow each struct.
// They are read, never written; their tags are skipped. Versions above 4
// return ErrUnsupportedVersion.
//
// Group metadata value (written: 3; read: 0-4):
//
//	field                          v0  v1  v2  v3  v4
//	version int16                   x   x   x   x   x
//	protocol_type string            x   x   x   x   x
//	generation int32                x   x   x   x   x
//	protocol nullable string        x   x   x   x   x
//	leader nullable string          x   x   x   x   x
//	current_state_ts int64                  x   x   x   (absent: NoTimestamp, -1)
//	members array of:               x   x   x   x   x
//	  member_id string              x   x   x   x   x
//	  group_instance_id nullable                x   x
//	  client_id string              x   x   x   x   x
//	  client_host string            x   x   x   x   x
//	  rebalance_timeout int32           x   x   x   x   (v0: equals session_timeout)
//	  session_timeout int32         x   x   x   x   x
//	  subscription bytes            x   x   x   x   x
//	  assignment bytes              x   x   x   x   x
//	  tagged fields                                 x
//	tagged fields                                   x
//
// A null value (tombstone) deletes: an offset key's offset, a group key's
// metadata (Kafka tombstones each offset of a deleted group separately).
// Decoders are strict: short input, negative lengths (other than a null
// nullable string), member counts the remaining bytes cannot hold, and
// trailing bytes are ErrCorrupt.
//
// # Badger key layout
//
// Length-prefixed (u16) strings, so a group's keys form one prefix and no
// escaping is needed; FetchGroup and DeleteGroup are prefix scans.
//
//	0x00 "layout"                                  -> u32 layout version (1); Open refuses others
//	'a' | partition u32                            -> last applied __consumer_offsets offset, i64
//	'r' | partition u32                            -> TxnReplayStart: first offset of the earliest
//	                                                  transactional batch whose marker is not
//	                                                  applied, i64 (absent: none)
//	'g' | u16 len | group                          -> group metadata value, Kafka bytes as applied
//	'o' | u16 len | group | u16 len | topic | p u32 -> stored offset:
//	    | 0x01 | offset i64 | leader_epoch i32 | commit_ts i64 | expire_ts i64 | metadata ... |
//
// The stored offset keeps the leader epoch and the expire timestamp together,
// which no single Kafka value version does. The layout version is bumped on
// any change; a store of another layout is rebuilt from the log by the caller.
//
// # Durability
//
// Badger is opened with SyncWrites: each transaction is fsynced before it
// returns, so an acknowledged commit survives a crash of the process or the
// machine even before the log exists to replay from. Close is not needed for
// durability (a test reopens a copy of a directory that was never closed);
// it only flushes memtables so the next Open replays less.
//
// # Invariants
//
//   - AppliedOffset(p) only grows, and is written in the transaction that
//     applies the record, so the store never has a record's effect without
//     knowing it applied it (nor the reverse).
//   - CommitBatch is all or nothing.
//   - Commit and CommitBatch do not move AppliedOffset: a caller that commits
//     directly must also append to the log, or a rebuild loses the commit.
//   - TxnReplayStart(p), when set, is where a replay must start if it is below
//     AppliedOffset(p)+1 (transactional offsets pending at a crash are pending
//     again). The caller keeps it at or below every open transaction's first batch
//     (modules/groups/txn.go); ApplyMarker writes it with the marker's effects.
//   - ApplyBatch skips records at or below AppliedOffset(p); Reapply and
//     ApplyMarker apply whatever they are given (a replay from TxnReplayStart
//     re-applies that stretch of the log in log order) and never lower it.
//   - A store written before the 'r' key existed has none: nothing was pending.
//   - Memory applies exactly as Store (same decoding, skips and all-or-none
//     batches); offsetstest holds both to it.
//
// # Concurrency
//
// Every method is safe for concurrent use. Badger serializes transactions;
// conflict detection is off, so concurrent commits of one key are last writer
// wins. Apply is serialized by a mutex (check-and-advance of the applied
// offset). ExpireOffsets holds writes off while it judges and deletes one
// group, so a commit racing it is never deleted unjudged. Lock order: applyMu,
// expireMu, mu. Close waits for running calls; later calls return ErrClosed.
// Memory has one RWMutex: an apply holds it exclusively from its applied-offset
// check to its last write, reads hold it shared.
package offsets
