package groups

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/modules/groups/classic"
)

func consumerMetadata(version int16, topics []string, owned map[string][]int32) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = version, topics
	for _, t := range slices.Sorted(maps.Keys(owned)) {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = t, owned[t]
		md.OwnedPartitions = append(md.OwnedPartitions, op)
	}
	return md.AppendTo(nil)
}

// The coordinator's input for a classic generation: subscriptions and owned partitions
// decoded; an unknown topic and undecodable metadata tolerated; a previous assignment
// as Current when nothing is owned; and a partition a cooperative member still owns
// withheld from anyone else, not from its owner, while an eager member's stale owned
// list withholds nothing.
func TestClassicInputAndWithholding(t *testing.T) {
	id := assignor.TopicID{1}
	im := &kernel.Image{}
	im.PutTopic(&kernel.TopicImage{Name: "t", ID: id, Partitions: make([]kernel.PartitionImage, 4)})
	view := imageTopics{im: im}
	prev := kmsg.NewConsumerMemberAssignment()
	pt := kmsg.NewConsumerMemberAssignmentTopic()
	pt.Topic, pt.Partitions = "t", []int32{3}
	prev.Topics = append(prev.Topics, pt)
	members := []classic.ServerMember{
		{ID: "a", Protocol: "cooperative-sticky", Metadata: consumerMetadata(1, []string{"t", "missing"}, map[string][]int32{"t": {0, 1, 2}})},
		{ID: "b", Protocol: "roundrobin", Metadata: consumerMetadata(1, []string{"t"}, nil), Assignment: prev.AppendTo(nil)},
		{ID: "c", Protocol: "range", Metadata: consumerMetadata(1, []string{"t"}, map[string][]int32{"t": {3}})},
		{ID: "d", Protocol: "range", Metadata: []byte{0xff}},
	}
	in, owned := classicInput(view, "g", members, assignor.Uniform{})
	if len(in.Topics) != 1 || in.Topics[id].Partitions != 4 {
		t.Fatalf("topics %+v", in.Topics)
	}
	if !slices.Equal(in.Members[0].Topics, []string{"t"}) || !slices.Equal(in.Members[0].Current[id], []int32{0, 1, 2}) {
		t.Errorf("a: %+v", in.Members[0])
	}
	if !slices.Equal(in.Members[1].Current[id], []int32{3}) {
		t.Errorf("b's previous assignment is not its Current: %+v", in.Members[1])
	}
	if len(in.Members[3].Topics) != 0 {
		t.Errorf("d (bad metadata) subscribes to %v", in.Members[3].Topics)
	}
	if len(owned[id]) != 3 || owned[id][3] != "" {
		t.Errorf("owned %v: want a's 0-2 only (c is eager)", owned)
	}
	out, err := runAssignor(context.Background(), assignor.Uniform{}, in)
	if err != nil {
		t.Fatal(err)
	}
	out["b"][id] = append(out["b"][id], 0) // as if the assignor moved 0 away from a
	before := 0
	for _, tps := range out {
		before += len(tps[id])
	}
	n := withholdOwned(out, owned)
	if n < 1 || slices.Contains(out["b"][id], 0) {
		t.Errorf("withheld %d, b still has %v", n, out["b"][id])
	}
	after := 0
	for _, tps := range out {
		after += len(tps[id])
	}
	if before-after != n {
		t.Errorf("removed %d, reported %d", before-after, n)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(encodeClassicAssignment(view, map[assignor.TopicID][]int32{id: {2, 0}}, members[0].Metadata)); err != nil ||
		a.Version != 1 || len(a.Topics) != 1 || a.Topics[0].Topic != "t" || !slices.Equal(a.Topics[0].Partitions, []int32{0, 2}) {
		t.Errorf("encoded assignment %+v (err %v)", a, err)
	}
}
