// Package wasm runs WebAssembly record transforms on the produce path, on
// wazero. It implements the host side of two guest ABIs: ours,
// sluice_transform_v1 (sdk-wasm/ABI.md), and Redpanda's redpanda_transform
// (as used by its Go SDK v1.1.0, plus ABI v3's check_abi_version_3 and
// read_batch_metadata, with a redpanda_schema_registry whose lookups fail as
// unsupported).
//
// Usage:
//
//	eng, _ := wasm.NewEngine(ctx, cacheDir)            // one per broker
//	prog, err := eng.Compile(ctx, module, memoryPages) // validates: ErrInvalidModule
//	pool, _ := prog.NewPool(ctx, wasm.Config{Name: "t", InputTopic: "orders"})
//	out, err := pool.Transform(ctx, &wasm.Batch{...})  // err: *wasm.Error
//	pool.Close(ctx); prog.Close(ctx); eng.Close(ctx)
//
// A Program is one wazero runtime (the memory limit is a runtime setting) with
// WASI preview 1 and our host modules instantiated in it; all programs of an
// engine share one compilation cache (on disk with a cache directory).
//
// # Instance lifecycle
//
// A Pool has Config.Instances slots. An instance starts lazily, when a batch
// finds its slot empty: a goroutine instantiates the module, which runs
// _start, and the batch waits (at most max(5*Timeout, 10s), not counted in
// its Timeout) until the guest first asks for a batch. The guest initialises
// and then loops in next_batch (ours) or
// read_batch_header (Redpanda). Those host functions block until Transform
// hands the instance a batch; the guest's next call to them (or fail) answers
// that batch with what it emitted (emit / write_record*) meanwhile.
//
// For our ABI the host writes the batch header, topic and the whole records
// section into guest memory with one copy; if the guest's buffer is too small
// it returns -len and offers the same batch again. For Redpanda's, the host
// indexes the records once per batch (no per-record allocation) and copies
// each record's payload on read_next_record; see abi_redpanda.go for the field
// mapping (inline, where base_offset is -1, read_next_record reports the
// offsetDelta as the offset).
//
// Batch.Source (who produced the batch) is read by batch_source (ours: three
// u16-length fields into the guest's buffer, -len if it is too small) and
// read_batch_metadata (Redpanda's: one field per call); both answer only
// while a batch is delivered and keep nothing after the call.
//
// Output is parsed into a few flat buffers per batch; the []Output returned
// slices into one buffer, header keys into one string.
//
// An instance ends when its context is cancelled (a timeout, the caller's
// ctx, Pool.Close), when the guest traps (including running out of memory and
// wazero's checks of host call arguments) or exits. The batch in progress then
// fails with KindTrap (KindTimeout, the caller's ctx error, KindClosed), and
// the slot is emptied so the next batch starts a fresh instance.
//
// Sandbox: no filesystem, no sockets, wazero's deterministic clocks and
// randomness, args [Name], and the environment SLUICE_TRANSFORM_NAME,
// SLUICE_INPUT_TOPIC, SLUICE_OUTPUT_TOPIC_i (inline: i = 0 is the input topic),
// for Redpanda modules also REDPANDA_INPUT_TOPIC and REDPANDA_OUTPUT_TOPIC_i,
// then Config.Env (which cannot override those). stdout and stderr become log
// lines at Info (transform=Name, stream=stdout|stderr), at most 1 KiB each,
// rate-limited per pool to 20 lines/s (burst 40); dropped lines are counted on
// the next line logged.
//
// Go guests: Go on wasm cannot preempt, so a guest that never yields starves
// its GC's background workers and its heap grows until it runs out of memory
// (KindTrap). A Go SDK should call runtime.Gosched once per batch (our test
// guests do; Redpanda's SDK v1.1.0 does not).
//
// # Invariants
//
//   - Each Transform gets exactly one answer: the instance goroutine sends at
//     most one result per request, on a buffered channel, and Transform takes
//     the first of that result, the instance's end, its deadline or ctx.
//   - An instance serves one batch at a time: it is held by the Transform that
//     took its slot until that Transform returns.
//   - A dead instance is never reused: a Transform that saw a trap, timeout or
//     cancellation cancels it and empties its slot, and a slot holding an
//     instance that has ended is treated as empty.
//   - Guest-provided pointers and lengths are bounds-checked: emit and write
//     errors return an errno to the guest and fail the batch (KindMalformed)
//     without ending the instance; a bad buffer in next_batch, batch_source,
//     read_batch_header, read_next_record or read_batch_metadata traps the
//     guest. The host never
//     keeps a view of guest memory after a call returns.
//   - fail and malformed output fail only their batch (KindFailed,
//     KindMalformed); the instance serves the next one.
//
// # Concurrency
//
// Engine, Program and Pool methods are safe for concurrent use. Transform
// waits (bounded by ctx) for a free slot; up to Config.Instances batches run in
// parallel, each on its own guest goroutine. Host functions run on the guest
// goroutine and are the only code touching an instance's batch state. Pool.Close
// cancels all instances and waits for their goroutines; Transforms in flight
// or waiting return KindClosed. Close pools before their program, programs
// before their engine (Engine.Close closes programs still open).
package wasm
