// Package producers is the partition-side producer state of idempotent and
// transactional producers, shared by the storage implementations: per producer id the
// epoch, the last five batches' sequence ranges and offsets, the coordinator epoch of
// its last marker and its open transaction; and the partition's aborted transactions.
// It also holds the two on-disk encodings the segment log uses: producer snapshots and
// Kafka's .txnindex entries.
//
// Usage, inside a log's append under the log's lock:
//
//	p := st.Begin()
//	for each batch { dup, err := p.Check(meta, producers.Client) ... }
//	... append the bytes ...
//	p.Commit() // only after the append succeeded
//
// # Invariants
//
//   - A Pending never changes the State until Commit: a failed multi-batch append
//     leaves the producer state as it was (all or nothing, like the append itself).
//   - The aborted transactions are kept sorted by marker offset (LastOffset): markers
//     are appended in offset order, and Truncate only cuts a suffix.
//   - ongoing holds exactly the producers whose TxnStartOffset >= 0.
//
// # Concurrency
//
// State is not safe for concurrent use; the owning log guards it with its lock. The
// codecs are pure functions.
package producers
