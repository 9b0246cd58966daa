package txn

import "github.com/sluicehq/sluice/kernel"

// claims lists the API keys the module serves. Each claim is written, with its
// versions, in the key's own file (22_init_producer_id.go ... 66_list_transactions.go).
func (m *Module) claims() []kernel.Claim {
	return []kernel.Claim{
		initProducerIDClaim(m),
		addPartitionsToTxnClaim(m),
		addOffsetsToTxnClaim(m),
		endTxnClaim(m),
		describeTransactionsClaim(m),
		listTransactionsClaim(m),
	}
}
