package metadata

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func createTopic(t *testing.T, fc *fakeContext, name string, partitions int32, configs map[string]string) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, strPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp := call[*kmsg.CreateTopicsResponse](t, fc, nil, req)
	return resp.Topics[0]
}

func metadataReq(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = strPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestCreateTopicsValidation(t *testing.T) {
	_, fc := startModule(t, t.TempDir())
	if rt := createTopic(t, fc, "exists", 1, nil); rt.ErrorCode != 0 {
		t.Fatalf("create: %v", rt.ErrorCode)
	}
	long := make([]byte, 250)
	for i := range long {
		long[i] = 'x'
	}
	for _, tc := range []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]*string
		assignment map[int32][]int32
		want       *kerr.Error
		wantConfig bool
	}{
		{name: "empty name", topic: "", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "dot", topic: ".", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "dotdot", topic: "..", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "too long", topic: string(long), partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "max length", topic: string(long[:249]), partitions: 1, rf: 1},
		{name: "bad char", topic: "a b", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "exists", topic: "exists", partitions: 1, rf: 1, want: kerr.TopicAlreadyExists},
		{name: "zero partitions", topic: "z", partitions: 0, rf: 1, want: kerr.InvalidPartitions},
		{name: "rf too big", topic: "z", partitions: 1, rf: 2, want: kerr.InvalidReplicationFactor},
		{name: "rf zero", topic: "z", partitions: 1, rf: 0, want: kerr.InvalidReplicationFactor},
		{name: "bad config", topic: "z", partitions: 1, rf: 1, configs: map[string]*string{"retention.ms": strPtr("soon")}, want: kerr.InvalidConfig},
		{name: "unknown config", topic: "z", partitions: 1, rf: 1, configs: map[string]*string{"no.such": strPtr("1")}, want: kerr.InvalidConfig},
		{name: "null config", topic: "z", partitions: 1, rf: 1, configs: map[string]*string{"retention.ms": nil}, want: kerr.InvalidConfig},
		{name: "assignment", topic: "assigned", partitions: -1, rf: -1, assignment: map[int32][]int32{0: {1}, 1: {1}}},
		{name: "assignment gap", topic: "z", partitions: -1, rf: -1, assignment: map[int32][]int32{0: {1}, 2: {1}}, want: kerr.InvalidReplicaAssignment},
		{name: "assignment unknown broker", topic: "z", partitions: -1, rf: -1, assignment: map[int32][]int32{0: {7}}, want: kerr.InvalidReplicaAssignment},
		{name: "assignment duplicate broker", topic: "z", partitions: -1, rf: -1, assignment: map[int32][]int32{0: {1, 1}}, want: kerr.InvalidReplicaAssignment},
		{name: "assignment and count", topic: "z", partitions: 2, rf: -1, assignment: map[int32][]int32{0: {1}}, want: kerr.InvalidRequest},
		{name: "collides", topic: "ex_ists", partitions: 1, rf: 1},
		{name: "collides with underscore", topic: "ex.ists", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version = 7
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.topic, tc.partitions, tc.rf
			for k, v := range tc.configs {
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				c.Name, c.Value = k, v
				rt.Configs = append(rt.Configs, c)
			}
			for p, rs := range tc.assignment {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = p, rs
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
			}
			req.Topics = append(req.Topics, rt)
			got := call[*kmsg.CreateTopicsResponse](t, fc, nil, req).Topics[0]
			want := int16(0)
			if tc.want != nil {
				want = tc.want.Code
			}
			if got.ErrorCode != want {
				t.Fatalf("code %v, want %v (%v)", kerr.ErrorForCode(got.ErrorCode), tc.want, derefOr(got.ErrorMessage, ""))
			}
			if want != 0 && got.ErrorMessage == nil && tc.want != kerr.TopicAlreadyExists {
				t.Errorf("no error message")
			}
		})
	}
}

func TestCreateTopicsValidateOnlyAndDetails(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.ValidateOnly = 7, true
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "dry", 4, 1
	req.Topics = append(req.Topics, rt)
	got := call[*kmsg.CreateTopicsResponse](t, fc, nil, req).Topics[0]
	if got.ErrorCode != 0 || got.NumPartitions != 4 || got.ReplicationFactor != 1 || m.Image().Topic("dry") != nil {
		t.Fatalf("validate only: %+v", got)
	}
	got = createTopic(t, fc, "real", 2, map[string]string{"retention.ms": "1234"})
	if got.ErrorCode != 0 || got.NumPartitions != 2 || got.TopicID == [16]byte{} {
		t.Fatalf("create: %+v", got)
	}
	var found bool
	for _, c := range got.Configs {
		if c.Name == "retention.ms" {
			found = c.Value != nil && *c.Value == "1234" && c.Source == int8(kmsg.ConfigSourceDynamicTopicConfig)
		}
	}
	if !found {
		t.Errorf("configs do not report retention.ms=1234 from the topic: %+v", got.Configs)
	}
	topic := m.Image().Topic("real")
	for _, p := range topic.Partitions {
		if p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) || p.LeaderEpoch != 0 {
			t.Errorf("partition %+v", p)
		}
	}
}

