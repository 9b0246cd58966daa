package image

import (
	"errors"
	"fmt"
	"maps"
)

// UnregisterBrokerRecord removes a fenced broker's registration (UnregisterBroker): a
// broker retired for good, so that Metadata and DescribeCluster stop listing it and
// its id may be reused. Partitions keep it in their replicas (as offline) until they
// are reassigned. A live broker is refused: it would register again at its next
// heartbeat, and its partitions would lose a leader without an election.
type UnregisterBrokerRecord struct {
	NodeID int32 `json:"node_id"`
}

func (*UnregisterBrokerRecord) recordType() recordType { return recUnregisterBroker }

// ErrBrokerLive marks an unregistration of a broker that is not fenced.
var ErrBrokerLive = errors.New("metadata: the broker is live (unfenced)")

func (s *State) unregisterBroker(r *UnregisterBrokerRecord) error {
	b, ok := s.Image.Brokers[r.NodeID]
	if !ok {
		return fmt.Errorf("node %d: %w", r.NodeID, ErrUnknownBroker)
	}
	if !b.Fenced {
		return fmt.Errorf("node %d: %w", r.NodeID, ErrBrokerLive)
	}
	s.Image.Brokers = maps.Clone(s.Image.Brokers)
	delete(s.Image.Brokers, r.NodeID)
	s.Regs = maps.Clone(s.Regs)
	delete(s.Regs, r.NodeID)
	return nil
}
