// The durable state of share-partitions (KIP-932), kept by the share group's
// coordinator in the group's __consumer_offsets partition (offsets.ShareStateKeyV1001).
// The leader of a data partition (share_leader.go) reads it when it loads a
// share-partition and writes it after acknowledgements, through these functions when
// it coordinates the group itself, else through Kafka's inter-broker RPCs
// ReadShareGroupState and WriteShareGroupState (84_, 85_*.go) sent to the group's
// coordinator.
//
// Fencing: a state carries a state epoch (raised by a reset: AlterShareGroupOffsets,
// DeleteShareGroupOffsets) and the writer's leader epoch of the data partition. A write
// with an older state epoch is FENCED_STATE_EPOCH, one with the same state epoch and
// an older leader epoch FENCED_LEADER_EPOCH, so a deposed leader cannot overwrite its
// successor's state. A read with a newer leader epoch records it, fencing the previous
// leader from then on. Checks and writes of one shard are serialized by shard.shareMu.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// shareStateKey names one share-partition's state.
type shareStateKey struct {
	group     string
	topic     [16]byte
	partition int32
}

func (k shareStateKey) record() []byte {
	return offsets.EncodeShareStateKey(k.group, k.topic, k.partition)
}

// loadShareState returns the stored state of k from the store; found is false when
// none was written.
func (m *Module) loadShareState(k shareStateKey) (offsets.ShareState, bool, *kerr.Error) {
	b, found, err := m.store.GroupRecord(k.record())
	if err != nil {
		return offsets.ShareState{}, false, kerr.CoordinatorNotAvailable
	}
	if !found {
		return offsets.ShareState{}, false, nil
	}
	st, err := offsets.DecodeShareState(b)
	if err != nil {
		return offsets.ShareState{}, false, kerr.CoordinatorNotAvailable
	}
	return st, true, nil
}

// readShareState answers a leader loading share-partition k at leaderEpoch: the stored
// state (found false: none yet; the leader initializes it), after recording
// leaderEpoch when it is newer than the stored one.
func (m *Module) readShareState(ctx context.Context, k shareStateKey, leaderEpoch int32) (offsets.ShareState, bool, *kerr.Error) {
	s, e := m.coordinatorFor(ctx, k.group)
	if e != nil {
		return offsets.ShareState{}, false, e
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	st, found, e := m.loadShareState(k)
	if e != nil || !found {
		return st, found, e
	}
	switch {
	case leaderEpoch < st.LeaderEpoch:
		return offsets.ShareState{}, false, kerr.FencedLeaderEpoch
	case leaderEpoch > st.LeaderEpoch:
		st.LeaderEpoch = leaderEpoch
		if e := s.write(ctx, []kv{{key: k.record(), value: offsets.EncodeShareState(st)}}); e != nil {
			return offsets.ShareState{}, false, e
		}
	}
	return st, true, nil
}

// writeShareState stores st as k's state, fenced as the file comment says. A first
// write (nothing stored) is accepted at any epochs.
func (m *Module) writeShareState(ctx context.Context, k shareStateKey, st offsets.ShareState) *kerr.Error {
	if st.StartOffset < 0 {
		return kerr.InvalidRequest
	}
	s, e := m.coordinatorFor(ctx, k.group)
	if e != nil {
		return e
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	cur, found, e := m.loadShareState(k)
	if e != nil {
		return e
	}
	if found {
		switch {
		case st.StateEpoch < cur.StateEpoch:
			return kerr.FencedStateEpoch
		case st.StateEpoch == cur.StateEpoch && st.LeaderEpoch < cur.LeaderEpoch:
			return kerr.FencedLeaderEpoch
		}
	}
	return s.write(ctx, []kv{{key: k.record(), value: offsets.EncodeShareState(st)}})
}

// deleteShareState tombstones k's state.
func (m *Module) deleteShareState(ctx context.Context, k shareStateKey) *kerr.Error {
	s, e := m.coordinatorFor(ctx, k.group)
	if e != nil {
		return e
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	return s.write(ctx, []kv{{key: k.record()}})
}
