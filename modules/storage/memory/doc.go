// Package memory is the "storage.memory" module: kernel.Storage and kernel.Log kept in
// memory, for tests and the dev profile. Nothing survives the process.
//
// It follows the segment log's semantics exactly (modules/storage/storagetest checks
// both): a partition is a list of segments that roll on segment.bytes and segment.ms,
// retention and DeleteRecordsBefore delete whole segments, and Truncate drops the whole
// batch that holds the truncation offset. Time and size retention also take a non-empty
// active segment past retention: a new, empty segment is rolled at the log end offset
// and the old ones go, so the log is empty and the next append gets the old next offset. Read returns kernel.Chunks with Bytes that
// point into the stored segment buffers; they are never modified afterwards (Truncate
// copies the kept prefix into a fresh buffer), so Release has nothing to do.
//
// Producer state (idempotence, transactions) follows the same rules as the segment log
// (modules/storage/internal/producers); Truncate rebuilds it from the kept batches, so
// sequence ranges of empty AppendProducer calls are forgotten there, as after a crash.
// Leader epochs use the same cache (modules/storage/internal/epochs), without a file;
// Reset replaces the segments with one empty segment at the new offset; the high
// watermark is an atomic in the partition, so it outlives a Close of the Log handle
// like the data does.
//
// # Compaction
//
// A Log implements compact.Log (cleanup.policy compact or compact,delete) with the
// segment log's semantics: the same cleanable end (the active segment's base, the high
// watermark, the first unstable offset, min.compaction.lag.ms), the same dirty ratio
// (dirty sealed bytes below that end over those plus the clean bytes below the first
// dirty offset), and compact.Mapper and compact.Filter decide what a pass keeps. A pass
// copies the sealed segments' pointers under the read lock, maps and rewrites them
// without the lock (sealed segments never change), and swaps each group of at most
// segment.bytes in under the write lock if its segments are still there; otherwise
// (Truncate, retention, Reset, Close meanwhile) the pass is abandoned. The first dirty
// offset lives in the partition, so it outlives a Close of the Log handle; it is set
// in the same critical section as the pass's last swap, and ABORT markers a pass
// removed leave the producer state's aborted transactions at each swap. There is
// nothing to crash: a swap is one assignment of the segment list.
//
// Usage:
//
//	storage:
//	  use: memory
//	  retention_check_interval_ms: 300000
//
// # Invariants
//
//   - A segment's data is append-only: bytes a reader holds never change.
//   - Offsets strictly increase across segments; the last segment is the active one.
//   - A sealed segment is never modified: a clean builds new segments and swaps them
//     in, keeping every kept batch's offsets, so offsets still strictly increase
//     (with gaps).
//   - firstDirty <= the log end offset.
//   - A closed Log returns kernel.ErrLogClosed; its data stays in the Storage until
//     Remove, and Open returns a new Log over it.
//
// # Concurrency
//
// Lock order: Store.mu, then partition.mu. Every Log method takes partition.mu; reads
// take it shared. SetHighWatermark is one atomic store, without the lock. A cleaning
// pass (one at a time per Log: the cleaner's rule) holds no lock while it maps and
// rewrites, the read lock to plan and the write lock for each swap. The retention
// loop is owned by the Module and stopped in Stop.
package memory
