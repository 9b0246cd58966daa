package groups

import (
	"log/slog"
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
		Topics:     map[string]*kernel.TopicImage{"t": topic},
		TopicsByID: map[[16]byte]*kernel.TopicImage{id: topic},
		Extensions: map[string]map[string][]byte{GroupConfigsNamespace: {
			"g":    []byte(`{"sluice.consumer.assignor":"range","other":"x"}`),
			"bad":  []byte(`{"sluice.consumer.assignor":"sticky"}`),
			"junk": []byte(`not json`),
		}},
	}
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
