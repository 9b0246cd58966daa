// Package replication is the "replication.isr" module: Kafka's ISR replication. It
// owns the local replicas of partitions (a Partition holds the Log, the leader epoch,
// the high watermark and the ISR), serves Produce, Fetch, ListOffsets, DeleteRecords,
// OffsetForLeaderEpoch, WriteTxnMarkers and DescribeProducers for the partitions this
// node leads, and fetches the partitions it follows from their leaders.
//
// # Replication
//
// Images decide roles: a partition whose leader is this node is led here; one whose
// replicas hold this node and whose leader is another broker is followed (clients get
// NOT_LEADER_OR_FOLLOWER). With replication factor 1 the HW moves to the log end at
// every append and nothing else runs: no fetcher, no ISR check.
//
//   - Follower fetch (fetcher.go, follower.go): one fetcher goroutine per source
//     broker and num.replica.fetchers shard, over one internal/kclient connection to
//     the leader's inter-broker listener (internal/interbroker: inter.broker.listener.name,
//     else security.inter.broker.protocol's first listener, else the first listener;
//     TLS and SASL as that listener's protocol says, docs/cluster-security.md),
//     sends one Fetch for all its partitions each round (ReplicaState.ID = this node
//     from v15, ReplicaID before; FetchOffset = the log end; LastFetchedEpoch = the
//     log's latest epoch from v12; replica.fetch.max.bytes, .response.max.bytes,
//     .wait.max.ms, .min.bytes; full fetches, no session). Records are appended with
//     Log.AppendFollower (whole batches, CRC checked), the log start follows the
//     leader's (DeleteRecordsBefore) and the follower's HW is min(leader HW, own LEO),
//     persisted with Log.SetHighWatermark. A diverging epoch truncates (Log.Truncate)
//     to the divergence point: min(the leader's end for that epoch, our end for it,
//     our LEO), or, when we do not hold that epoch, to where our older epoch ends (the
//     next fetch asks again). OFFSET_OUT_OF_RANGE asks the leader's log start and end
//     (ListOffsets as a replica): past its end we truncate to it, below its start
//     Log.Reset restarts the log there. Partition errors back off for
//     replica.fetch.backoff.ms, connection errors redial after it. A new image
//     re-targets partitions (new leader or epoch), removes the ones this node no
//     longer follows, and stops fetchers left empty.
//   - Leader side (fetch.go): a replica fetch needs CLUSTER_ACTION, reads up to the log
//     end (not the HW), and records the fetch offset as the follower's LEO and, as
//     Kafka, when it was last caught up (fetch offset >= the leader's LEO at this
//     fetch: now; >= the leader's LEO at its previous fetch: that fetch's time); its
//     long poll also completes when the HW passes the one last sent to it. The
//     HW is the smallest LEO over the maximal ISR (the ISR plus a member whose
//     addition is in flight), never moves down on the leader, and is persisted. A new
//     leader epoch assigns the epoch at the log end (Log.AssignEpoch), keeps the HW it
//     had (a follower's, or the checkpoint), and knows no follower LEO until they
//     fetch; its ISR members count as caught up from then.
//   - acks=all: the committed ISR must hold min.insync.replicas before the append
//     (NOT_ENOUGH_REPLICAS); the produce then waits in the purgatory until the HW
//     passes its last offset, woken by the follower fetches that move the HW;
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR fell below
//     min.insync.replicas by then, REQUEST_TIMED_OUT at the produce timeout, and
//     NOT_LEADER_OR_FOLLOWER when leadership moved or a new leader epoch began (its
//     truncation may have removed the batch).
//   - ISR changes (isr.go) go to the controller through the metadata module's
//     kernel.PartitionChanger (AlterPartition), one in flight per partition: a
//     follower outside the ISR that reached the HW and the current epoch's start
//     offset is added at its fetch; ISR followers not caught up for
//     replica.lag.time.max.ms are removed by a check every half of it. The answer's
//     ISR and partition epoch apply at once; transient failures are retried with a
//     growing pause; INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH and the like drop the
//     change (a newer image is coming) and delay the next one by
//     replica.fetch.backoff.ms. Without a PartitionChanger, ISRs change only by
//     images.
//   - Diverging epochs (fetch.go): a Fetch v12+ with a LastFetchedEpoch (followers
//     and consumers) is checked against Log.EndOffsetForEpoch as Kafka does: an epoch
//     older than the fetcher's, or one that ends before its fetch offset, is answered
//     with that epoch and end offset and no records; an unknown end is
//     OFFSET_OUT_OF_RANGE. OffsetForLeaderEpoch answers from the same cache.
//   - Follower reads (KIP-392, follower_reads: true; Kafka's replica.selector.class =
//     RackAwareReplicaSelector): the leader answers a consumer fetch (v11+) whose
//     client rack is not its own but holds an in-sync, unfenced follower whose LEO
//     reached the fetch offset with that follower as preferred read replica and no
//     records; followers serve consumer fetches up to their own HW (LSO for
//     read_committed), with the same epoch, diverging-epoch and range checks.
//   - Elections come from the controller through images: a leader that loses its
//     leadership answers its waiting produces NOT_LEADER_OR_FOLLOWER and drops the
//     markers it queued; followers re-target to the new leader and truncate through
//     the diverging-epoch answers.
//
// Usage (config):
//
//	modules:
//	  replication:
//	    use: isr
//	    fetch_session_cache_slots: 1000   # KIP-227 sessions; 0 disables
//	    fetch_session_eviction_ms: 120000 # idle time before a session may be evicted
//	    max_produce_records_bytes: 104857600
//	    follower_reads: false             # KIP-392 rack-aware follower reads
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
// input is validated as usual, then TransformProduce(ctx, tp, src, records) runs with
// the request's context and source (its connection's principal, its client id), and
// its output is validated again with the same checks (max.message.bytes, framing,
// CRC, timestamps, LogAppendTime stamping) before it is
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
//     WriteTxnMarkers API (27_write_txn_markers.go, CLUSTER_ACTION). A marker is built with
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
//   - HW <= LEO on every replica. On the leader the HW never moves down and is the
//     smallest LEO over the maximal ISR (a follower whose LEO is unknown holds it);
//     on a follower it is min(leader HW, own LEO) and is clamped at every truncation.
//     Consumers never see past the HW: Fetch reads with maxOffset = HW (LSO <= HW for
//     read_committed) and ListOffsets answers at most the HW (the LSO for
//     read_committed). Only followers read past it, up to the log end.
//   - A follower appends only what its leader sent for the offset it asked (same
//     leader, same epoch, log end unchanged since the fetch was sent, under
//     Partition.mu): a stale answer never lands after a truncation or on a leader.
//   - A follower never keeps records its leader does not have: a diverging epoch
//     truncates to the divergence point before the next fetch, a log end past the
//     leader's is cut back to it.
//   - A producer's batch is checked and appended in one Log.AppendProducer call under
//     Partition.mu: no other append of the partition slips between its sequence check
//     and its offset assignment.
//   - A batch is validated whole (CRC, framing, record count, size, timestamps) before
//     the append; a partition's records are appended all or nothing.
//   - acks=all is answered only when the HW has passed the partition's last offset in
//     the leader epoch it was appended in, and the ISR is at least
//     min.insync.replicas (NOT_ENOUGH_REPLICAS before the append when it is not).
//   - One ISR change is in flight per partition; the HW counts the maximal ISR
//     meanwhile, so a shrink cannot commit what a leaving member lacks before the
//     controller accepted it.
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
// The leader-epoch cache and the HW checkpoint are the Log's (kernel.Log.Epochs,
// AssignEpoch, EndOffsetForEpoch, SetHighWatermark, HighWatermark; storage persists
// them in leader-epoch-checkpoint and replication-offset-checkpoint). A partition
// opens with the checkpointed HW; a leader with ISR = {self} moves it to the log end
// at its first placement.
//
// # Concurrency
//
// Lock order (DESIGN.md has the full list): sessionCache.mu before fetchSession.mu;
// fetcherSet.mu before fetcher.mu, neither held while taking Partition.mu;
// purgatory.mu is taken last and never held while calling out. Module.mu (the
// partition map) is never held while opening or removing a log, nor while taking
// Partition.mu or a fetcher's lock. The read path takes no
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
// REQUEST_TIMED_OUT), unsubscribes from metadata (waiting for a running image apply),
// stops the fetchers (cancelling their requests) and the background work (the ISR
// check, AlterPartition calls) and waits for all of their goroutines, and for the
// waiting operations to return. The module's goroutines are the fetchers (owned by
// fetcherSet, one per source broker and shard), the ISR check and one per
// AlterPartition in flight (owned by goBG).
package replication
