package metadata_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestE2EElectLeaders: kadm's ElectLeaders on a single broker, where every partition is
// led by its preferred replica: nothing to elect, unknown partitions reported, every
// partition asked for with null topics (and none answered).
func TestE2EElectLeaders(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Admin(t)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "el"); err != nil {
		t.Fatal(err)
	}
	for _, how := range []kadm.ElectLeadersHow{kadm.ElectPreferredReplica, kadm.ElectLiveReplica} {
		rs, err := adm.ElectLeaders(ctx, how, kadm.TopicsSet{"el": {0: {}, 1: {}}, "missing": {0: {}}})
		if err != nil {
			t.Fatalf("%v: %v", how, err)
		}
		for p := int32(0); p < 2; p++ {
			if r := rs["el"][p]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Errorf("%v el-%d: %+v", how, p, r)
			}
		}
		if r := rs["missing"][0]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("%v missing-0: %+v", how, r)
		}
	}
	// kadm sends null topics for an empty set: every partition, and none needs it.
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil || len(rs) != 0 {
		t.Errorf("all partitions: %v %+v", err, rs)
	}
	// v0 has no election type and no top-level error code.
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 0
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "el", []int32{1}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, b.Client(t, kgo.MaxVersions(kversion.V2_2_0())))
	if err != nil || resp.Version != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.ElectionNotNeeded.Code {
		t.Errorf("v0: %v %+v", err, resp)
	}
}

// TestE2EPartitionReassignments: kadm's AlterPartitionAssignments and
// ListPartitionReassignments on a single broker: a reorder-free target is accepted and
// changes nothing, bad targets and cancelling nothing are refused, nothing is listed.
func TestE2EPartitionReassignments(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Admin(t)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "ra"); err != nil {
		t.Fatal(err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("ra", 0, []int32{1})
	req.Assign("ra", 1, []int32{1, 7})
	req.CancelAssign("ra", 5)
	req.Assign("missing", 0, []int32{1})
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		topic string
		p     int32
		want  error
	}{
		{"ra", 0, nil},
		{"ra", 1, kerr.InvalidReplicaAssignment},
		{"ra", 5, kerr.UnknownTopicOrPartition},
		{"missing", 0, kerr.UnknownTopicOrPartition},
	} {
		if r := rs[c.topic][c.p]; !errors.Is(r.Err, c.want) || (c.want == nil) != (r.Err == nil) {
			t.Errorf("%s-%d: %+v, want %v", c.topic, c.p, r, c.want)
		}
	}
	req = nil
	req.CancelAssign("ra", 0)
	rs, err = adm.AlterPartitionAssignments(ctx, req)
	if err != nil || !errors.Is(rs["ra"][0].Err, kerr.NoReassignmentInProgress) {
		t.Errorf("cancel nothing: %v %+v", err, rs)
	}
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {0: {}, 1: {}}})
	if err != nil || len(listed) != 0 {
		t.Errorf("listed: %v %+v", err, listed)
	}
	topics, err := adm.ListTopics(ctx, "ra")
	if err != nil || !slices.Equal(topics["ra"].Partitions[0].Replicas, []int32{1}) {
		t.Errorf("ra after: %v %+v", err, topics["ra"])
	}
}
