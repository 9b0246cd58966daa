package groups

import "github.com/sluicehq/sluice/kernel"

// claims lists the API keys the module serves. Each claim is written, with its
// versions, in the key's own file (08_offset_commit.go ... 69_consumer_group_describe.go).
func (m *Module) claims() []kernel.Claim {
	cs := []kernel.Claim{
		offsetCommitClaim(m),
		offsetFetchClaim(m),
		findCoordinatorClaim(m),
		joinGroupClaim(m),
		heartbeatClaim(m),
		leaveGroupClaim(m),
		syncGroupClaim(m),
		describeGroupsClaim(m),
		listGroupsClaim(m),
		txnOffsetCommitClaim(m),
		deleteGroupsClaim(m),
		offsetDeleteClaim(m),
		consumerGroupHeartbeatClaim(m),
		consumerGroupDescribeClaim(m),
	}
	if m.shares != nil {
		// Share groups (KIP-932), with group.share.enable (read at start).
		cs = append(cs,
			shareGroupHeartbeatClaim(m),
			shareGroupDescribeClaim(m),
			shareFetchClaim(m),
			shareAcknowledgeClaim(m),
			describeShareGroupOffsetsClaim(m),
			alterShareGroupOffsetsClaim(m),
			deleteShareGroupOffsetsClaim(m),
			readShareGroupStateClaim(m),
			writeShareGroupStateClaim(m),
		)
	}
	return cs
}
