package image

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

// history is a log exercising every record type, with the result each entry must have.
func history() []struct {
	rec     Record
	wantErr error
} {
	assign := func(rs ...int32) PartitionAssignment {
		return PartitionAssignment{Replicas: rs, Leader: rs[0], ISR: rs}
	}
	return []struct {
		rec     Record
		wantErr error
	}{
		{&ClusterIDRecord{ClusterID: id(1).String()}, nil},
		{&ClusterIDRecord{ClusterID: id(2).String()}, ErrClusterIDSet},
		{&LeaderChangeRecord{NodeID: 1, Term: 2}, nil},
		{&RegisterBrokerRecord{NodeID: 1, Incarnation: id(3), Endpoints: []Endpoint{{"PLAINTEXT", "h1", 9092}}}, nil},
		{&RegisterBrokerRecord{NodeID: 2, Incarnation: id(4), Rack: "r2", Endpoints: []Endpoint{{"PLAINTEXT", "h2", 9092}}}, nil},
		{&FenceBrokerRecord{NodeID: 2}, nil},
		{&UnfenceBrokerRecord{NodeID: 2, Epoch: 6}, nil},
		{&FenceBrokerRecord{NodeID: 2, Epoch: 4}, ErrStale},
		{&FenceBrokerRecord{NodeID: 9}, ErrUnknownBroker},
		{&CreateTopicRecord{Name: "a", ID: id(10), Partitions: []PartitionAssignment{assign(1, 2), assign(2, 1)},
			Configs: map[string]string{"retention.ms": "1000"}}, nil},
		{&CreateTopicRecord{Name: "a", ID: id(11), Partitions: []PartitionAssignment{assign(1)}}, ErrTopicExists},
		{&CreateTopicRecord{Name: "b", ID: id(10), Partitions: []PartitionAssignment{assign(1)}}, ErrTopicExists},
		{&CreateTopicRecord{Name: "c", ID: id(12)}, ErrInvalidEntry},
		{&CreateTopicRecord{Name: "__consumer_offsets", ID: id(13), Partitions: []PartitionAssignment{assign(1)}}, nil},
		{&CreatePartitionsRecord{Topic: "a", ID: id(10), From: 2, Partitions: []PartitionAssignment{assign(1, 2)}}, nil},
		{&CreatePartitionsRecord{Topic: "a", ID: id(10), From: 2, Partitions: []PartitionAssignment{assign(1, 2)}}, ErrStale},
		{&CreatePartitionsRecord{Topic: "a", ID: id(99), From: 3, Partitions: []PartitionAssignment{assign(1, 2)}}, ErrUnknownTopic},
		{&AlterTopicConfigsRecord{Topic: "a", ID: id(10), ConfigChange: ConfigChange{Set: map[string]string{"segment.ms": "5"}}}, nil},
		{&AlterTopicConfigsRecord{Topic: "a", ID: id(10), ConfigChange: ConfigChange{Delete: []string{"retention.ms"}}}, nil},
		{&AlterBrokerConfigsRecord{Node: "", ConfigChange: ConfigChange{Set: map[string]string{"num.partitions": "3"}}}, nil},
		{&AlterBrokerConfigsRecord{Node: "1", ConfigChange: ConfigChange{Set: map[string]string{"log.retention.ms": "9"}}}, nil},
		{&AlterBrokerConfigsRecord{Node: "1", ConfigChange: ConfigChange{Replace: true}}, nil},
		{&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: 0, Leader: i32(2), ISR: []int32{2}}, nil},
		{&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: 0, ISR: []int32{2, 1}}, ErrStale},
		{&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: -1, ISR: []int32{2, 1}}, nil},
		{&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 7, PartitionEpoch: -1}, ErrInvalidEntry},
		{&DeleteTopicRecord{Name: "__consumer_offsets", ID: id(99)}, ErrUnknownTopic},
		{&DeleteTopicRecord{Name: "__consumer_offsets", ID: id(13)}, nil},
		{&LeaderChangeRecord{NodeID: 2, Term: 3}, nil},
		{&ExtensionRecord{Namespace: "t", Key: "a", Value: []byte("1")}, nil},
		{&ExtensionRecord{Namespace: "t", Key: "b", Value: []byte{0, 0xff}}, nil},
		{&ExtensionRecord{Namespace: "u", Key: "empty"}, nil}, // an empty value
		{&ExtensionRecord{Namespace: "t", Key: "a", Delete: true}, nil},
		{&ExtensionRecord{Namespace: "v", Key: "absent", Delete: true}, nil},
		{&ExtensionRecord{Namespace: "", Key: "k", Value: []byte("1")}, ErrInvalidEntry},
		{&ExtensionRecord{Namespace: "t", Key: string(make([]byte, 256)), Value: []byte("1")}, ErrInvalidEntry},
		{&ProducerIDsRecord{BrokerID: 1, Count: 10}, nil},
		{&ProducerIDsRecord{BrokerID: 1, Count: 0}, ErrInvalidEntry},
		{&ProducerIDsRecord{BrokerID: 2, Count: 5}, nil},
		// Version 2 PartitionChange: a reassignment of a-1 from [2 1] to [1] starts,
		// and a leader's ISR change is checked against its epochs.
		{&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 1, PartitionEpoch: 0, Replicas: []int32{1, 2},
			PartitionChangeV2: PartitionChangeV2{Validate: true, Reassignment: &ReassignmentRecord{Removing: []int32{2}}}}, nil},
		{&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 1, PartitionEpoch: 1, ISR: []int32{2},
			PartitionChangeV2: PartitionChangeV2{ExpectLeader: i32(2), ExpectLeaderEpoch: i32(1), Validate: true}}, ErrFencedLeaderEpoch},
		{&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 1, PartitionEpoch: 1, ISR: []int32{1, 2},
			PartitionChangeV2: PartitionChangeV2{ExpectLeader: i32(2), ExpectLeaderEpoch: i32(0), Validate: true}}, nil},
	}
}