func TestCreateTopicsAuthorization(t *testing.T) {
	_, fc := startModule(t, t.TempDir())
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, n := range []string{"allowed", "denied"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	deny := denyAuthorizer{ops: map[kernel.Operation]bool{kernel.OpCreate: true}, topics: map[string]bool{"denied": true}, cluster: true}
	resp := call[*kmsg.CreateTopicsResponse](t, fc, deny, req)
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("codes %d %d", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
	}
}

func TestMetadataHandler(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	createTopic(t, fc, "a", 2, nil)
	createTopic(t, fc, "b", 1, nil)
	im := m.Image()

	all := call[*kmsg.MetadataResponse](t, fc, nil, metadataReq(12))
	if len(all.Topics) != 2 || *all.Topics[0].Topic != "a" || all.Topics[0].TopicID != im.Topic("a").ID {
		t.Fatalf("all topics: %+v", all.Topics)
	}
	// v13 (KIP-1102): the same answer with a top-level error code, never set.
	if v13 := call[*kmsg.MetadataResponse](t, fc, nil, metadataReq(13)); v13.ErrorCode != 0 || len(v13.Topics) != 2 {
		t.Fatalf("v13: error %d, %d topics", v13.ErrorCode, len(v13.Topics))
	}
	if *all.ClusterID != im.ClusterID || all.ControllerID != 1 || len(all.Brokers) != 1 || all.Brokers[0].Port != 9092 {
		t.Errorf("cluster: %v %d %+v", *all.ClusterID, all.ControllerID, all.Brokers)
	}
	if all.Topics[0].AuthorizedOperations != -2147483648 {
		t.Errorf("authorized operations not requested but %d", all.Topics[0].AuthorizedOperations)
	}
	p := all.Topics[0].Partitions[1]
	if p.Partition != 1 || p.Leader != 1 || p.LeaderEpoch != 0 || p.ErrorCode != 0 || !slices.Equal(p.ISR, []int32{1}) {
		t.Errorf("partition: %+v", p)
	}

	// v0: an empty list means all topics.
	if v0 := call[*kmsg.MetadataResponse](t, fc, nil, metadataReq(0, []string{}...)); len(v0.Topics) != 2 {
		t.Errorf("v0 empty list: %d topics", len(v0.Topics))
	}
	// v1+: an empty list means none.
	if none := call[*kmsg.MetadataResponse](t, fc, nil, metadataReq(12, []string{}...)); len(none.Topics) != 0 {
		t.Errorf("v12 empty list: %d topics", len(none.Topics))
	}

	// By id, unknown id, invalid name, no auto-creation.
	req := metadataReq(12, "bad name", "b")
	byID := kmsg.NewMetadataRequestTopic()
	byID.TopicID = im.Topic("a").ID
	unknownID := kmsg.NewMetadataRequestTopic()
	unknownID.TopicID = [16]byte{1}
	req.Topics = append(req.Topics, byID, unknownID)
	req.AllowAutoTopicCreation = false
	req.IncludeTopicAuthorizedOperations = true
	resp := call[*kmsg.MetadataResponse](t, fc, nil, req)
	codes := []int16{kerr.InvalidTopicException.Code, 0, 0, kerr.UnknownTopicID.Code}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != codes[i] {
			t.Errorf("topic %d: code %d, want %d", i, rt.ErrorCode, codes[i])
		}
	}
	if *resp.Topics[2].Topic != "a" {
		t.Errorf("lookup by id gave %v", resp.Topics[2].Topic)
	}
	if ops := resp.Topics[1].AuthorizedOperations; ops != 1<<3|1<<4|1<<5|1<<6|1<<7|1<<8|1<<10|1<<11 {
		t.Errorf("authorized operations %b", ops)
	}
	req = metadataReq(12, "missing")
	if resp := call[*kmsg.MetadataResponse](t, fc, nil, req); resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("missing without auto-create: %d", resp.Topics[0].ErrorCode)
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	m, fc := startModule(t, t.TempDir(), func(_ *Module, fc *fakeContext) {
		fc.info.StaticConfigs = map[string]string{"num.partitions": "3"}
	})
	req := metadataReq(12, "auto", "auto")
	req.AllowAutoTopicCreation = true
	resp := call[*kmsg.MetadataResponse](t, fc, nil, req)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("auto-created: %+v", resp.Topics)
	}
	if topic := m.Image().Topic("auto"); topic == nil || resp.Topics[0].TopicID != topic.ID {
		t.Fatalf("image: %+v", topic)
	}
	// Old versions always ask for auto-creation.
	if resp := call[*kmsg.MetadataResponse](t, fc, nil, metadataReq(3, "auto3")); resp.Topics[0].ErrorCode != 0 {
		t.Errorf("v3: %d", resp.Topics[0].ErrorCode)
	}
	// Without CREATE: TOPIC_AUTHORIZATION_FAILED.
	deny := denyAuthorizer{ops: map[kernel.Operation]bool{kernel.OpCreate: true}, cluster: true}
	if resp := call[*kmsg.MetadataResponse](t, fc, deny, req2(12, "nocreate")); resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("denied create: %d", resp.Topics[0].ErrorCode)
	}
	// The broker config turns it off.
	_, fc2 := startModule(t, t.TempDir(), func(_ *Module, fc *fakeContext) {
		fc.info.StaticConfigs = map[string]string{"auto.create.topics.enable": "false"}
	})
	if resp := call[*kmsg.MetadataResponse](t, fc2, nil, req2(12, "off")); resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("auto-create disabled: %d", resp.Topics[0].ErrorCode)
	}
}

