package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/interbroker"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// readState reads a share-partition's durable state from the group's coordinator:
// this module when it coordinates the group, else the coordinator broker through
// ReadShareGroupState.
func (l *shareLeader) readState(ctx context.Context, k shareStateKey, leaderEpoch int32) (offsets.ShareState, bool, *kerr.Error) {
	coord, local, e := l.coordinatorOf(ctx, k.group)
	if e != nil {
		return offsets.ShareState{}, false, e
	}
	if local {
		return l.m.readShareState(ctx, k, leaderEpoch)
	}
	return l.remote.read(ctx, coord, k, leaderEpoch)
}

// writeStateOf writes a share-partition's durable state to the group's coordinator.
func (l *shareLeader) writeStateOf(ctx context.Context, k shareStateKey, st offsets.ShareState) *kerr.Error {
	coord, local, e := l.coordinatorOf(ctx, k.group)
	if e != nil {
		return e
	}
	if local {
		return l.m.writeShareState(ctx, k, st)
	}
	return l.remote.write(ctx, coord, k, st)
}

// coordinatorOf returns the broker that coordinates group (the leader of its
// __consumer_offsets partition, creating the topic if it does not exist yet) and
// whether that is this broker.
func (l *shareLeader) coordinatorOf(ctx context.Context, group string) (int32, bool, *kerr.Error) {
	t, err := l.m.ensureOffsetsTopic(ctx)
	if err != nil || t == nil || len(t.Partitions) == 0 {
		return -1, false, kerr.CoordinatorNotAvailable
	}
	p := offsets.PartitionFor(group, int32(len(t.Partitions)))
	leader := t.Partitions[p].Leader
	if leader < 0 {
		return -1, false, kerr.CoordinatorNotAvailable
	}
	return leader, leader == l.m.broker.NodeID, nil
}

// shareRemote sends share state RPCs to other brokers' group coordinators.
type shareRemote struct {
	m     *Module
	peers *interbroker.Peers
}

func (r *shareRemote) request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	return r.peers.Request(ctx, id, req)
}

func (r *shareRemote) read(ctx context.Context, coord int32, k shareStateKey, leaderEpoch int32) (offsets.ShareState, bool, *kerr.Error) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.topic
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.partition, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := r.request(ctx, coord, req)
	if err != nil {
		r.m.log.Debug("reading share state from the group coordinator", "broker", coord, "group", k.group, "err", err)
		return offsets.ShareState{}, false, kerr.CoordinatorNotAvailable
	}
	resp := kresp.(*kmsg.ReadShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return offsets.ShareState{}, false, kerr.CoordinatorNotAvailable
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return offsets.ShareState{}, false, kerrOf(p.ErrorCode)
	}
	if p.StartOffset < 0 {
		return offsets.ShareState{StateEpoch: p.StateEpoch}, false, nil
	}
	st := offsets.ShareState{StateEpoch: p.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: p.StartOffset}
	for _, b := range p.StateBatches {
		st.Batches = append(st.Batches, offsets.ShareStateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
			DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
	}
	return st, true, nil
}

func (r *shareRemote) write(ctx context.Context, coord int32, k shareStateKey, st offsets.ShareState) *kerr.Error {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = k.topic
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.partition, st.StateEpoch, st.LeaderEpoch, st.StartOffset
	for _, b := range st.Batches {
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
		rp.StateBatches = append(rp.StateBatches, sb)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := r.request(ctx, coord, req)
	if err != nil {
		r.m.log.Debug("writing share state to the group coordinator", "broker", coord, "group", k.group, "err", err)
		return kerr.CoordinatorNotAvailable
	}
	resp := kresp.(*kmsg.WriteShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kerr.CoordinatorNotAvailable
	}
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		return kerrOf(c)
	}
	return nil
}

// kerrOf is the *kerr.Error of a code (UNKNOWN_SERVER_ERROR for one kerr does not know).
func kerrOf(code int16) *kerr.Error {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e
	}
	return kerr.UnknownServerError
}
