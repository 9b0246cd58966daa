package metadata

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

func id(b byte) uuid { return uuid{0: b, 15: 7} }

func i32(v int32) *int32 { return &v }

// history is a log exercising every record type, with the result each entry must have.
func history() []struct {
	rec     record
	wantErr error
} {
	assign := func(rs ...int32) partitionAssignment {
		return partitionAssignment{Replicas: rs, Leader: rs[0], ISR: rs}
	}
	return []struct {
		rec     record
		wantErr error
	}{
		{&clusterIDRecord{ClusterID: id(1).String()}, nil},
		{&clusterIDRecord{ClusterID: id(2).String()}, errClusterIDSet},
		{&leaderChangeRecord{NodeID: 1, Term: 2}, nil},
		{&registerBrokerRecord{NodeID: 1, Incarnation: id(3), Endpoints: []endpoint{{"PLAINTEXT", "h1", 9092}}}, nil},
		{&registerBrokerRecord{NodeID: 2, Incarnation: id(4), Rack: "r2", Endpoints: []endpoint{{"PLAINTEXT", "h2", 9092}}}, nil},
		{&fenceBrokerRecord{NodeID: 2}, nil},
		{&unfenceBrokerRecord{NodeID: 2, Epoch: 6}, nil},
		{&fenceBrokerRecord{NodeID: 2, Epoch: 4}, errStale},
		{&fenceBrokerRecord{NodeID: 9}, errUnknownBroker},
		{&createTopicRecord{Name: "a", ID: id(10), Partitions: []partitionAssignment{assign(1, 2), assign(2, 1)},
			Configs: map[string]string{"retention.ms": "1000"}}, nil},
		{&createTopicRecord{Name: "a", ID: id(11), Partitions: []partitionAssignment{assign(1)}}, errTopicExists},
		{&createTopicRecord{Name: "b", ID: id(10), Partitions: []partitionAssignment{assign(1)}}, errTopicExists},
		{&createTopicRecord{Name: "c", ID: id(12)}, errInvalidEntry},
		{&createTopicRecord{Name: "__consumer_offsets", ID: id(13), Partitions: []partitionAssignment{assign(1)}}, nil},
		{&createPartitionsRecord{Topic: "a", ID: id(10), From: 2, Partitions: []partitionAssignment{assign(1, 2)}}, nil},
		{&createPartitionsRecord{Topic: "a", ID: id(10), From: 2, Partitions: []partitionAssignment{assign(1, 2)}}, errStale},
		{&createPartitionsRecord{Topic: "a", ID: id(99), From: 3, Partitions: []partitionAssignment{assign(1, 2)}}, errUnknownTopic},
		{&alterTopicConfigsRecord{Topic: "a", ID: id(10), configChange: configChange{Set: map[string]string{"segment.ms": "5"}}}, nil},
		{&alterTopicConfigsRecord{Topic: "a", ID: id(10), configChange: configChange{Delete: []string{"retention.ms"}}}, nil},
		{&alterBrokerConfigsRecord{Node: "", configChange: configChange{Set: map[string]string{"num.partitions": "3"}}}, nil},
		{&alterBrokerConfigsRecord{Node: "1", configChange: configChange{Set: map[string]string{"log.retention.ms": "9"}}}, nil},
		{&alterBrokerConfigsRecord{Node: "1", configChange: configChange{Replace: true}}, nil},
		{&partitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: 0, Leader: i32(2), ISR: []int32{2}}, nil},
		{&partitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: 0, ISR: []int32{2, 1}}, errStale},
		{&partitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: -1, ISR: []int32{2, 1}}, nil},
		{&partitionChangeRecord{Topic: "a", ID: id(10), Partition: 7, PartitionEpoch: -1}, errInvalidEntry},
		{&deleteTopicRecord{Name: "__consumer_offsets", ID: id(99)}, errUnknownTopic},
		{&deleteTopicRecord{Name: "__consumer_offsets", ID: id(13)}, nil},
		{&leaderChangeRecord{NodeID: 2, Term: 3}, nil},
		{&extensionRecord{Namespace: "t", Key: "a", Value: []byte("1")}, nil},
		{&extensionRecord{Namespace: "t", Key: "b", Value: []byte{0, 0xff}}, nil},
		{&extensionRecord{Namespace: "u", Key: "empty"}, nil}, // an empty value
		{&extensionRecord{Namespace: "t", Key: "a", Delete: true}, nil},
		{&extensionRecord{Namespace: "v", Key: "absent", Delete: true}, nil},
		{&extensionRecord{Namespace: "", Key: "k", Value: []byte("1")}, errInvalidEntry},
		{&extensionRecord{Namespace: "t", Key: string(make([]byte, 256)), Value: []byte("1")}, errInvalidEntry},
		{&producerIDsRecord{BrokerID: 1, Count: 10}, nil},
		{&producerIDsRecord{BrokerID: 1, Count: 0}, errInvalidEntry},
		{&producerIDsRecord{BrokerID: 2, Count: 5}, nil},
		// Version 2 PartitionChange: a reassignment of a-1 from [2 1] to [1] starts,
		// and a leader's ISR change is checked against its epochs.
		{&partitionChangeRecord{Topic: "a", ID: id(10), Partition: 1, PartitionEpoch: 0, Replicas: []int32{1, 2},
			partitionChangeV2: partitionChangeV2{Validate: true, Reassignment: &reassignmentRecord{Removing: []int32{2}}}}, nil},
		{&partitionChangeRecord{Topic: "a", ID: id(10), Partition: 1, PartitionEpoch: 1, ISR: []int32{2},
			partitionChangeV2: partitionChangeV2{ExpectLeader: i32(2), ExpectLeaderEpoch: i32(1), Validate: true}}, errFencedLeaderEpoch},
		{&partitionChangeRecord{Topic: "a", ID: id(10), Partition: 1, PartitionEpoch: 1, ISR: []int32{1, 2},
			partitionChangeV2: partitionChangeV2{ExpectLeader: i32(2), ExpectLeaderEpoch: i32(0), Validate: true}}, nil},
	}
}

