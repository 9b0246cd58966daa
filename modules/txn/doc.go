// Package txn is the transaction coordinator (module "txn.coordinator"): producer ids
// for idempotent and transactional producers (InitProducerId), the transactional ids
// and their transactions (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn), the two-phase
// commit that writes COMMIT/ABORT markers to every partition of a transaction,
// transaction timeouts, transactional-id expiry, and DescribeTransactions /
// ListTransactions. It also implements kernel.TxnCoordinatorLocator (the group
// coordinator's FindCoordinator asks it for key type 1) and kernel.TxnVerifier (the
// produce path's KIP-890 part 1 check).
//
// Usage: the module is a default (modules: {txn: {use: coordinator}}); its own
// settings are sweep_interval_ms, load_wait_ms, concurrent_wait_ms,
// marker_concurrency, marker_partition_concurrency and marker_retry_backoff_ms. Broker configs:
// transaction.max.timeout.ms, transaction.state.log.{num.partitions,
// replication.factor,min.isr}, transactional.id.expiration.ms.
//
// # Producer ids
//
// Blocks of 1000 ids are reserved through the metadata log
// (kernel.ProducerIDAllocator) and handed out in order under a lock; a block is never
// reused, and the unused rest of a block is lost on restart. An idempotent producer
// (no transactional id) always gets a fresh id with epoch 0.
//
// # State machine
//
// One transactional id, with Kafka's states and ids. Each arrow is one record written
// (and committed) before the request that caused it is answered:
//
//	(new id)        ─InitProducerId──────────────► Empty (new producer id, epoch 0)
//	Empty, Complete*─InitProducerId──────────────► Empty (epoch+1; a new producer id
//	                                                 and epoch 0 once the epoch is
//	                                                 exhausted, >= 32766)
//	Empty, Complete*─AddPartitions/AddOffsets────► Ongoing (start time = now)
//	Ongoing         ─AddPartitions/AddOffsets────► Ongoing (nothing written when the
//	                                                 partitions are already in it)
//	Ongoing         ─EndTxn(commit)──────────────► PrepareCommit ─markers─► CompleteCommit
//	Ongoing         ─EndTxn(abort)───────────────► PrepareAbort  ─markers─► CompleteAbort
//	Ongoing         ─InitProducerId (fence)──────► PrepareAbort, epoch+1 (the caller
//	                                                 gets CONCURRENT_TRANSACTIONS)
//	Ongoing         ─transaction.timeout.ms──────► PrepareAbort, epoch+1
//	Empty, Complete*─transactional.id.expiration.ms idle─► tombstone (forgotten)
//
// Transaction version 2 (KIP-890 part 2; EndTxn v5+, and partitions added by
// Produce v12+ and TxnOffsetCommit v5+ through AddPartitionsToTxn v5 from the
// partition's broker): EndTxn writes Prepare* at epoch+1 and answers the next
// transaction's producer id and epoch, so the markers are above every batch of the
// ended transaction and a late one is refused by its partition. A retry comes at the
// old epoch (answered as before); an abort with no ongoing transaction writes an
// empty PrepareAbort (a client cannot know whether a failed produce added its
// partition). When the bump reaches MaxInt16, a new producer id is reserved, kept in
// Prepare* (the value's NextProducerID) and made current, at epoch 0, by Complete*;
// until then requests with it get CONCURRENT_TRANSACTIONS. The request's version
// decides, as in Kafka; clients use 2 only once transaction.version 2 is finalized.
//
// Refusals: another producer id INVALID_PRODUCER_ID_MAPPING; another epoch
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for old request versions); a transition
// still being written, or Prepare* for anything but the opposite EndTxn,
// CONCURRENT_TRANSACTIONS; EndTxn of Empty or the opposite of a Prepare*/Complete*
// state INVALID_TXN_STATE; a retried EndTxn of a Complete* transaction is answered OK.
// Dead (6) and PrepareEpochFence (7) are never written.
//
// One departure from Kafka: a request that would be answered
// CONCURRENT_TRANSACTIONS (its id's previous transition or transaction is still
// being completed) first waits up to concurrent_wait_ms (100) for the id's shard to
// finish a transition and is tried again, so a producer that begins its next
// transaction right after EndTxn gets its answer in well under a millisecond
// instead of retrying after a 20 ms or longer client backoff. The answer is the one
// the retry would get; concurrent_wait_ms: 0 restores Kafka's behaviour.
//
// Kafka's PrepareEpochFence is folded into the PrepareAbort record it leads to: the
// fence writes PrepareAbort with the bumped epoch directly, and the client that
// caused it gets CONCURRENT_TRANSACTIONS until the abort is complete.
//
// # Record format (__transaction_state, Kafka's)
//
// A compacted topic (transaction.state.log.num.partitions partitions); transactional
// id X lives in partition abs(javaHashCode(X)) % partitions, and its coordinator is
// that partition's leader, with the leader epoch as coordinator epoch. Records are
// in ordinary v2 batches (producer id -1), uncompressed:
//
//	key   = version int16 (0) | transactional_id string
//	value = version int16 (0) | producer_id int64 | producer_epoch int16 |
//	        timeout_ms int32 | state int8 | partitions [topic string, [int32]] (null
//	        when Empty) | last_update_ms int64 | start_ms int64
//	        (version 1, flexible: + tagged previous_producer_id (0),
//	        next_producer_id (1), client_transaction_version (2))
//	tombstone (null value) = the id expired
//
// (kmsg.TxnMetadataKey / kmsg.TxnMetadataValue.) Version 0 values are written for
// transaction version 0, version 1 for version 2; both are read; keys of another version are skipped on replay (they are not
// transaction records), undecodable records are logged and skipped.
//
// # Loading
//
// When this broker becomes leader of a partition (the sweeper follows Partitions.
// Leader), the partition is replayed from its start (ReadCommitted; the last record
// of an id wins) while requests for its ids get COORDINATOR_LOAD_IN_PROGRESS (after
// waiting load_wait_ms); then every transaction in Prepare* is resumed: markers, then
// Complete*. Losing leadership, a new leader epoch or a failed append drops the
// partition's state.
//
// # Invariants
//
//   - An answered transition is durable: the record is committed (Partitions.Append
//     returns past the high watermark) before the request is answered, and memory
//     is updated only then (txnMeta.cur); a failed or ambiguous append drops the
//     partition, which is reloaded from the log.
//   - Per id, one transition at a time (txnMeta.pending): the log holds an id's
//     records in transition order.
//   - Markers are written before Complete*: a Complete* record means every
//     partition of the transaction has its marker (or its topic was deleted).
//   - A fenced epoch never writes again: every transition needs the id's exact
//     producer id and epoch, fencing bumps the epoch before anything else is
//     written, and markers carry the coordinator epoch, so a deposed coordinator's
//     markers are refused by the partitions.
//
// # Concurrency
//
// The shard map, the loaders, the writers and the sweeper are the coordinator
// skeleton's (internal/coordinator: its map lock is a leaf); shard.mu guards a
// partition's ids. shard.mu is not held while writing to the log, reserving producer
// ids, or authorizing (except the rare epoch-exhaustion rotation, which reserves an
// id under shard.mu). Each shard has one writer goroutine that batches queued
// records into one append. Markers are written by marker_concurrency workers
// pulling from an unbounded queue (so EndTxn never waits for them), each writing one
// transaction's pending partitions in parallel, at most marker_partition_concurrency
// at a time. Partitions that failed transiently (NOT_LEADER, ...) are retried by
// putting the job back in the queue after a backoff (doubling to 1s), so a partition
// without a leader never holds a worker; a job of an unloaded partition is dropped
// (the next load resumes its transaction from the log). Stop unloads every
// partition, then waits for the sweeper, writers, loaders and workers.
//
// # Several brokers
//
// A marker to a partition this broker leads goes through the replication module
// (kernel.TxnMarkerWriter); the markers to the partitions another broker leads, as the
// metadata image says, go to it in one WriteTxnMarkers request per broker and job
// (interbroker.Peers, the inter-broker listener's security). A partition whose leader
// moved answers NOT_LEADER_OR_FOLLOWER and is retried with the next image.
package txn
