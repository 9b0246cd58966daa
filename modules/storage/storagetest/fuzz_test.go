package storagetest

import (
	"testing"

	"github.com/sluicehq/sluice/modules/storage/memory"
)

// FuzzClean drives the compaction model (RunCompactionModel) from the fuzzer's bytes,
// one byte a choice, on a memory log: puts, tombstones, idempotent producers and their
// retries, committed and aborted transactions, cleans with small maps at random times,
// truncations, log start moves and reopens, each clean checked against the model.
// Seeds in testdata/fuzz/FuzzClean.
func FuzzClean(f *testing.F) {
	f.Add([]byte{3, 2, 90, 90, 90})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1024 {
			b = b[:1024] // some hundred steps: longer workloads are the model test's
		}
		RunCompactionModel(t, memory.NewStore(), tp0, &BytesChooser{B: b})
	})
}