// replay applies history through the record codec, as the FSM does.
func replay(t *testing.T) *state {
	t.Helper()
	s := emptyState()
	for i, h := range history() {
		b, err := encodeRecord(h.rec)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := decodeRecord(b)
		if err != nil {
			t.Fatalf("entry %d: decode: %v", i, err)
		}
		prev := s
		prevImg := *s.img
		s, err = s.apply(uint64(i+2), rec)
		if !errors.Is(err, h.wantErr) || (err != nil) != (h.wantErr != nil) {
			t.Fatalf("entry %d %T: err %v, want %v", i, h.rec, err, h.wantErr)
		}
		if s.img.Version != uint64(i+2) {
			t.Fatalf("entry %d: version %d", i, s.img.Version)
		}
		if !reflect.DeepEqual(*prev.img, prevImg) {
			t.Fatalf("entry %d modified the previous image", i)
		}
	}
	return s
}

func TestApplyHistory(t *testing.T) {
	s := replay(t)
	im := s.img
	if im.ClusterID != id(1).String() || im.ControllerID != 2 {
		t.Errorf("cluster %q controller %d", im.ClusterID, im.ControllerID)
	}
	if b := im.Brokers[2]; b == nil || b.Fenced || b.Rack != "r2" || s.regs[2].Epoch != 6 {
		t.Errorf("broker 2: %+v %+v", b, s.regs[2])
	}
	a := im.Topic("a")
	if a == nil || len(a.Partitions) != 3 || im.TopicsByID[id(10)] != a {
		t.Fatalf("topic a: %+v", a)
	}
	if !reflect.DeepEqual(a.Configs, map[string]string{"segment.ms": "5"}) {
		t.Errorf("configs %v", a.Configs)
	}
	p0 := a.Partitions[0]
	want := kernel.PartitionImage{Partition: 0, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{2, 1}}
	if !reflect.DeepEqual(p0, want) {
		t.Errorf("partition 0 = %+v, want %+v", p0, want)
	}
	want1 := kernel.PartitionImage{Partition: 1, Leader: 2, LeaderEpoch: 0, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2, 1}, RemovingReplicas: []int32{2}}
	if p1 := a.Partitions[1]; !reflect.DeepEqual(p1, want1) {
		t.Errorf("partition 1 = %+v, want %+v", p1, want1)
	}
	if p2 := a.Partitions[2]; p2.Partition != 2 || p2.Leader != 1 {
		t.Errorf("partition 2 = %+v", p2)
	}
	if im.Topic("__consumer_offsets") != nil || len(im.TopicsByID) != 1 {
		t.Errorf("deleted topic still present")
	}
	if !reflect.DeepEqual(im.BrokerConfigs, map[string]map[string]string{"": {"num.partitions": "3"}}) {
		t.Errorf("broker configs %v", im.BrokerConfigs)
	}
	wantExt := map[string]map[string][]byte{"t": {"b": {0, 0xff}}, "u": {"empty": {}}}
	if !reflect.DeepEqual(im.Extensions, wantExt) {
		t.Errorf("extensions %v", im.Extensions)
	}
	if s.nextProducerID != 15 {
		t.Errorf("next producer id %d", s.nextProducerID)
	}
}

