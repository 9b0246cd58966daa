package assignor

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/sluicehq/sluice/plugins/assignor/proto"
)

func tid(b byte) TopicID {
	var id TopicID
	for i := range id {
		id[i] = b + byte(i)
	}
	return id
}

// wire marshals and unmarshals m, as the gRPC transport does.
func wire[M proto.Message](t *testing.T, m M, into M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
	return into
}

func TestInputRoundTrip(t *testing.T) {
	a, b, c := tid(1), tid(100), tid(200)
	cases := map[string]Input{
		"zero":      {},
		"no topics": {Members: []Member{{ID: "m1"}}},
		"full": {
			Members: []Member{
				{ID: "m2", InstanceID: "i2", Rack: "r2", Topics: []string{"b", "a", "a"},
					Current: map[TopicID][]int32{a: {2, 0}, b: nil, tid(9): {7}}},
				{ID: "m1", Topics: []string{"zz-missing"}},
				{ID: "", Rack: "r1"}, // invalid for an assignor, but carried as is
			},
			Topics: map[TopicID]Topic{
				a: {ID: a, Name: "a", Partitions: 3,
					PartitionRacks:      [][]string{{"r1", "r2"}, nil, {"r3"}},
					PartitionEndOffsets: []int64{0, 10, 1 << 40},
					PartitionLag:        []int64{-1, 0, 5}},
				b: {ID: b, Name: "b", Partitions: 0},
				c: {ID: c, Name: "c", Partitions: -1, PartitionLag: []int64{1}}, // inconsistent: carried as is
			},
		},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			req := wire(t, InputToProto(in), &pb.AssignRequest{})
			got, err := InputFromProto(req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, in) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, in)
			}
		})
	}
}

func TestInputEmptyIsNil(t *testing.T) {
	a := tid(1)
	in := Input{
		Members: []Member{{ID: "m", Topics: []string{}, Current: map[TopicID][]int32{}}},
		Topics:  map[TopicID]Topic{a: {ID: a, Name: "a", PartitionRacks: [][]string{}, PartitionLag: []int64{}}},
	}
	want := Input{
		Members: []Member{{ID: "m"}},
		Topics:  map[TopicID]Topic{a: {ID: a, Name: "a"}},
	}
	got, err := InputFromProto(wire(t, InputToProto(in), &pb.AssignRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	if got, err := InputFromProto(nil); err != nil || !reflect.DeepEqual(got, Input{}) {
		t.Fatalf("nil request: %#v, %v", got, err)
	}
}

func TestAssignmentRoundTrip(t *testing.T) {
	a, b := tid(1), tid(2)
	cases := map[string]Assignment{
		"empty":        {},
		"member empty": {"m1": {}},
		"full": {
			"m1": {a: {0, 1, 2}, b: {5}},
			"m2": {},
			"m3": {b: nil, a: {9, 3}}, // a topic listed without partitions; unsorted: carried as is
		},
	}
	for name, out := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := AssignmentFromProto(wire(t, AssignmentToProto(out), &pb.AssignResponse{}))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, out) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, out)
			}
		})
	}
	// nil becomes empty, and members with a nil map get an empty one.
	got, err := AssignmentFromProto(AssignmentToProto(Assignment{"m": nil}))
	if err != nil || !reflect.DeepEqual(got, Assignment{"m": {}}) {
		t.Fatalf("nil member map: %#v, %v", got, err)
	}
	got, err = AssignmentFromProto(nil)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("nil response: %#v, %v", got, err)
	}
}

func TestMalformedWire(t *testing.T) {
	good := tid(1)
	reqs := map[string]*pb.AssignRequest{
		"short topic id": {Topics: []*pb.Topic{{Id: good[:15], Name: "a"}}},
		"long topic id":  {Topics: []*pb.Topic{{Id: append(good[:], 0), Name: "a"}}},
		"no topic id":    {Topics: []*pb.Topic{{Name: "a"}}},
		"duplicate topic": {Topics: []*pb.Topic{
			{Id: good[:], Name: "a"}, {Id: good[:], Name: "b"}}},
		"bad current id": {Members: []*pb.Member{{Id: "m",
			Current: []*pb.TopicPartitions{{TopicId: []byte{1, 2, 3}}}}}},
		"nil current entry": {Members: []*pb.Member{{Id: "m",
			Current: []*pb.TopicPartitions{nil}}}},
		"duplicate current": {Members: []*pb.Member{{Id: "m",
			Current: []*pb.TopicPartitions{{TopicId: good[:]}, {TopicId: good[:]}}}}},
	}
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) {
			if in, err := InputFromProto(req); err == nil {
				t.Fatalf("no error; got %#v", in)
			}
		})
	}
	// Nil entries in repeated fields (possible in-process only) do not panic.
	if _, err := InputFromProto(&pb.AssignRequest{Members: []*pb.Member{nil}, Topics: []*pb.Topic{{Id: good[:]}}}); err != nil {
		t.Fatalf("nil member: %v", err)
	}
	resps := map[string]*pb.AssignResponse{
		"short topic id": {Members: []*pb.MemberAssignment{{MemberId: "m",
			Topics: []*pb.TopicPartitions{{TopicId: good[:8], Partitions: []int32{0}}}}}},
		"duplicate member": {Members: []*pb.MemberAssignment{{MemberId: "m"}, {MemberId: "m"}}},
		"duplicate topic": {Members: []*pb.MemberAssignment{{MemberId: "m",
			Topics: []*pb.TopicPartitions{{TopicId: good[:]}, {TopicId: good[:]}}}}},
	}
	for name, resp := range resps {
		t.Run("response "+name, func(t *testing.T) {
			out, err := AssignmentFromProto(resp)
			if err == nil {
				t.Fatalf("no error; got %#v", out)
			}
			if !strings.Contains(err.Error(), "m") {
				t.Fatalf("error does not name the member: %v", err)
			}
		})
	}
}
