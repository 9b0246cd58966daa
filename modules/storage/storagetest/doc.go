// Package storagetest is the conformance suite every kernel.Storage implementation must
// pass, and a builder of valid magic-2 record batches for tests.
//
// Usage, in an implementation's test file:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) kernel.Storage { return newStore(t) },
//			storagetest.WithReopen(reopen)) // only for persistent implementations
//	}
//
// Retention tests need the Log to implement RetentionEnforcer (they are skipped
// otherwise); persistence tests need WithReopen. The compaction tests (compact.go,
// "Compact...") need the Log to implement compact.Log and run passes directly with
// the clock and offset map they want. RunCompactionModel (compact_model.go) is the
// model-based compaction workload: the suite runs it from math/rand, FuzzClean from
// fuzz input on a memory log.
//
// # Invariants
//
// Every test opens its own Storage through the open hook, so tests may run in parallel
// and never share partitions.
//
// # Concurrency
//
// The hammer test runs appenders, readers and log-start movers on one Log at once, the
// compaction hammer appenders, scanners and a cleaner; run the suite with -race.
package storagetest
