// ListOffsets: v1-v11 (isolation level 1 bounds answers by the LSO; a replica id >= 0
// sees the log end). -3 answers the first record holding the largest timestamp, not
// its batch's base offset (Kafka 3.8+). The offset's leader epoch comes from the log's
// leader-epoch cache. Not implemented: tiered storage (-4 earliest-local is the log start; -5
// latest-tiered and -6 earliest-pending-upload answer -1).

package replication

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// Special ListOffsets timestamps.
const (
	listLatest              = -1
	listEarliest            = -2
	listMaxTimestamp        = -3
	listEarliestLocal       = -4
	listLatestTiered        = -5
	listEarliestPendingUpld = -6
)

// listOffsetsClaim claims the versions this file's header lists.
func listOffsetsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ListOffsets, Min: 1, Max: 11, Handler: kernel.Typed(m.handleListOffsets)}
}

func (m *Module) handleListOffsets(ctx context.Context, req *kernel.Request, r *kmsg.ListOffsetsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for i := range r.Topics {
		t := &r.Topics[i]
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		allowed := req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, t.Topic)
		for j := range t.Partitions {
			in := &t.Partitions[j]
			out := kmsg.NewListOffsetsResponseTopicPartition()
			out.Partition = in.Partition
			out.Timestamp, out.Offset, out.LeaderEpoch = -1, -1, -1
			if !allowed {
				out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else {
				m.listOffset(kernel.TopicPartition{Topic: t.Topic, Partition: in.Partition}, in, r, &out)
			}
			rt.Partitions = append(rt.Partitions, out)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}

func (m *Module) listOffset(tp kernel.TopicPartition, in *kmsg.ListOffsetsRequestTopicPartition, r *kmsg.ListOffsetsRequest, out *kmsg.ListOffsetsResponseTopicPartition) {
	p := m.partition(tp)
	if p == nil {
		out.ErrorCode = m.absentCode(m.meta.Image(), tp)
		return
	}
	if _, err := p.leaderFor(in.CurrentLeaderEpoch); err != nil {
		out.ErrorCode = errorCode(err)
		return
	}
	// As Kafka: read_uncommitted consumers see up to the HW, read_committed ones up to
	// the LSO (latest answers it; timestamp and max-timestamp lookups never answer an
	// offset at or past it); a follower (replica id >= 0) sees the log end.
	hw, lso := p.stableOffsets()
	bound := hw
	switch {
	case r.ReplicaID >= 0:
		bound = p.log.LogEndOffset()
	case r.IsolationLevel == 1:
		bound = lso
	}
	switch ts := in.Timestamp; ts {
	case listEarliest, listEarliestLocal:
		out.Offset = p.log.LogStartOffset()
		out.LeaderEpoch = p.epochForOffset(out.Offset)
	case listLatest:
		out.Offset = bound
		out.LeaderEpoch = p.latestEpoch()
	case listMaxTimestamp:
		// The log knows the batch holding the largest timestamp; Kafka (3.8+,
		// KAFKA-16310) answers the first record that holds it, which is the first
		// record at or after that timestamp.
		mts, _, ok := p.log.MaxTimestamp()
		if !ok {
			return
		}
		off, fts, ok, err := p.log.OffsetForTimestamp(mts)
		if err != nil {
			out.ErrorCode = errorCode(err)
			return
		}
		if ok && off < bound {
			out.Timestamp, out.Offset = fts, off
			out.LeaderEpoch = p.epochForOffset(off)
		}
	case listLatestTiered, listEarliestPendingUpld:
		// no tiered storage: -1
	default:
		if ts < 0 {
			return // unknown special value: nothing found
		}
		off, fts, ok, err := p.log.OffsetForTimestamp(ts)
		if err != nil {
			out.ErrorCode = errorCode(err)
			return
		}
		if ok && off < bound {
			out.Timestamp, out.Offset = fts, off
			out.LeaderEpoch = p.epochForOffset(off)
		}
	}
}