func TestApplyDeterministic(t *testing.T) {
	a, err := encodeSnapshot(replay(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeSnapshot(replay(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("two replays differ:\n%s\n%s", a, b)
	}
}

func TestSnapshotRestore(t *testing.T) {
	s := replay(t)
	b, err := encodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.img, s.img) || !reflect.DeepEqual(r.regs, s.regs) || r.nextProducerID != s.nextProducerID {
		t.Fatalf("restored state differs:\n%+v\n%+v", r.img, s.img)
	}
	again, _ := encodeSnapshot(r)
	if !bytes.Equal(again, b) {
		t.Fatal("snapshot of the restored state differs")
	}
	// The restored state keeps applying like the original.
	next := &createTopicRecord{Name: "z", ID: id(50), Partitions: []partitionAssignment{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}}}
	s1, err1 := s.apply(100, next)
	s2, err2 := r.apply(100, next)
	e1, _ := encodeSnapshot(s1)
	e2, _ := encodeSnapshot(s2)
	if err1 != nil || err2 != nil || !bytes.Equal(e1, e2) {
		t.Fatalf("apply after restore: %v %v", err1, err2)
	}
	for name, bad := range map[string][]byte{"empty": nil, "format": {9, '{', '}'}, "json": {1, '{'}} {
		if _, err := decodeSnapshot(bytes.NewReader(bad)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestRecordCodec(t *testing.T) {
	for _, h := range history() {
		b, err := encodeRecord(h.rec)
		if err != nil {
			t.Fatal(err)
		}
		ver := byte(1)
		if vr, ok := h.rec.(versionedRecord); ok {
			ver = vr.payloadVersion()
		}
		if b[0] != byte(h.rec.recordType()) || b[1] != ver {
			t.Errorf("%T: header % x", h.rec, b[:2])
		}
		got, err := decodeRecord(b)
		if err != nil || !reflect.DeepEqual(got, h.rec) {
			t.Errorf("%T: round trip %+v, %v", h.rec, got, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":        nil,
		"short":        {1},
		"type":         {200, 1, '{', '}'},
		"version":      {1, 2, '{', '}'},
		"version zero": {1, 0, '{', '}'},
	} {
		if _, err := decodeRecord(b); !errors.Is(err, ErrUnknownRecord) && !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := decodeRecord([]byte{5, 1, '{', '"', 'i', 'd', '"', ':', '"', 'x', '"', '}'}); !errors.Is(err, ErrBadRecord) {
		t.Errorf("bad uuid: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5})
	for _, h := range history()[:3] {
		b, _ := encodeRecord(h.rec)
		f.Add(b)
	}
	pids, _ := encodeRecord(&producerIDsRecord{BrokerID: 1, Count: 1000})
	f.Add(pids)
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(b)
		if err != nil {
			return
		}
		// Whatever decodes must apply without panicking.
		_, _ = replayOnce(rec)
	})
}

func replayOnce(rec record) (*state, error) { return emptyState().apply(1, rec) }

func FuzzDecodeSnapshot(f *testing.F) {
	empty, _ := encodeSnapshot(emptyState())
	f.Add([]byte{})
	f.Add([]byte{snapshotFormatV1})
	f.Add(empty)
	f.Add(append(append([]byte{}, empty...), empty...))
	withIDs, _ := encodeSnapshot(&state{img: emptyState().img, regs: map[int32]brokerReg{}, nextProducerID: 7})
	f.Add(withIDs)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSnapshot(bytes.NewReader(b))
		if err != nil {
			return
		}
		// A decoded state encodes, and applies entries without panicking.
		if _, err := encodeSnapshot(s); err != nil {
			t.Fatal(err)
		}
		for _, h := range history() {
			s, _ = s.apply(s.img.Version+1, h.rec)
		}
	})
}
