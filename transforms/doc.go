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
// reads committed records from a stored position, transforms them and appends the
// outputs to up to eight output topics (output partition = input partition modulo
// its partition count), then stores the position (at most once a second, and on
// stop). At least once: a crash between an append and the position write repeats
// those records. The input topic is not modified.
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
package transforms