func req2(version int16, topics ...string) *kmsg.MetadataRequest {
	r := metadataReq(version, topics...)
	r.AllowAutoTopicCreation = true
	return r
}

func TestMetadataAuthorization(t *testing.T) {
	_, fc := startModule(t, t.TempDir())
	createTopic(t, fc, "open", 1, nil)
	createTopic(t, fc, "secret", 1, nil)
	deny := denyAuthorizer{ops: map[kernel.Operation]bool{kernel.OpDescribe: true}, topics: map[string]bool{"secret": true}}
	all := call[*kmsg.MetadataResponse](t, fc, deny, metadataReq(12))
	if len(all.Topics) != 1 || *all.Topics[0].Topic != "open" {
		t.Errorf("listing shows %+v", all.Topics)
	}
	one := call[*kmsg.MetadataResponse](t, fc, deny, metadataReq(12, "secret"))
	if one.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("secret: %d", one.Topics[0].ErrorCode)
	}
}

func TestDeleteTopicsHandler(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	createTopic(t, fc, "a", 1, nil)
	createTopic(t, fc, "b", 1, nil)
	createTopic(t, fc, "__consumer_offsets", 1, nil)
	bID := m.Image().Topic("b").ID

	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	for _, n := range []string{"a", "missing", "__consumer_offsets"} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = strPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	for _, id := range [][16]byte{bID, {9}} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	resp := call[*kmsg.DeleteTopicsResponse](t, fc, nil, req)
	want := []*kerr.Error{nil, kerr.UnknownTopicOrPartition, kerr.InvalidRequest, nil, kerr.UnknownTopicID}
	for i, rt := range resp.Topics {
		w := int16(0)
		if want[i] != nil {
			w = want[i].Code
		}
		if rt.ErrorCode != w {
			t.Errorf("entry %d (%v): code %d, want %v", i, rt.Topic, rt.ErrorCode, want[i])
		}
	}
	if *resp.Topics[3].Topic != "b" {
		t.Errorf("by id: name %v", resp.Topics[3].Topic)
	}
	im := m.Image()
	if im.Topic("a") != nil || im.Topic("b") != nil || im.Topic("__consumer_offsets") == nil || im.NumTopics() != 1 {
		t.Errorf("topics after delete: %v", slices.Sorted(im.TopicNames()))
	}

	// v0-v5 by name; a duplicate is refused.
	createTopic(t, fc, "c", 1, nil)
	old := kmsg.NewPtrDeleteTopicsRequest()
	old.Version = 4
	old.TopicNames = []string{"c", "c"}
	for _, rt := range call[*kmsg.DeleteTopicsResponse](t, fc, nil, old).Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("duplicate: %d", rt.ErrorCode)
		}
	}
	// Delete on the cluster would allow it (Kafka's rule): deny both.
	deny := denyAuthorizer{ops: map[kernel.Operation]bool{kernel.OpDelete: true}, topics: map[string]bool{"c": true}, cluster: true}
	old.TopicNames = []string{"c"}
	if rt := call[*kmsg.DeleteTopicsResponse](t, fc, deny, old).Topics[0]; rt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("denied: %d", rt.ErrorCode)
	}
}

