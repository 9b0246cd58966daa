// Package epochs is a partition's leader-epoch cache (Kafka's LeaderEpochFileCache),
// shared by the storage implementations: in ascending order, each leader epoch the log
// holds records of (or was assigned) with the first offset of that epoch. It also holds
// the text encoding of Kafka's leader-epoch-checkpoint file, which the segment log
// keeps in each partition directory.
//
// Usage, under the owning log's lock:
//
//	var c epochs.Cache
//	c.Assign(h.PartitionLeaderEpoch, base)   // an appended batch with a newer epoch
//	c.TruncateFromEnd(newLogEnd)             // Truncate
//	c.TruncateFromStart(newLogStart)         // DeleteRecordsBefore, retention
//	epoch, end := c.EndOffsetFor(req, logEnd) // OffsetForLeaderEpoch
//	file := epochs.Encode(c.Entries())
//
// # Invariants
//
//   - Epochs strictly increase and start offsets never decrease along the entries; no
//     epoch and no start offset is negative. Every mutator keeps this: Assign adds only
//     an epoch newer than the latest with a start not below the latest's, the truncations
//     only remove entries or raise the first entry's start, and Decode rejects a file
//     that breaks it.
//   - The cache knows nothing of the log: the owner checks offsets against its log end
//     (AssignEpoch's "not above LogEndOffset") and applies the truncations when its log
//     start or end move.
//
// # Concurrency
//
// Cache is not safe for concurrent use; the owning log guards it with its lock. Encode
// and Decode are pure functions.
package epochs
