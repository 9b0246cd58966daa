package assignor

import (
	"fmt"
	"slices"

	pb "github.com/sluicehq/sluice/plugins/assignor/proto"
)

// The conversions between the Go types and the wire messages. Going to the
// wire never fails; coming from it checks what the Go types cannot represent
// (topic ids that are not 16 bytes, a topic or member listed twice) and
// returns an error rather than guessing. Everything else, such as partition
// counts that disagree with the rack lists, is carried as is: the assignor
// (Input) or the host's Check (Assignment) judges it.
//
// Empty and nil are the same on the wire: a nil slice or map comes back nil
// (Topics, Member.Topics, Member.Current, the Topic lists), except that every
// member of an Assignment comes back with a non-nil map and a topic listed
// with no partitions comes back as a key with a nil slice.

// InputToProto converts in to its wire form. Members keep their order;
// topics and Current entries are sorted by topic id.
func InputToProto(in Input) *pb.AssignRequest {
	req := &pb.AssignRequest{
		Members: make([]*pb.Member, len(in.Members)),
		Topics:  make([]*pb.Topic, 0, len(in.Topics)),
	}
	for i, m := range in.Members {
		req.Members[i] = &pb.Member{
			Id:         m.ID,
			InstanceId: m.InstanceID,
			Rack:       m.Rack,
			Topics:     m.Topics,
			Current:    topicPartitionsToProto(m.Current),
		}
	}
	for _, id := range sortedIDs(in.Topics) {
		t := in.Topics[id]
		pt := &pb.Topic{
			Id:                  idBytes(t.ID),
			Name:                t.Name,
			Partitions:          t.Partitions,
			PartitionEndOffsets: t.PartitionEndOffsets,
			PartitionLag:        t.PartitionLag,
		}
		if len(t.PartitionRacks) > 0 {
			pt.PartitionRacks = make([]*pb.Racks, len(t.PartitionRacks))
			for p, racks := range t.PartitionRacks {
				pt.PartitionRacks[p] = &pb.Racks{Racks: racks}
			}
		}
		req.Topics = append(req.Topics, pt)
	}
	return req
}

// InputFromProto converts a wire request to an Input. A topic id that is not
// 16 bytes, or a topic (or a member's Current topic) listed twice, is an
// error. The topics map is keyed by each topic's id.
func InputFromProto(req *pb.AssignRequest) (Input, error) {
	var in Input
	if req == nil {
		return in, nil
	}
	if len(req.GetMembers()) > 0 {
		in.Members = make([]Member, len(req.GetMembers()))
	}
	for i, pm := range req.GetMembers() {
		cur, err := topicPartitionsFromProto(pm.GetCurrent())
		if err != nil {
			return Input{}, fmt.Errorf("member %q: current: %w", pm.GetId(), err)
		}
		in.Members[i] = Member{
			ID:         pm.GetId(),
			InstanceID: pm.GetInstanceId(),
			Rack:       pm.GetRack(),
			Topics:     nilIfEmpty(pm.GetTopics()),
			Current:    cur,
		}
	}
	if len(req.GetTopics()) > 0 {
		in.Topics = make(map[TopicID]Topic, len(req.GetTopics()))
	}
	for _, pt := range req.GetTopics() {
		id, err := parseID(pt.GetId())
		if err != nil {
			return Input{}, fmt.Errorf("topic %q: %w", pt.GetName(), err)
		}
		if _, dup := in.Topics[id]; dup {
			return Input{}, fmt.Errorf("topic %v listed twice", id)
		}
		t := Topic{
			ID:                  id,
			Name:                pt.GetName(),
			Partitions:          pt.GetPartitions(),
			PartitionEndOffsets: nilIfEmpty(pt.GetPartitionEndOffsets()),
			PartitionLag:        nilIfEmpty(pt.GetPartitionLag()),
		}
		if len(pt.GetPartitionRacks()) > 0 {
			t.PartitionRacks = make([][]string, len(pt.GetPartitionRacks()))
			for p, r := range pt.GetPartitionRacks() {
				t.PartitionRacks[p] = nilIfEmpty(r.GetRacks())
			}
		}
		in.Topics[id] = t
	}
	return in, nil
}

// AssignmentToProto converts a to its wire form, members sorted by id and
// topics by topic id.
func AssignmentToProto(a Assignment) *pb.AssignResponse {
	ids := make([]string, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	resp := &pb.AssignResponse{Members: make([]*pb.MemberAssignment, len(ids))}
	for i, id := range ids {
		resp.Members[i] = &pb.MemberAssignment{MemberId: id, Topics: topicPartitionsToProto(a[id])}
	}
	return resp
}

// AssignmentFromProto converts a wire response to an Assignment. A topic id
// that is not 16 bytes, a member listed twice or a topic listed twice for one
// member is an error. The result is not checked against any Input: that is
// the host's job (Check).
func AssignmentFromProto(resp *pb.AssignResponse) (Assignment, error) {
	out := make(Assignment, len(resp.GetMembers()))
	for _, pm := range resp.GetMembers() {
		if _, dup := out[pm.GetMemberId()]; dup {
			return nil, fmt.Errorf("member %q listed twice", pm.GetMemberId())
		}
		tps, err := topicPartitionsFromProto(pm.GetTopics())
		if err != nil {
			return nil, fmt.Errorf("member %q: %w", pm.GetMemberId(), err)
		}
		if tps == nil {
			tps = map[TopicID][]int32{}
		}
		out[pm.GetMemberId()] = tps
	}
	return out, nil
}

func topicPartitionsToProto(m map[TopicID][]int32) []*pb.TopicPartitions {
	if len(m) == 0 {
		return nil
	}
	out := make([]*pb.TopicPartitions, 0, len(m))
	for _, id := range sortedIDs(m) {
		out = append(out, &pb.TopicPartitions{TopicId: idBytes(id), Partitions: m[id]})
	}
	return out
}

func topicPartitionsFromProto(tps []*pb.TopicPartitions) (map[TopicID][]int32, error) {
	if len(tps) == 0 {
		return nil, nil
	}
	out := make(map[TopicID][]int32, len(tps))
	for _, tp := range tps {
		id, err := parseID(tp.GetTopicId())
		if err != nil {
			return nil, err
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("topic %v listed twice", id)
		}
		out[id] = nilIfEmpty(tp.GetPartitions())
	}
	return out, nil
}

func sortedIDs[V any](m map[TopicID]V) []TopicID {
	ids := make([]TopicID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b TopicID) int { return slices.Compare(a[:], b[:]) })
	return ids
}

func idBytes(id TopicID) []byte { return slices.Clone(id[:]) }

func parseID(b []byte) (TopicID, error) {
	var id TopicID
	if len(b) != len(id) {
		return id, fmt.Errorf("topic id is %d bytes, want %d", len(b), len(id))
	}
	copy(id[:], b)
	return id, nil
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
