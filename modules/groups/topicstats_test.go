package groups

import (
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/modules/groups/consumer"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

type fakeOffsets map[kernel.TopicPartition][2]int64

func (f fakeOffsets) Offsets(tp kernel.TopicPartition) (int64, int64, bool) {
	o, ok := f[tp]
	return o[0], o[1], ok
}

func TestImageTopicsStatsAndGroupAssignor(t *testing.T) {
	st, err := offsets.Open(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Commit("g", "t", 1, offsets.Committed{Offset: 70}); err != nil {
		t.Fatal(err)
	}
	id := assignor.TopicID{7}
	topic := &kernel.TopicImage{Name: "t", ID: id, Partitions: make([]kernel.PartitionImage, 3)}
	im := &kernel.Image{
		Extensions: map[string]map[string][]byte{GroupConfigsNamespace: {
			"g":    []byte(`{"sluice.consumer.assignor":"range","other":"x"}`),
			"bad":  []byte(`{"sluice.consumer.assignor":"sticky"}`),
			"junk": []byte(`not json`),
		}},
	}
	im.PutTopic(topic)
	m := New()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	m.log = slog.New(slog.DiscardHandler)
	m.store = st
	m.poffs = fakeOffsets{
		{Topic: "t", Partition: 0}: {10, 100}, // nothing committed: hw - log start
		{Topic: "t", Partition: 1}: {0, 100},  // committed 70
		// partition 2 not led here
	}
	var v consumer.TopicView = imageTopics{im, m}
	ts, ok := v.(consumer.TopicStats)
	if !ok {
		t.Fatal("imageTopics is not a consumer.TopicStats")
	}
	ends, lag, ok := ts.PartitionStats("g", id, 3)
	if !ok || !slices.Equal(ends, []int64{100, 100, -1}) || !slices.Equal(lag, []int64{90, 30, -1}) {
		t.Fatalf("stats: ends %v lag %v ok %v", ends, lag, ok)
	}
	if _, _, ok := ts.PartitionStats("g", assignor.TopicID{9}, 3); ok {
		t.Fatal("stats of an unknown topic")
	}
	m.poffs = nil
	if _, _, ok := ts.PartitionStats("g", id, 3); ok {
		t.Fatal("stats without kernel.PartitionOffsets")
	}

	ga := v.(consumer.GroupAssignors)
	for group, want := range map[string]string{"g": "range", "bad": "", "junk": "", "none": ""} {
		if got := ga.GroupAssignor(group); got != want {
			t.Errorf("GroupAssignor(%q) = %q, want %q", group, got, want)
		}
	}
}

func TestImageTopicsPartitionRacks(t *testing.T) {
	id, bare := assignor.TopicID{7}, assignor.TopicID{8}
	topic := &kernel.TopicImage{Name: "t", ID: id, Partitions: []kernel.PartitionImage{
		{Partition: 0, Replicas: []int32{1, 2, 3}}, // r1, r2, no rack
		{Partition: 1, Replicas: []int32{3, 9}},    // no rack, unknown broker
		{Partition: 2, Replicas: []int32{2, 4}},    // r2 twice: listed once
	}}
	noRacks := &kernel.TopicImage{Name: "bare", ID: bare, Partitions: []kernel.PartitionImage{
		{Partition: 0, Replicas: []int32{3}},
	}}
	im := &kernel.Image{
		Brokers: map[int32]*kernel.BrokerImage{
			1: {ID: 1, Rack: "r1"}, 2: {ID: 2, Rack: "r2"}, 3: {ID: 3}, 4: {ID: 4, Rack: "r2"},
		},
	}
	im.PutTopic(topic)
	im.PutTopic(noRacks)
	var v consumer.TopicView = imageTopics{im, nil}
	tr, ok := v.(consumer.TopicRacks)
	if !ok {
		t.Fatal("imageTopics is not a consumer.TopicRacks")
	}
	racks, ok := tr.PartitionRacks(id, 3)
	if want := [][]string{{"r1", "r2"}, nil, {"r2"}}; !ok || !reflect.DeepEqual(racks, want) {
		t.Fatalf("racks %q ok %v, want %q", racks, ok, want)
	}
	for name, tc := range map[string]struct {
		id    assignor.TopicID
		parts int32
	}{"no replica has a rack": {bare, 1}, "unknown topic": {assignor.TopicID{9}, 3}, "partition count differs": {id, 4}} {
		if racks, ok := tr.PartitionRacks(tc.id, tc.parts); ok || racks != nil {
			t.Errorf("%s: racks %q ok %v", name, racks, ok)
		}
	}
}
