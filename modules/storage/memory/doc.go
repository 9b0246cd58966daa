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
//   - A closed Log returns kernel.ErrLogClosed; its data stays in the Storage until
//     Remove, and Open returns a new Log over it.
//
// # Concurrency
//
// Lock order: Store.mu, then partition.mu. Every Log method takes partition.mu; reads
// take it shared. SetHighWatermark is one atomic store, without the lock. The retention loop is owned by the Module and stopped in Stop.
package memory
