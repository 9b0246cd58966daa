package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/plugins/assignor"
	"github.com/sluicehq/sluice/plugins/assignor/assignortest"
)

func TestSuite(t *testing.T) { assignortest.Suite(t, RackAware{}) }

// racked returns topics whose partition p has replicas in rack-(p%racks) and
// rack-((p+1)%racks) when replicas is 2, only the first when 1.
func racked(racks, replicas int, namesAndPartitions ...any) map[assignor.TopicID]assignor.Topic {
	topics := assignortest.Topics(namesAndPartitions...)
	for id, t := range topics {
		for p := range int(t.Partitions) {
			var rs []string
			for r := range replicas {
				rs = append(rs, fmt.Sprintf("rack-%d", (p+r)%racks))
			}
			t.PartitionRacks = append(t.PartitionRacks, rs)
		}
		topics[id] = t
	}
	return topics
}

func inRack(t assignor.Topic, p int32, rack string) bool {
	return slices.Contains(t.PartitionRacks[p], rack)
}

func TestRacksHonoured(t *testing.T) {
	// 3 racks, one member per rack, each partition in a single rack: every
	// member gets exactly its rack's partitions.
	in := assignortest.Group(3, racked(3, 1, "a", 9, "b", 6))
	for i := range in.Members {
		in.Members[i].Rack = fmt.Sprintf("rack-%d", i)
	}
	out := assignortest.Check(t, RackAware{}, in)
	for _, m := range in.Members {
		n := 0
		for id, ps := range out[m.ID] {
			for _, p := range ps {
				n++
				if !inRack(in.Topics[id], p, m.Rack) {
					t.Errorf("%s (%s) got %s-%d, which has no replica there", m.ID, m.Rack, in.Topics[id].Name, p)
				}
			}
		}
		if n != 5 {
			t.Errorf("%s got %d partitions, want 5", m.ID, n)
		}
	}
	// A stable group stays put.
	for i := range in.Members {
		in.Members[i].Current = out[in.Members[i].ID]
	}
	again := assignortest.Check(t, RackAware{}, in)
	if fmt.Sprint(again) != fmt.Sprint(out) {
		t.Errorf("not a fixed point:\n%v\n%v", out, again)
	}
}

func TestRacksWithinBalance(t *testing.T) {
	// 6 members over 3 racks, 2 replicas per partition: balance first (per
	// topic, counts differ by at most one), and every partition local.
	in := assignortest.Group(6, racked(3, 2, "a", 30, "b", 7))
	for i := range in.Members {
		in.Members[i].Rack = fmt.Sprintf("rack-%d", i%3)
	}
	out := assignortest.Check(t, RackAware{}, in)
	local, all := 0, 0
	for _, m := range in.Members {
		for id, ps := range out[m.ID] {
			for _, p := range ps {
				all++
				if inRack(in.Topics[id], p, m.Rack) {
					local++
				}
			}
		}
	}
	if local != all {
		t.Errorf("%d of %d partitions local", local, all)
	}
	for id, topic := range in.Topics {
		lo, hi := int(topic.Partitions), 0
		for _, m := range in.Members {
			lo, hi = min(lo, len(out[m.ID][id])), max(hi, len(out[m.ID][id]))
		}
		if hi-lo > 1 {
			t.Errorf("topic %s: members own %d to %d partitions", topic.Name, lo, hi)
		}
	}
}

func TestNoRacksIsUniform(t *testing.T) {
	// Without rack information the counts are as balanced as uniform's.
	in := assignortest.Group(7, assignortest.Topics("a", 20, "b", 3, "c", 11))
	out := assignortest.Check(t, RackAware{}, in)
	lo, hi := 1<<30, 0
	for _, m := range in.Members {
		n := 0
		for _, ps := range out[m.ID] {
			n += len(ps)
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		t.Errorf("members own %d to %d partitions", lo, hi)
	}
}

func TestMemberWithoutMatchingRack(t *testing.T) {
	// A member whose rack hosts nothing still gets its share.
	in := assignortest.Group(2, racked(1, 1, "a", 4))
	in.Members[0].Rack = "rack-0"
	in.Members[1].Rack = "elsewhere"
	out := assignortest.Check(t, RackAware{}, in)
	if len(out["m000"][assignortest.ID("a")]) != 2 || len(out["m001"][assignortest.ID("a")]) != 2 {
		t.Errorf("unbalanced: %v", out)
	}
}