func TestCreatePartitionsHandler(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	createTopic(t, fc, "t", 2, nil)
	grow := func(count int32, validateOnly bool, assignment ...[]int32) kmsg.CreatePartitionsResponseTopic {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version, req.ValidateOnly = 3, validateOnly
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "t", count
		for _, a := range assignment {
			ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
			ra.Replicas = a
			rt.Assignment = append(rt.Assignment, ra)
		}
		req.Topics = append(req.Topics, rt)
		return call[*kmsg.CreatePartitionsResponse](t, fc, nil, req).Topics[0]
	}
	for _, tc := range []struct {
		name       string
		count      int32
		validate   bool
		assignment [][]int32
		want       *kerr.Error
		after      int
	}{
		{"same", 2, false, nil, kerr.InvalidPartitions, 2},
		{"fewer", 1, false, nil, kerr.InvalidPartitions, 2},
		{"validate only", 4, true, nil, nil, 2},
		{"grow", 4, false, nil, nil, 4},
		{"assignment count", 6, false, [][]int32{{1}}, kerr.InvalidReplicaAssignment, 4},
		{"assignment rf", 5, false, [][]int32{{}}, kerr.InvalidReplicaAssignment, 4},
		{"assignment broker", 5, false, [][]int32{{3}}, kerr.InvalidReplicaAssignment, 4},
		{"assignment", 5, false, [][]int32{{1}}, nil, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := grow(tc.count, tc.validate, tc.assignment...)
			w := int16(0)
			if tc.want != nil {
				w = tc.want.Code
			}
			if got.ErrorCode != w {
				t.Errorf("code %d, want %v (%s)", got.ErrorCode, tc.want, derefOr(got.ErrorMessage, ""))
			}
			if n := len(m.Image().Topic("t").Partitions); n != tc.after {
				t.Errorf("%d partitions, want %d", n, tc.after)
			}
		})
	}
}

func TestDescribeClusterHandler(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.IncludeClusterAuthorizedOperations = 2, true
	resp := call[*kmsg.DescribeClusterResponse](t, fc, nil, req)
	if resp.ClusterID != m.Image().ClusterID || resp.ControllerID != 1 || len(resp.Brokers) != 1 || resp.ClusterAuthorizedOperations <= 0 {
		t.Fatalf("%+v", resp)
	}
	req.EndpointType = 2
	if resp := call[*kmsg.DescribeClusterResponse](t, fc, nil, req); resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Errorf("controllers: %d", resp.ErrorCode)
	}
}

func TestDeleteTopicsDisabled(t *testing.T) {
	m, fc := startModule(t, t.TempDir(), func(_ *Module, fc *fakeContext) {
		fc.info.StaticConfigs = map[string]string{"delete.topic.enable": "false"}
	})
	createTopic(t, fc, "kept", 1, nil)
	for _, tc := range []struct {
		version int16
		want    *kerr.Error
	}{{6, kerr.TopicDeletionDisabled}, {2, kerr.InvalidRequest}} {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version, req.TopicNames = tc.version, []string{"kept"}
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = strPtr("kept")
		req.Topics = append(req.Topics, rt)
		if got := call[*kmsg.DeleteTopicsResponse](t, fc, nil, req).Topics[0]; got.ErrorCode != tc.want.Code {
			t.Errorf("v%d: code %d, want %v", tc.version, got.ErrorCode, tc.want)
		}
	}
	if m.Image().Topic("kept") == nil {
		t.Error("topic deleted")
	}
}

// TestCreateTopicsHammer creates the same names from many goroutines: each name is
// created exactly once and every other attempt gets TOPIC_ALREADY_EXISTS.
func TestCreateTopicsHammer(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	const goroutines, loops, names = 8, 10, 5
	var mu sync.Mutex
	wins := map[string]int{}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < loops; i++ {
				name := fmt.Sprintf("h%d", (g+i)%names)
				rt := createTopic(t, fc, name, 2, nil)
				switch rt.ErrorCode {
				case 0:
					mu.Lock()
					wins[name]++
					mu.Unlock()
				case kerr.TopicAlreadyExists.Code:
				default:
					t.Errorf("%s: code %d", name, rt.ErrorCode)
				}
			}
		}()
	}
	wg.Wait()
	if len(wins) != names || m.Image().NumTopics() != names {
		t.Fatalf("wins %v, topics %d", wins, m.Image().NumTopics())
	}
	for name, n := range wins {
		if n != 1 {
			t.Errorf("%s created %d times", name, n)
		}
	}
}
