// Package offsets is the committed-offset store of the group coordinator: the Kafka
// __consumer_offsets record format, View (what the coordinator needs of a store), and
// two Views: Store, a badger/v4 store that materializes those records for fast reads
// and quick restarts, and Memory, which keeps them in memory only. Besides offsets
// and classic group metadata they hold the group records: KIP-848 consumer group
// records, KIP-932 share group records and Sluice's share-partition state, which the
// coordinator reads back (GroupRecords) to restore its consumer and share groups.
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
//	| version 0/1  | group string | topic string  | partition int32 |  offset commit key (written: 1; read: 0, 1)
//	| version 2    | group string |                                    group metadata key (written and read: 2)
//	| version 3    | group string |                                    consumer group metadata (KIP-848)
//	| version 5    | group string | member string |                    consumer group member metadata
//	| version 6    | group string |                                    consumer group target assignment metadata
//	| version 7    | group string | member string |                    consumer group target assignment of a member
//	| version 8    | group string | member string |                    consumer group current assignment of a member
//	| version 10   | group string | member string |                    share group member metadata (KIP-932)
//	| version 11   | group string |                                    share group metadata
//	| version 12   | group string |                                    share group target assignment metadata
//	| version 13   | group string | member string |                    share group target assignment of a member
//	| version 14   | group string | member string |                    share group current assignment of a member
//	| version 1001 | group string | topic id uuid | partition int32 |  share-partition state (Sluice's; share.go)
//
// From version 3 on the key version is Kafka's record type (1001 is Sluice's own,
// far above Kafka's). Types 4 (consumer group partition metadata), 9 (share group
// partition metadata, gone from Kafka 4.1), 15 (share group state partition
// metadata: Sluice keeps share state as type 1001 instead) and 16 (regular
// expressions) are not read: DecodeKey returns ErrUnsupportedVersion and Apply
// skips them (the applied offset moves past them). The consumer and the share
// group records (Key.IsGroupRecord) each have their own key encoder
// (EncodeConsumerGroupKey: 3-8; EncodeShareGroupKey: 10-14; EncodeShareStateKey),
// which refuses the other kinds.
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
// Consumer group record values (types 3, 5-8) and share group record values
// (types 10-14): version 0 only, read and written; flexible (compact strings
// and arrays, uuids as 16 raw bytes, a tagged-field section after each struct,
// nested ones included). Unknown tags are skipped; none are written but
// MetadataHash. Nullable strings decode null
// as "" and encode "" as null; empty arrays decode as nil.
//
//	type 3 ConsumerGroupMetadataValue:      epoch int32; tag 0: metadata_hash int64
//	                                        (8 bytes, written only when not 0)
//	type 5 ConsumerGroupMemberMetadataValue: instance_id nullable, rack_id nullable,
//	                                        client_id, client_host, subscribed_topic_names
//	                                        array of string, subscribed_topic_regex nullable,
//	                                        server_assignor nullable, rebalance_timeout_ms
//	                                        int32 (Kafka's tag 0, classic member metadata,
//	                                        is skipped)
//	type 6 ConsumerGroupTargetAssignmentMetadataValue: assignment_epoch int32
//	type 7 ConsumerGroupTargetAssignmentMemberValue: topic_partitions
//	type 8 ConsumerGroupCurrentMemberAssignmentValue: member_epoch int32,
//	                                        previous_member_epoch int32, state int8,
//	                                        assigned_partitions, partitions_pending_revocation
//	type 10 ShareGroupMemberMetadataValue:  rack_id nullable, client_id, client_host,
//	                                        subscribed_topic_names array of string
//	type 11 ShareGroupMetadataValue:        as type 3: epoch int32; tag 0: metadata_hash
//	type 12 ShareGroupTargetAssignmentMetadataValue: as type 6: assignment_epoch int32
//	type 13 ShareGroupTargetAssignmentMemberValue: as type 7: topic_partitions
//	type 14 ShareGroupCurrentMemberAssignmentValue: member_epoch int32,
//	                                        previous_member_epoch int32, state int8,
//	                                        assigned_partitions (no pending revocation,
//	                                        unlike type 8)
//	topic partitions: array of { topic_id uuid, partitions array of int32, tags }
//
// The share state value (type 1001, version 0, flexible) is described in share.go.
//
// The store keeps these values' bytes exactly as applied, once they decode with
// their type's decoder; the coordinator decodes them (GroupRecords).
// Array counts are checked against the bytes left before anything is allocated.
//
// A null value (tombstone) deletes: an offset key's offset, a group key's
// metadata, a group record (Kafka tombstones each offset of a deleted group, and
// each of its consumer or share group records, separately).
// Decoders are strict: short input, negative lengths (other than a null
// nullable string), null arrays, member and other array counts the remaining
// bytes cannot hold, and trailing bytes are ErrCorrupt.
//
// # Badger key layout
//
// Length-prefixed (u16) strings, so a group's keys form one prefix and no
// escaping is needed; FetchGroup and DeleteGroup are prefix scans.
//
//	0x00 "layout"                                  -> u32 layout version (1); Open refuses others
//	0x00 "kip848"                                  -> u32 1: the store applies consumer group records
//	                                                  (absent: written before it did; see Upgrade)
//	'a' | partition u32                            -> last applied __consumer_offsets offset, i64
//	'c' | u16 len | group | type u16 [| u16 len | member] [| topic id | p u32]
//	                                               -> group record value, Kafka bytes as applied
//	                                                  (member for types 5, 7, 8, 10, 13, 14;
//	                                                  topic id and partition for type 1001)
//	'r' | partition u32                            -> TxnReplayStart: first offset of the earliest
//	                                                  transactional batch whose marker is not
//	                                                  applied, i64 (absent: none)
//	'g' | u16 len | group                          -> group metadata value, Kafka bytes as applied
//	'o' | u16 len | group | u16 len | topic | p u32 -> stored offset:
//	    | 0x01 | offset i64 | leader_epoch i32 | commit_ts i64 | expire_ts i64 | metadata ... |
//
// The stored offset keeps the leader epoch and the expire timestamp together,
// which no single Kafka value version does. A 'c' key is the group's prefix and
// then the Kafka key without its group, so a group's group records (of every kind)
// are one prefix (GroupRecords and DeleteGroup are prefix scans) and sort as
// their Kafka keys do; the Kafka key is rebuilt from it. The layout version is
// bumped on any change that an older reader would misread; a store of another
// layout is rebuilt from the log by the caller.
//
// # Upgrade
//
// Stores written before the consumer group records were read have skipped
// them while their applied offsets moved past them, so they lack them. Open
// recognizes such a store by the missing 0x00 "kip848" key: it deletes the
// applied offsets (nothing else) and sets the key, in one transaction, and the
// next load replays every partition from the log's start, as with Memory. The
// layout stays 1, so an older binary still opens the store and ignores the 'c'
// keys (it neither reads nor deletes them).
//
// The share group records (types 10-14) and share state (1001) need no such
// step: no version of Sluice wrote them before this package read them, so no
// store has skipped one. A type this package starts to read later that an
// earlier version may have skipped needs a marker key of its own, as "kip848".
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
//   - A group record's stored value decodes with its type's decoder (the apply
//     checks it first; a value that does not fails the batch).
//   - A group is in Groups while it has an offset, metadata or a group record;
//     DeleteGroup removes all three kinds. ExpireOffsets deletes offsets
//     only; it judges a group with a consumer group metadata record (type 3) by
//     commit timestamps, as Kafka does KIP-848 groups.
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
