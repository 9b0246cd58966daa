// Produce: v3-v13. Idempotent and transactional producers: one batch per partition
// with a base sequence, sequence checks and de-duplication (the last five batches)
// atomically with the append (Log.AppendProducer), producer-epoch and transaction-state
// checks, KIP-890 verification of a transaction's first batch in a partition (when a
// txn module verifies), records without a key refused on compacted topics
// (INVALID_RECORD with record errors, as Kafka), batches rewritten into the topic's
// compression.type at its compression.*.level when that names a codec. Not
// implemented: per-record indices for errors of compressed batches; one batch per
// partition for producers without a producer id (several accepted).

package replication

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// produceClaim claims the versions this file's header lists; the work is in produce.go.
func produceClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.Produce, Min: 3, Max: 13, Handler: kernel.Typed(m.produce)}
}