// replay applies history through the record codec, as the FSM does.
func replay(t *testing.T) *State {
	t.Helper()
	s := EmptyState()
	for i, h := range history() {
		b, err := EncodeRecord(h.rec)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("entry %d: decode: %v", i, err)
		}
		prev := s
		prevImg := *s.Image
		s, err = s.Apply(uint64(i+2), rec)
		if !errors.Is(err, h.wantErr) || (err != nil) != (h.wantErr != nil) {
			t.Fatalf("entry %d %T: err %v, want %v", i, h.rec, err, h.wantErr)
		}
		if s.Image.Version != uint64(i+2) {
			t.Fatalf("entry %d: version %d", i, s.Image.Version)
		}
		if !reflect.DeepEqual(*prev.Image, prevImg) {
			t.Fatalf("entry %d modified the previous image", i)
		}
	}
	return s
}

func TestApplyHistory(t *testing.T) {
	s := replay(t)
	im := s.Image
	if im.ClusterID != id(1).String() || im.ControllerID != 2 {
		t.Errorf("cluster %q controller %d", im.ClusterID, im.ControllerID)
	}
	if b := im.Brokers[2]; b == nil || b.Fenced || b.Rack != "r2" || s.Regs[2].Epoch != 6 {
		t.Errorf("broker 2: %+v %+v", b, s.Regs[2])
	}
	a := im.Topic("a")
	if a == nil || len(a.Partitions) != 3 || im.TopicByID(id(10)) != a {
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
	if im.Topic("__consumer_offsets") != nil || im.NumTopics() != 1 {
		t.Errorf("deleted topic still present")
	}
	if !reflect.DeepEqual(im.BrokerConfigs, map[string]map[string]string{"": {"num.partitions": "3"}}) {
		t.Errorf("broker configs %v", im.BrokerConfigs)
	}
	wantExt := map[string]map[string][]byte{"t": {"b": {0, 0xff}}, "u": {"empty": {}}}
	if !reflect.DeepEqual(im.Extensions, wantExt) {
		t.Errorf("extensions %v", im.Extensions)
	}
	if s.NextProducerID != 15 {
		t.Errorf("next producer id %d", s.NextProducerID)
	}
}

func TestApplyDeterministic(t *testing.T) {
	a, err := EncodeSnapshot(replay(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeSnapshot(replay(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("two replays differ:\n%s\n%s", a, b)
	}
}

func TestSnapshotRestore(t *testing.T) {
	s := replay(t)
	b, err := EncodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// Topic maps hash with a seed per lineage: compare their contents, then the rest.
	topicsOf := func(im *kernel.Image) map[string]*kernel.TopicImage { return maps.Collect(im.Topics()) }
	rest := func(im *kernel.Image) []any {
		return []any{im.Version, im.ClusterID, im.ControllerID, im.Brokers, im.BrokerConfigs, im.Extensions}
	}
	if !reflect.DeepEqual(topicsOf(r.Image), topicsOf(s.Image)) || !reflect.DeepEqual(rest(r.Image), rest(s.Image)) || !reflect.DeepEqual(r.Regs, s.Regs) || r.NextProducerID != s.NextProducerID {
		t.Fatalf("restored state differs:\n%+v\n%+v", r.Image, s.Image)
	}
	again, _ := EncodeSnapshot(r)
	if !bytes.Equal(again, b) {
		t.Fatal("snapshot of the restored state differs")
	}
	// The restored state keeps applying like the original.
	next := &CreateTopicRecord{Name: "z", ID: id(50), Partitions: []PartitionAssignment{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}}}
	s1, err1 := s.Apply(100, next)
	s2, err2 := r.Apply(100, next)
	e1, _ := EncodeSnapshot(s1)
	e2, _ := EncodeSnapshot(s2)
	if err1 != nil || err2 != nil || !bytes.Equal(e1, e2) {
		t.Fatalf("apply after restore: %v %v", err1, err2)
	}
	for name, bad := range map[string][]byte{"empty": nil, "format": {9, '{', '}'}, "json": {1, '{'}} {
		if _, err := DecodeSnapshot(bytes.NewReader(bad)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestRecordCodec(t *testing.T) {
	for _, h := range history() {
		b, err := EncodeRecord(h.rec)
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
		got, err := DecodeRecord(b)
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
		if _, err := DecodeRecord(b); !errors.Is(err, ErrUnknownRecord) && !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeRecord([]byte{5, 1, '{', '"', 'i', 'd', '"', ':', '"', 'x', '"', '}'}); !errors.Is(err, ErrBadRecord) {
		t.Errorf("bad uuid: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5})
	for _, h := range history()[:3] {
		b, _ := EncodeRecord(h.rec)
		f.Add(b)
	}
	pids, _ := EncodeRecord(&ProducerIDsRecord{BrokerID: 1, Count: 1000})
	f.Add(pids)
	batch, _ := EncodeRecord(&BatchRecord{Records: []Record{history()[0].rec, &ProducerIDsRecord{BrokerID: 1, Count: 5}}})
	f.Add(batch)
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := DecodeRecord(b)
		if err != nil {
			return
		}
		// Whatever decodes must apply without panicking.
		_, _ = replayOnce(rec)
	})
}

func replayOnce(rec Record) (*State, error) { return EmptyState().Apply(1, rec) }

func FuzzDecodeSnapshot(f *testing.F) {
	empty, _ := EncodeSnapshot(EmptyState())
	f.Add([]byte{})
	f.Add([]byte{SnapshotFormatV1})
	f.Add(empty)
	f.Add(append(append([]byte{}, empty...), empty...))
	withIDs, _ := EncodeSnapshot(&State{Image: EmptyState().Image, Regs: map[int32]BrokerReg{}, NextProducerID: 7})
	f.Add(withIDs)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(bytes.NewReader(b))
		if err != nil {
			return
		}
		// A decoded state encodes, and applies entries without panicking.
		if _, err := EncodeSnapshot(s); err != nil {
			t.Fatal(err)
		}
		for _, h := range history() {
			s, _ = s.Apply(s.Image.Version+1, h.rec)
		}
	})
}

// TestApplyEntry: an entry that does not decode keeps the image but for its version,
// and an accepted ProducerIDs entry reports where its block starts.
func TestApplyEntry(t *testing.T) {
	s := EmptyState()
	next, rec, res := s.ApplyEntry(1, []byte{0xff, 1, '{', '}'})
	if rec != nil || !errors.Is(res.Err, ErrUnknownRecord) || next.Image.Version != 1 || res.Index != 1 {
		t.Fatalf("unreadable entry: %v %+v version %d", rec, res, next.Image.Version)
	}
	for i, want := range []int64{0, 5} {
		data, err := EncodeRecord(&ProducerIDsRecord{BrokerID: 1, Count: 5})
		if err != nil {
			t.Fatal(err)
		}
		next, rec, res = next.ApplyEntry(uint64(2+i), data)
		if rec == nil || res.Err != nil || res.FirstProducerID != want {
			t.Fatalf("block %d: %v %+v, want first %d", i, rec, res, want)
		}
	}
	data, _ := EncodeRecord(&ProducerIDsRecord{BrokerID: 1, Count: 0})
	if _, _, res = next.ApplyEntry(4, data); !errors.Is(res.Err, ErrInvalidEntry) || res.FirstProducerID != 0 {
		t.Fatalf("rejected block: %+v", res)
	}
}

// sameAsSingleEntries checks that got, the state a batch of recs at index left on s,
// is what the records give applied one entry at a time at that index.
func sameAsSingleEntries(t *testing.T, s *State, index uint64, recs []Record, got *State) {
	t.Helper()
	one := s
	for _, r := range recs {
		one, _ = one.Apply(index, r)
	}
	a, _ := EncodeSnapshot(got)
	b, _ := EncodeSnapshot(one)
	if !bytes.Equal(a, b) {
		t.Fatalf("batch and single entries differ:\n%s\n%s", a, b)
	}
}

// TestApplyBatch: a batch's records apply in order to one new state, each with its own
// result, as the same records would one entry at a time at the batch's index; the
// codec refuses nested, truncated and oversized batches.
func TestApplyBatch(t *testing.T) {
	assign := PartitionAssignment{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}
	recs := []Record{
		&RegisterBrokerRecord{NodeID: 1, Incarnation: id(3), Endpoints: []Endpoint{{"PLAINTEXT", "h1", 9092}}},
		&CreateTopicRecord{Name: "a", ID: id(10), Partitions: []PartitionAssignment{assign}},
		&CreateTopicRecord{Name: "b", ID: id(11), Partitions: []PartitionAssignment{assign}},
		&CreateTopicRecord{Name: "a", ID: id(12), Partitions: []PartitionAssignment{assign}}, // exists
		&ProducerIDsRecord{BrokerID: 1, Count: 5},
		&ProducerIDsRecord{BrokerID: 1, Count: 5},
		&CreatePartitionsRecord{Topic: "a", ID: id(10), From: 1, Partitions: []PartitionAssignment{assign}},
		&DeleteTopicRecord{Name: "b", ID: id(11)},
	}
	wantErrs := []error{nil, nil, nil, ErrTopicExists, nil, nil, nil, nil}
	data, err := EncodeRecord(&BatchRecord{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	s := EmptyState()
	before := *s.Image
	next, rec, res := s.ApplyEntry(7, data)
	if _, ok := rec.(*BatchRecord); !ok || res.Err != nil || res.Index != 7 || len(res.Batch) != len(recs) {
		t.Fatalf("batch: %T %+v", rec, res)
	}
	for i, r := range res.Batch {
		if !errors.Is(r.Err, wantErrs[i]) || (r.Err != nil) != (wantErrs[i] != nil) || r.Index != 7 {
			t.Errorf("record %d %T: %+v, want err %v", i, recs[i], r, wantErrs[i])
		}
	}
	if res.Batch[4].FirstProducerID != 0 || res.Batch[5].FirstProducerID != 5 {
		t.Errorf("producer id blocks at %d and %d, want 0 and 5", res.Batch[4].FirstProducerID, res.Batch[5].FirstProducerID)
	}
	if !reflect.DeepEqual(*s.Image, before) {
		t.Error("the batch modified the previous image")
	}
	im := next.Image
	if im.Version != 7 || im.NumTopics() != 1 || im.Topic("a") == nil || len(im.Topic("a").Partitions) != 2 || next.NextProducerID != 10 {
		t.Fatalf("after the batch: version %d, %d topics, a = %+v, next producer id %d", im.Version, im.NumTopics(), im.Topic("a"), next.NextProducerID)
	}
	// The same records one at a time, at the same index, give the same state.
	sameAsSingleEntries(t, s, 7, recs, next)
	if got, err := DecodeRecord(data); err != nil || !reflect.DeepEqual(got, &BatchRecord{Records: recs}) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}

	if _, err := EncodeRecord(&BatchRecord{Records: []Record{&BatchRecord{}}}); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("nested batch encoded: %v", err)
	}
	inner := EncodeBatch(nil)
	unknown := EncodeBatch([][]byte{{0xee, 1, '{', '}'}})
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"nested":      {EncodeBatch([][]byte{inner}), ErrBadRecord},
		"truncated":   {data[:len(data)-3], ErrBadRecord},
		"trailing":    {append(append([]byte{}, data...), 0), ErrBadRecord},
		"no count":    {[]byte{byte(recBatch), 1, 0}, ErrBadRecord},
		"huge count":  {[]byte{byte(recBatch), 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2, 6, 1}, ErrBadRecord},
		"long entry":  {[]byte{byte(recBatch), 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff, 6, 1}, ErrBadRecord},
		"unknown rec": {unknown, ErrUnknownRecord},
	} {
		if _, err := DecodeRecord(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// An unreadable batch keeps the image, as any unreadable entry.
	if n2, rec, res := next.ApplyEntry(8, unknown); rec != nil || !errors.Is(res.Err, ErrUnknownRecord) || n2.Image.NumTopics() != 1 || n2.Image.Version != 8 {
		t.Fatalf("unreadable batch: %v %+v", rec, res)
	}
	// An empty batch is a valid entry that changes nothing but the version.
	if n2, rec, res := next.ApplyEntry(9, EncodeBatch(nil)); rec == nil || res.Err != nil || len(res.Batch) != 0 || n2.Image.Version != 9 {
		t.Fatalf("empty batch: %v %+v", rec, res)
	}
}

// TestApplyBatchPartitionChanges: a batch writes a topic's partitions in place once it
// has its own copy; the image before the batch keeps its partitions, rejected changes
// leave no trace, and the result is what single entries give.
func TestApplyBatchPartitionChanges(t *testing.T) {
	assign := func(rs ...int32) PartitionAssignment {
		return PartitionAssignment{Replicas: rs, Leader: rs[0], ISR: rs}
	}
	s := EmptyState()
	var err error
	for i, rec := range []Record{
		&RegisterBrokerRecord{NodeID: 1, Incarnation: id(3), Endpoints: []Endpoint{{"PLAINTEXT", "h1", 9092}}},
		&RegisterBrokerRecord{NodeID: 2, Incarnation: id(4), Endpoints: []Endpoint{{"PLAINTEXT", "h2", 9092}}},
		&CreateTopicRecord{Name: "a", ID: id(10), Partitions: []PartitionAssignment{assign(1, 2), assign(2, 1), assign(1, 2), assign(2, 1)}},
	} {
		if s, err = s.Apply(uint64(i+1), rec); err != nil {
			t.Fatal(err)
		}
	}
	before := slices.Clone(s.Image.Topic("a").Partitions)
	recs := []Record{
		&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: 0, Leader: i32(2), ISR: []int32{2}},
		&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 1, PartitionEpoch: 0, ISR: []int32{2}},
		&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: 0, ISR: []int32{1}}, // stale
		&AlterTopicConfigsRecord{Topic: "a", ID: id(10), ConfigChange: ConfigChange{Set: map[string]string{"segment.ms": "5"}}},
		&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 2, PartitionEpoch: 0, Leader: i32(2), ISR: []int32{2, 1}, PartitionChangeV2: PartitionChangeV2{Validate: true}},
		&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 3, PartitionEpoch: 0, Leader: i32(9), ISR: []int32{9}, Replicas: []int32{9}, PartitionChangeV2: PartitionChangeV2{Validate: true}}, // unknown broker
		&PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 0, PartitionEpoch: 1, ISR: []int32{2, 1}},
	}
	wantErrs := []error{nil, nil, ErrStale, nil, nil, ErrUnknownBroker, nil}
	next, results := s.applyBatch(9, &BatchRecord{Records: recs})
	for i, r := range results {
		if !errors.Is(r.Err, wantErrs[i]) || (r.Err != nil) != (wantErrs[i] != nil) {
			t.Errorf("record %d: %v, want %v", i, r.Err, wantErrs[i])
		}
	}
	if next.owned != nil {
		t.Error("the batch's state still marks topics as its own")
	}
	if got := s.Image.Topic("a").Partitions; !reflect.DeepEqual(got, before) {
		t.Fatalf("the image before the batch changed:\n%+v\n%+v", got, before)
	}
	sameAsSingleEntries(t, s, 9, recs, next)
	p0 := next.Image.Topic("a").Partitions[0]
	if p0.Leader != 2 || p0.PartitionEpoch != 2 || !reflect.DeepEqual(p0.ISR, []int32{2, 1}) {
		t.Errorf("partition 0 = %+v", p0)
	}
	// A later entry copies again: the published batch's topic is never written.
	published := slices.Clone(next.Image.Topic("a").Partitions)
	after, err := next.Apply(10, &PartitionChangeRecord{Topic: "a", ID: id(10), Partition: 1, PartitionEpoch: -1, ISR: []int32{2, 1}})
	if err != nil || !reflect.DeepEqual(next.Image.Topic("a").Partitions, published) || len(after.Image.Topic("a").Partitions[1].ISR) != 2 {
		t.Fatalf("change after the batch: %v", err)
	}
}
