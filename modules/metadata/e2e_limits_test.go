package metadata_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// A CreateTopics request with a manual replica assignment must obey the same partition
// cap as one with a partition count: a ~1 MB request should not put a topic of 70,000
// partitions in the metadata log.
func TestE2ECreateTopicsAssignmentPartitionCap(t *testing.T) {
	b := testbroker.Start(t)
	cl := b.Client(t)
	ctx := testCtx(t)

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "huge-assign", -1, -1
	for p := int32(0); p < 70000; p++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidPartitions.Code {
		t.Fatalf("create with 70000 assigned partitions: %+v", resp.Topics[0].ErrorCode)
	}
	if topics, err := b.Admin(t).ListTopics(ctx, "huge-assign"); err != nil || topics.Has("huge-assign") {
		t.Fatalf("topic created anyway: %v", err)
	}
}
