// Package transforms is the transforms.wasm module: WASM record transforms, deployed
// at run time, run with wazero (package transforms/wasm).
//
// # Modes
//
// Inline (the default): the module is the replication module's
// kernel.ProduceTransformer. For a topic with an inline transform, every data batch
// of a Produce goes through the transform before the append; the output records of
// one input batch become one batch with the input's producer id, epoch, base
// sequence, transactional flag and codec, a fresh CRC and fresh offset deltas. Control
// batches pass through. So what is stored is what is served: Fetch is unchanged and
// zero-copy. A batch whose records are all dropped appends nothing (the partition
// answers the log end offset).
//
// Derived: like Redpanda's transforms, a worker per input partition this broker leads
// reads the input as a read_committed consumer would (Partitions.ReadStable: below the
// last stable offset, without control batches or aborted transactions' batches),
// transforms it and appends the outputs to up to eight output topics (output
// partition = input partition modulo its partition count). The input topic is not
// modified. Two guarantees, chosen at Provision:
//
// Exactly once (derived_eos.go), when the txn module offers kernel.InternalTxns and the
// groups module kernel.InternalOffsets (the standard broker): Kafka Streams'
// exactly-once inside the broker. The worker of input partition P is a transactional
// producer with id "__sluice-transform-<name>-<P>", and its position is the committed
// offset of P in the group "__sluice-transform-<name>". A session starts with
// InitProducerID, which fences any earlier worker of P (this broker's before a crash
// or restart, or the previous leader's after a leadership move) and aborts its open
// transaction; then it reads the committed position (waiting while an offset commit
// is pending). Each run of input batches (up to 1 s or 1 MiB) is one transaction: the
// outputs, one transactional batch per output partition, then the position as a
// TxnOffsetCommit, then EndTxn(commit). Any failure aborts the transaction and the
// next session starts again from the committed position. So a read_committed
// consumer of the outputs sees every committed input record's outputs exactly once,
// across crashes, restarts and leadership moves; a read_uncommitted one may also see
// aborted attempts. Limits:
//   - The worker must run where its transactional id is coordinated (the leader of
//     its __transaction_state partition) and, for the offsets, of its group's
//     __consumer_offsets partition: in a multi-broker cluster where they differ the
//     worker waits (NOT_COORDINATOR; a warning once it lasts 30 s) until they are
//     co-located.
//   - Dead-letter writes (policy dlq) are not part of the transaction: a batch
//     dead-lettered in a transaction that then aborts is dead-lettered again (at
//     least once in the DLQ topic). drop and reject keep their meaning: a rejected
//     batch ends its run (the batches before it are committed), then stalls the
//     partition at it, retried with a backoff and feeding the breaker.
//   - A worker that hangs without crashing holds its transaction open, so the
//     outputs' last stable offset, until the transaction timeout (60 s) aborts it.
//   - The position stops after the last data batch it read: trailing control batches
//     (markers) and aborted batches are skipped only when later data arrives, so the
//     group's lag can show a few offsets at the end of a quiet input.
//
// The lag is the group's: `kadm` (Lag of DescribeGroups/FetchOffsets) or `kcat`/
// kafka-consumer-groups for group __sluice-transform-<name>; `sluice transform list`
// shows exactly_once and the positions of the partitions this broker leads. A
// transform first deployed at least once, then run exactly once, starts from its
// stored at-least-once position when the group has none (migration). Positions
// outlive a delete: a transform redeployed under the same name resumes where it
// stopped (delete the group's offsets, e.g. with kadm DeleteOffsets, to start over).
//
// At least once, without those modules: the position is stored in the metadata log
// (extension namespace "transforms.pos", at most once a second, and on stop); a crash
// between an append and the position write repeats those records.
//
// # Who produced
//
// TransformProduce gets the kernel.ProduceSource of the request (the principal of its
// connection, Anonymous without authentication, and its client id) and hands it to
// every batch of that request (wasm.Batch.Source). Guests read it with batch_source
// (sdk-wasm/ABI.md; Record.Source in the Go SDK) or Redpanda's read_batch_metadata
// (keys principal_name, principal_type, client_id). Derived workers read stored
// batches, whose producer the log does not keep: their batches have the zero source,
// which guests see as empty fields. Dead-letter records do not carry the source.
//
// # Deployments
//
// A deployment (deploy.go: settings, the sha256 and the zstd-compressed binary) is a
// record in the metadata log, extension namespace "transforms", key = name; derived
// positions are in namespace "transforms.pos". Every broker reconciles its running
// transforms with its metadata image: at Start before the broker serves, and on every
// image. The admin HTTP API (admin.go) and `sluice transform deploy|list|delete` in
// front of it compile a module before storing it and answer once it runs on this
// broker.
//
// # Failures
//
// A trap, a timeout (the per-batch deadline), an instance out of memory (the
// per-instance limit), a malformed emit or a guest's fail() fail the batch; the
// deployment's policy decides: reject (INVALID_RECORD for the partition, nothing
// appended), drop (the batch's records are counted and dropped), dlq (the original
// records go to the dead-letter topic with sluice.transform, sluice.error,
// sluice.source.topic and sluice.source.partition headers; if that write fails the
// batch is rejected). After breaker_failures failed batches in a row the transform
// is paused for breaker_pause_ms (doubling while it keeps failing, up to 10 min);
// paused batches follow the policy without running. A module that cannot be compiled
// is refused at deploy; one that fails to start on a broker is listed as "failed".
//
// # Invariants
//
//   - A produce to a topic with an inline transform is never appended untransformed:
//     the first reconcile happens before the broker serves, and deploy answers only
//     once the transform runs here.
//   - The output of TransformProduce is a fresh slice (the caller stamps it in place).
//   - Idempotent producers: dedup must key on the producer's input sequence range;
//     since the output keeps the input's producer fields and base sequence, the
//     producer state the log records is the input's. (Idempotence itself is issue 6;
//     until then retries are appended again, transformed or not.)
//   - Exactly-once derived: a worker's outputs and its position change only together,
//     in one transaction whose producer epoch is the latest for its transactional id
//     (every output append is an epoch-checked coordinator write, base sequence -1).
//
// # Concurrency
//
// One supervisor goroutine per derived transform starts and stops the partition
// workers as leadership changes; derived.stop waits for all of them. A worker aborts
// its open transaction (best effort, 5 s) when it stops.
package transforms
