// Package offsetstest is the conformance suite of offsets.View: one set of tests run
// against every offsets store (the badger Store and the in-memory Memory), so a new
// store is judged by the same tests as the old ones.
//
//	func TestConformance(t *testing.T) {
//		offsetstest.Run(t, func(t *testing.T) offsets.View { return offsets.NewMemory() })
//	}
//
// # Invariants
//
// What the suite checks is what the coordinator relies on: records apply in log order,
// a batch all or none; records at or below a partition's applied offset are skipped by
// ApplyBatch and applied by Reapply; tombstones delete; the applied offset never moves
// back; a partition's applied offset and transaction replay start are its own;
// group records (KIP-848 consumer group records, key types 3, 5-8; KIP-932 share
// group records, 10-14; share state, 1001) are kept as applied and read back sorted by
// key, per group, each kind beside the others, a value that does not decode as its
// key's type fails its batch, and a view that can delete a group (DeleteGroup) deletes
// them with it; types it does not read (4, 9, 15, 16) only advance the applied offset.
//
// # Concurrency
//
// Run's subtests run one after another, each on a fresh store; the hammer subtest
// applies to several partitions from several goroutines while others read.
package offsetstest
