// Package replication is the "replication.isr" module: the partition-leader path. It
// owns the local replicas of partitions (a Partition holds the Log, the leader epoch,
// the high watermark and the ISR), and serves Produce, Fetch, ListOffsets,
// DeleteRecords, OffsetForLeaderEpoch, WriteTxnMarkers and DescribeProducers for the
// partitions this node leads.
//
// In this issue a broker is a single node: replication factor 1, ISR = {self}, and the
// HW moves to the log end offset at every append. The code is shaped for the ISR issue
// that follows: acks=all already waits in the purgatory for the HW to pass the batch
// (it is satisfied at once today), the HW is the minimum LEO over the ISR (only the
// leader's is known today), and the leader-epoch cache answers OffsetForLeaderEpoch.
//
// Usage (config):
//
//	modules:
//	  replication:
//	    use: isr
//	    fetch_session_cache_slots: 1000   # KIP-227 sessions; 0 disables
//	    fetch_session_eviction_ms: 120000 # idle time before a session may be evicted
//	    max_produce_records_bytes: 104857600
//
// The module looks up "storage" (kernel.Storage) and "metadata" (kernel.Metadata) when
// provisioned. Start subscribes to metadata images: every partition whose leader or
// replica set holds this node is opened with its topic's resolved config
// (kconfig.ResolveTopic over kconfig.MergeBroker), config changes are applied with
// Log.SetConfig, and partitions whose topic is gone (or was re-created with a new ID,
// or moved away) are closed and removed from storage. A request for a topic that the
// current image has but the subscription has not delivered yet opens the partition on
// demand; images older than one acted on that way are skipped, so a late image cannot
// remove a partition a newer image created.
//
// Fetch responses are encoded by hand (fetch_encode.go, all versions 4-18) into a
// kernel.Body whose chunks interleave the encoded fields with the Log.Read chunks, so
// record bytes go from the segment file to the socket with sendfile and are never
// copied; what a consumer receives is byte for byte what is in the segment.
//
// # Produce transforms
//
// The module implements kernel.TransformHook: the transforms module registers a
// kernel.ProduceTransformer with SetProduceTransformer at its Provision (nil unsets;
// the transformer sits behind an atomic pointer, loaded once per Produce request).
// For each partition of a Produce whose topic is Bound (never an internal topic), the
// input is validated as usual, then TransformProduce(ctx, tp, records) runs with the
// request's context, and its output is validated again with the same checks
// (max.message.bytes, framing, CRC, timestamps, LogAppendTime stamping) before it is
// appended in place of the input; the stored bytes, which fetches serve unmodified,
// are the output, and sluice_produce_bytes_total counts them. acks=all waits for the
// output's last offset. An error wrapping a *kerr.Error answers that code (its text as
// the v8+ error message); any other error answers UNKNOWN_SERVER_ERROR and is logged;
// an output that fails validation answers the validation's code; in all three cases
// nothing is appended. An empty output (every record dropped) appends nothing and
// answers success with BaseOffset = the partition's current log end offset and the
// usual LogStartOffset: Kafka has no notion of a produce whose records were all
// filtered, and the log end offset is the offset the records would have started at,
// without assigning or skipping any. The kernel.Partitions append path (internal
// writers: groups, transactions, the transforms module's own dead-letter and derived
// writes) is never transformed. Without a registered transformer the produce path is
// unchanged: Bound is consulted only when one is set.
//
// # Idempotent producers and transactions
//
// The partition side of producer state lives in the storage Log (kernel.Log's
// AppendProducer, Producer, FirstUnstableOffset, AbortedTxns, Producers); this module
// drives it:
//
//   - Produce: records of a producer (a batch with producer id >= 0) must be exactly
//     one batch with a base sequence >= 0 (else INVALID_RECORD with a message, as
//     Kafka). They are appended with Log.AppendProducer under Partition.mu, with the
//     range base sequence .. base + LastOffsetDelta (wrapping past MaxInt32). A
//     duplicate of one of the producer's last five batches appends nothing and answers
//     the original base offset (and LogAppendTime); acks=all still waits for the HW to
//     pass the original's last offset. The log's errors become
//     OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE (a
//     non-transactional batch during the producer's open transaction) and
//     TRANSACTION_COORDINATOR_FENCED. Authorization: a transactional request needs
//     WRITE on its transactional id; an idempotent one needs nothing more than the
//     WRITE on each topic every produce already needs (as Kafka since 2.8, KIP-679:
//     IDEMPOTENT_WRITE on the cluster or WRITE on any topic is checked when the
//     producer id is handed out, and a producer that may write the partition has the
//     latter). Without a producer id the path is unchanged and allocation-free.
//   - KIP-890 verification: before the first transactional batch of a producer's
//     transaction in a partition (the log knows no open transaction of it), the txn
//     module's kernel.TxnVerifier, when the "txn" role has one (looked up on first use:
//     the txn module depends on us), confirms that the partition was added to the
//     transaction; its *kerr.Error is the partition's code, kernel.ErrNotCoordinator
//     skips the check (another broker coordinates), any other failure answers the
//     retriable NOT_ENOUGH_REPLICAS.
//   - Markers: the module implements kernel.TxnMarkerWriter (WriteTxnMarker) and the
//     WriteTxnMarkers API (v0-v1, CLUSTER_ACTION). A marker is built with
//     recordbatch.BuildMarker, appended with AppendLeader under Partition.mu (leader
//     epoch stamped, producer and coordinator epochs checked by the log) and committed
//     like an acks=all produce. kernel.TxnMarkerHook listeners (the group coordinator's
//     transactional offset commits) are called for markers on internal topics once
//     committed, in log order per partition, from both paths (see DESIGN.md).
//   - Read path: the last stable offset is min(HW, Log.FirstUnstableOffset()); every
//     Fetch answer carries it. read_committed fetches read up to the LSO (a batch
//     boundary) and list the aborted transactions overlapping [fetch offset, offset
//     after the last batch read): the log is asked up to the LSO (usually nothing), and
//     only if it answers some are the read's batch headers walked (header prefixes, by
//     pread for file chunks) to narrow the bound, so the common path stays zero-copy.
//     Markers are appended through the same path as records, so they wake delayed
//     fetches: a read_committed long poll parked at the LSO completes when a marker
//     moves it. ListOffsets with isolation level 1 answers latest = LSO and never a
//     timestamp (or max-timestamp) offset at or past the LSO, as Kafka.
//   - DescribeProducers (v0) lists Log.Producers() of partitions this node leads (READ
//     on the topic).
//
// Produce transforms and producers: the output of an idempotent batch must be one
// batch with the input's producer id, epoch, base sequence and transactional flag
// (else UNKNOWN_SERVER_ERROR, logged: a transform bug); it is appended with the
// INPUT's sequence range, so a retry of the input is recognised as a duplicate even
// when the record count changed. When the transform drops every record,
// AppendProducer(nil, range) records the range without appending anything: the
// producer's next batch is in order and a retry is answered as a duplicate (base
// offset = the log end at the time). Crash caveat: the log's recovery can read only
// batch headers, so after a crash a transformed batch whose record count changed is
// remembered with its header's (smaller) range, and a dropped batch's range is lost
// unless a producer-state snapshot holds it; the producer's next batch may then see
// OUT_OF_ORDER_SEQUENCE_NUMBER once (Kafka producers bump their epoch and go on) or a
// retry of such a batch may be appended again.
//
// # Invariants
//
//   - Offsets are assigned only by the leader, by Log.AppendLeader or
//     Log.AppendProducer, under Partition.mu; the leader epoch is stamped into each
//     batch (bytes 12-16, outside the CRC) under the same lock, so a batch carries the
//     epoch it was written in.
//   - HW <= LEO, and the HW never moves down. Consumers never see past the HW: Fetch
//     reads with maxOffset = HW (LSO <= HW for read_committed) and ListOffsets answers
//     at most the HW (the LSO for read_committed).
//   - A producer's batch is checked and appended in one Log.AppendProducer call under
//     Partition.mu: no other append of the partition slips between its sequence check
//     and its offset assignment.
//   - A batch is validated whole (CRC, framing, record count, size, timestamps) before
//     the append; a partition's records are appended all or nothing.
//   - acks=all is answered only when the HW has passed the partition's last offset and
//     the ISR is at least min.insync.replicas (NOT_ENOUGH_REPLICAS before the append
//     when it is not).
//   - Leader epochs only grow: an image with an older epoch does not lower ours.
//   - A partition is published in the module's map only after its placement is set,
//     so a request never finds a partition that does not know its leader (a produce
//     racing a topic's creation would get NOT_LEADER_OR_FOLLOWER, and with acks=0 the
//     producer would lose the records).
//   - Every Log.Read result is released exactly once: by Body.Release after the kernel
//     wrote (or dropped) the response, or at once when a delayed fetch re-reads.
//   - Per-partition failures are error codes; a handler returns a Go error only when the
//     connection must close (acks=0 with a failed partition, as Kafka does; a request
//     context cancelled while waiting).
//
// The leader-epoch cache is in memory only: it starts, when this node becomes leader,
// with the image's epoch at the current log end offset; OffsetForLeaderEpoch and the
// leader epoch in ListOffsets answers know only epochs led since this process started.
// The ISR issue persists it (leader-epoch-checkpoint, owned by storage) together with
// the HW checkpoint; today the HW at open is the log end (committed by ISR = {self}).
//
// # Concurrency
//
// Lock order: sessionCache.mu before fetchSession.mu; purgatory.mu is taken last and
// never held while calling out. Module.mu (the partition map) is never held while
// opening or removing a log, nor while taking Partition.mu. The read path takes no
// partition lock: placement (leader, epoch, ISR, config) is an immutable value behind an
// atomic pointer and the HW is an atomic. Module.mu is a read lock on the hot path
// (partition lookup). Placement updates carry their image version, so an older image
// applied after a newer one (a lazy open racing the subscription) changes nothing.
//
// Delayed operations (a fetch below min_bytes, an acks=all produce) wait in the
// purgatory on the request's own goroutine: the purgatory owns no goroutines. An
// append, HW move, log-start move or placement change wakes the operations watching
// that partition, which re-check their condition; there is no polling. Stop closes
// the purgatory (waiting fetches answer with what they have, waiting produces with
// REQUEST_TIMED_OUT), unsubscribes from metadata (waiting for a running image apply)
// and waits for the waiting operations to return.
package replication
