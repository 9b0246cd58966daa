package metadata_test

import (
	"strings"
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

// Absurd numbers and names in admin requests get Kafka error codes, never a topic.
func TestE2EAbsurdAdminRequests(t *testing.T) {
	b := testbroker.Start(t)
	cl := b.Client(t)
	ctx := testCtx(t)
	for _, tc := range []badCreate{
		{"2^31-1 partitions", "p", 1<<31 - 1, 1, nil, kerr.InvalidPartitions},
		{"replication factor 32767", "r", 1, 32767, nil, kerr.InvalidReplicationFactor},
		{"zero partitions", "z", 0, 1, nil, kerr.InvalidPartitions},
		{"unicode name", "tøpic", 1, 1, nil, kerr.InvalidTopicException},
		{"250-character name", strings.Repeat("n", 250), 1, 1, nil, kerr.InvalidTopicException},
		{"empty name", "", 1, 1, nil, kerr.InvalidTopicException},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.topic, tc.partitions, tc.rf
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Topics[0].ErrorCode; got != tc.want.Code {
				t.Fatalf("code %d, want %v", got, tc.want)
			}
		})
	}
	if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, nil, "grow"); err != nil {
		t.Fatal(err)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "grow", 10_000_000
	cp.Topics = append(cp.Topics, cpt)
	resp, err := cp.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != kerr.InvalidPartitions.Code {
		t.Fatalf("10M partitions: code %d", resp.Topics[0].ErrorCode)
	}
	topics, err := b.Admin(t).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 1 || names[0] != "grow" || len(topics["grow"].Partitions) != 1 {
		t.Fatalf("topics after refused requests: %v", names)
	}
}

// Two topics of one CreateTopics request whose names differ only in '.' versus '_'
// must not both be created, as with an existing topic.
func TestE2ECreateTopicsCollisionInOneRequest(t *testing.T) {
	b := testbroker.Start(t)
	ctx := testCtx(t)
	for _, validateOnly := range []bool{true, false} {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly = validateOnly
		for _, name := range []string{"metrics.cpu", "metrics_cpu"} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, b.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.InvalidTopicException.Code {
			t.Fatalf("validate only %v: codes %d, %d", validateOnly, resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
		}
	}
	topics, err := b.Admin(t).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 1 || names[0] != "metrics.cpu" {
		t.Fatalf("topics: %v", names)
	}
}

// A Metadata request naming one topic id twice is answered once for it, as for names.
func TestE2EMetadataDuplicateTopicID(t *testing.T) {
	b := testbroker.Start(t)
	ctx := testCtx(t)
	created, err := b.Admin(t).CreateTopic(ctx, 1, 1, nil, "dup")
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	for range 3 {
		mt := kmsg.NewMetadataRequestTopic()
		mt.TopicID = created.ID
		req.Topics = append(req.Topics, mt)
	}
	resp, err := req.RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "dup" || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("topics: %+v", resp.Topics)
	}
}
