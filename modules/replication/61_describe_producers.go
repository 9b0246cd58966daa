// DescribeProducers: v0. Answers from the leader's producer state (Log.Producers).

package replication

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// describeProducersClaim claims the versions this file's header lists.
func describeProducersClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeProducers, Min: 0, Max: 0, Handler: kernel.Typed(m.handleDescribeProducers)}
}

// handleDescribeProducers lists the producers each partition's log remembers. As
// Kafka: READ on the topic (else TOPIC_AUTHORIZATION_FAILED), checked before
// existence is revealed; a partition missing from metadata answers
// UNKNOWN_TOPIC_OR_PARTITION, one this node does not lead NOT_LEADER_OR_FOLLOWER.
func (m *Module) handleDescribeProducers(ctx context.Context, req *kernel.Request, r *kmsg.DescribeProducersRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	im := m.meta.Image()
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(r.Topics))
	for ti := range r.Topics {
		t := &r.Topics[ti]
		ot := &resp.Topics[ti]
		ot.Default()
		ot.Topic = t.Topic
		allowed := req.Allowed(ctx, kernel.OpRead, kernel.ResTopic, t.Topic)
		ot.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(t.Partitions))
		for pi, part := range t.Partitions {
			op := &ot.Partitions[pi]
			op.Default()
			op.Partition = part
			if !allowed {
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			p, code := m.ledPartition(im, kernel.TopicPartition{Topic: t.Topic, Partition: part})
			if p == nil {
				op.ErrorCode = code
				continue
			}
			states := p.log.Producers()
			op.ActiveProducers = make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(states))
			for _, st := range states {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = st.ProducerID
				ap.ProducerEpoch = int32(st.Epoch)
				ap.LastSequence = st.LastSequence
				ap.LastTimestamp = st.LastTimestamp
				ap.CoordinatorEpoch = st.CoordinatorEpoch
				ap.CurrentTxnStartOffset = st.TxnStartOffset
				op.ActiveProducers = append(op.ActiveProducers, ap)
			}
		}
	}
	return kernel.Reply(resp), nil
}
