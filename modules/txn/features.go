package txn

import "github.com/sluicehq/sluice/kernel"

// transactionVersionFeature is Kafka's transaction.version (kernel/seam_features.go).
// Levels, as Kafka numbers them: 0 the original transactions; 1 what Kafka 4 writes
// to its transaction log (nothing a client sees; Sluice's coordinator state is its
// own, so 1 runs exactly as 0); 2 KIP-890 part 2 (a new producer epoch per
// transaction, partitions added by Produce itself, EndTxn and TxnOffsetCommit v5),
// which clients use only when the cluster finalized it. Sluice does not implement 2
// yet, so it supports 0 to 1, and a new cluster starts at 1.
const transactionVersionFeature = "transaction.version"

// SupportedFeatures implements kernel.FeatureSupporter.
func (m *Module) SupportedFeatures() []kernel.SupportedFeature {
	return []kernel.SupportedFeature{{Name: transactionVersionFeature, Min: 0, Max: 1, Default: 1}}
}
