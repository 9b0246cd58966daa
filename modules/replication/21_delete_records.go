// DeleteRecords: v0-v2. Not implemented: waiting for followers' low watermarks (with
// RF=1 the leader's is final at once).

package replication

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// deleteRecordsClaim claims the versions this file's header lists.
func deleteRecordsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DeleteRecords, Min: 0, Max: 2, Handler: kernel.Typed(m.handleDeleteRecords)}
}

func (m *Module) handleDeleteRecords(ctx context.Context, req *kernel.Request, r *kmsg.DeleteRecordsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for i := range r.Topics {
		t := &r.Topics[i]
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		allowed := req.Allowed(ctx, kernel.OpDelete, kernel.ResTopic, t.Topic)
		for j := range t.Partitions {
			in := &t.Partitions[j]
			out := kmsg.NewDeleteRecordsResponseTopicPartition()
			out.Partition = in.Partition
			out.LowWatermark = -1
			if !allowed {
				out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else {
				out.LowWatermark, out.ErrorCode = m.deleteRecords(kernel.TopicPartition{Topic: t.Topic, Partition: in.Partition}, in.Offset)
			}
			rt.Partitions = append(rt.Partitions, out)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}

func (m *Module) deleteRecords(tp kernel.TopicPartition, offset int64) (int64, int16) {
	p, code := m.ledPartition(m.meta.Image(), tp)
	if p == nil {
		return -1, code
	}
	if !strings.Contains(p.Config().CleanupPolicy, "delete") {
		return -1, kerr.PolicyViolation.Code // compact-only topics keep their records
	}
	low, err := p.deleteRecordsBefore(offset)
	if err != nil {
		if !errors.Is(err, kernel.ErrOffsetOutOfRange) {
			m.log.Error("delete records", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
		return -1, errorCode(err)
	}
	return low, 0
}
