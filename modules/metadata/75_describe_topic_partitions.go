// DescribeTopicPartitions: v0. KIP-966: topics in name order, each with its
// partitions (as Metadata shows them) and its authorized operations, at most
// min(ResponsePartitionLimit, max.request.partition.size.limit) partitions per answer,
// then a cursor (topic, partition) to continue from; a cursor at the start of the next
// topic when a page ends with a topic. No topics listed: every topic the client may
// describe; listed ones it may not get TOPIC_AUTHORIZATION_FAILED, unknown ones
// UNKNOWN_TOPIC_OR_PARTITION (neither takes from the partition limit). A cursor whose
// topic is not listed, or a negative cursor partition, is INVALID_REQUEST for every
// listed topic, as Kafka answers. Eligible leader replicas are always empty (Sluice has
// no ELR). Not implemented: nothing known.

package metadata

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDescribeTopicPartitions is DescribeTopicPartitions's claim: the versions above
// and the thin handler; the work is in the function it calls.
func claimDescribeTopicPartitions(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeTopicPartitions, Min: 0, Max: 0, Handler: kernel.Replying(m.describeTopicPartitions)}
}

func (m *Module) describeTopicPartitions(ctx context.Context, req *kernel.Request, r *kmsg.DescribeTopicPartitionsRequest) *kmsg.DescribeTopicPartitionsResponse {
	im := m.node.hub.image()
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	resp.Version = r.Version
	errTopic := func(name string, code int16) kmsg.DescribeTopicPartitionsResponseTopic {
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		t.Topic, t.ErrorCode = strPtr(name), code
		return t
	}

	var names []string // sorted, distinct
	listed := len(r.Topics) > 0
	if listed {
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	} else {
		names = slices.Sorted(im.TopicNames())
	}
	cur := r.Cursor
	if cur != nil && (cur.Partition < 0 || (listed && !slices.Contains(names, cur.Topic))) {
		for _, name := range names {
			resp.Topics = append(resp.Topics, errTopic(name, kerr.InvalidRequest.Code))
		}
		return resp
	}
	limit := int(m.node.brokerSettings(im).MaxRequestPartitionSizeLimit)
	if r.ResponsePartitionLimit > 0 && int(r.ResponsePartitionLimit) < limit {
		limit = int(r.ResponsePartitionLimit)
	}
	remaining := max(limit, 1)
	for _, name := range names {
		if cur != nil && name < cur.Topic {
			continue
		}
		if remaining == 0 {
			// The page ended exactly with the previous topic.
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name}
			break
		}
		allowed := req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, name)
		t := im.Topic(name)
		switch {
		case !allowed && listed:
			resp.Topics = append(resp.Topics, errTopic(name, kerr.TopicAuthorizationFailed.Code))
			continue
		case !allowed:
			continue
		case t == nil:
			resp.Topics = append(resp.Topics, errTopic(name, kerr.UnknownTopicOrPartition.Code))
			continue
		}
		from := 0
		if cur != nil && name == cur.Topic {
			from = int(cur.Partition)
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.TopicID, rt.IsInternal = strPtr(t.Name), t.ID, t.Internal
		rt.AuthorizedOperations = topicAuthorizedOps(ctx, req, name)
		for p := from; p < len(t.Partitions); p++ {
			if remaining == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(p)}
				break
			}
			mp := partitionMetadata(im, &t.Partitions[p], req.Conn.Listener, 12)
			dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			dp.ErrorCode, dp.Partition, dp.LeaderID, dp.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
			dp.Replicas, dp.ISR, dp.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
			dp.EligibleLeaderReplicas, dp.LastKnownELR = []int32{}, []int32{}
			if dp.OfflineReplicas == nil {
				dp.OfflineReplicas = []int32{}
			}
			rt.Partitions = append(rt.Partitions, dp)
			remaining--
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	return resp
}
