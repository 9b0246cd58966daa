package replication

import "github.com/sluicehq/sluice/kernel"

// claims lists the API keys the module serves. Each claim is written, with its
// versions, in the key's own file (00_produce.go ... 61_describe_producers.go).
func (m *Module) claims() []kernel.Claim {
	return []kernel.Claim{
		produceClaim(m),
		fetchClaim(m),
		listOffsetsClaim(m),
		deleteRecordsClaim(m),
		offsetForLeaderEpochClaim(m),
		writeTxnMarkersClaim(m),
		describeProducersClaim(m),
	}
}
