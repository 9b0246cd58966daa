package metadata_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestAlterReassignmentsV1: AllowReplicationFactorChange false (KIP-860) refuses a
// target of another size with INVALID_REPLICATION_FACTOR before anything else is
// checked; true, or v0, goes on to the usual checks; the answer echoes the option.
func TestAlterReassignmentsV1(t *testing.T) {
	b := testbroker.Start(t)
	ctx := testCtx(t)
	if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, nil, "rf"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what    string
		version int16
		allow   bool
		target  []int32
		want    *kerr.Error
	}{
		{"a new size, not allowed", 1, false, []int32{1, 2}, kerr.InvalidReplicationFactor},
		{"a new size, allowed: broker 2 is unknown", 1, true, []int32{1, 2}, kerr.InvalidReplicaAssignment},
		{"v0 allows a new size", 0, false, []int32{1, 2}, kerr.InvalidReplicaAssignment},
		{"the same size, not allowed", 1, false, []int32{1}, nil},
	} {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.AllowReplicationFactorChange = tc.allow
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = "rf"
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Replicas = tc.target
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, pinned(t, b, 45, tc.version))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetVersion() != tc.version || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("%s: %+v", tc.what, resp)
		}
		got := resp.Topics[0].Partitions[0].ErrorCode
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if got != want {
			t.Errorf("%s: %v, want %v", tc.what, kerr.ErrorForCode(got), tc.want)
		}
		if tc.version >= 1 && resp.AllowReplicationFactorChange != tc.allow {
			t.Errorf("%s: the answer says AllowReplicationFactorChange %v", tc.what, resp.AllowReplicationFactorChange)
		}
	}
}
