package metadata_test

import (
	"slices"
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

// TestListConfigResources: v1 lists each requested type in Kafka's order (an empty
// list is every type), refuses a type it does not know as a whole, and v0 lists client
// metrics subscriptions only (Sluice has none).
func TestListConfigResources(t *testing.T) {
	b := testbroker.Start(t)
	ctx := testCtx(t)
	adm := b.Admin(t)
	for _, name := range []string{"tb", "ta"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g1"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	v := "50000"
	c.Name, c.Value = "consumer.session.timeout.ms", &v
	res.Configs = append(res.Configs, c)
	alter.Resources = append(alter.Resources, res)
	if ar, err := alter.RequestWith(ctx, b.Client(t)); err != nil || ar.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, ar)
	}
	list := func(version int16, types ...int8) (int16, []string) {
		t.Helper()
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.ResourceTypes = types
		resp, err := req.RequestWith(ctx, pinned(t, b, 74, version))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, cr := range resp.ConfigResources {
			got = append(got, kmsg.ConfigResourceType(cr.Type).String()+":"+cr.Name)
		}
		return resp.ErrorCode, got
	}
	const topic, broker, logger, group = int8(kmsg.ConfigResourceTypeTopic), int8(kmsg.ConfigResourceTypeBroker),
		int8(kmsg.ConfigResourceTypeBrokerLogger), int8(kmsg.ConfigResourceTypeGroupConfig)
	for _, tc := range []struct {
		what    string
		version int16
		types   []int8
		code    int16
		want    []string
	}{
		{"every type", 1, nil, 0, []string{"GROUP_CONFIG:g1", "BROKER_LOGGER:1", "BROKER:1", "TOPIC:ta", "TOPIC:tb"}},
		{"a type twice, in any order", 1, []int8{topic, group, topic}, 0, []string{"GROUP_CONFIG:g1", "TOPIC:ta", "TOPIC:tb"}},
		{"brokers", 1, []int8{broker, logger}, 0, []string{"BROKER_LOGGER:1", "BROKER:1"}},
		{"an unknown type", 1, []int8{topic, 99}, kerr.UnsupportedVersion.Code, nil},
		{"v0: client metrics only", 0, nil, 0, nil},
	} {
		code, got := list(tc.version, tc.types...)
		if code != tc.code || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v %v", tc.what, kerr.ErrorForCode(code), got, kerr.ErrorForCode(tc.code), tc.want)
		}
	}
}

// TestE2EApiVersionsMisrouted: ApiVersions v5 naming this broker's node id with
// another cluster's id is REBOOTSTRAP_REQUIRED (KIP-1242); with its own, the keys.
// kgo sends both on every connection to a broker it learned from metadata, so every
// other kgo test runs the matching path.
func TestE2EApiVersionsMisrouted(t *testing.T) {
	b := testbroker.Start(t)
	ctx := testCtx(t)
	cl := b.Client(t)
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || md.ClusterID == nil || *md.ClusterID == "" {
		t.Fatalf("metadata: %v %+v", err, md)
	}
	for _, tc := range []struct {
		cluster string
		want    error
	}{
		{*md.ClusterID, nil},
		{"another-cluster", kerr.RebootstrapRequired},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 5
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		req.ClusterID, req.NodeID = kmsg.StringPtr(tc.cluster), md.Brokers[0].NodeID
		resp, err := req.RequestWith(ctx, cl.Broker(int(md.Brokers[0].NodeID)))
		if err != nil {
			t.Fatal(err)
		}
		if got := kerr.ErrorForCode(resp.ErrorCode); got != tc.want || (len(resp.ApiKeys) > 0) != (tc.want == nil) {
			t.Errorf("cluster %q: %v with %d keys, want %v", tc.cluster, got, len(resp.ApiKeys), tc.want)
		}
	}
}
