package txn

import "github.com/sluicehq/sluice/kernel"

// transactionVersionFeature is Kafka's transaction.version (kernel/seam_features.go).
// Levels, as Kafka numbers them: 0 the original transactions; 1 what Kafka 4 writes
// to its transaction log (nothing a client sees; Sluice's coordinator state is its
// own, so 1 runs exactly as 0); 2 KIP-890 part 2 (a new producer epoch per
// transaction, partitions added by Produce v12+ and TxnOffsetCommit v5+ themselves,
// EndTxn v5 answering the next epoch). Clients use version 2 only once the cluster
// finalized it; the coordinator follows the version of each request, as Kafka does,
// so producers of both kinds work at every level. A new cluster starts at 2, as
// Kafka 4.0 does.
const transactionVersionFeature = "transaction.version"

// SupportedFeatures implements kernel.FeatureSupporter.
func (m *Module) SupportedFeatures() []kernel.SupportedFeature {
	return []kernel.SupportedFeature{{Name: transactionVersionFeature, Min: 0, Max: 2, Default: 2}}
}
