package metadata

import (
	"slices"
	"testing"
)

func TestPlaceReplicasSpread(t *testing.T) {
	live := []int32{1, 2, 3}
	for start := range 3 {
		parts := placeReplicas(live, map[int32]string{}, start, 12, 1)
		count := map[int32]int{}
		for _, p := range parts {
			count[p.Leader]++
		}
		if count[1] != 4 || count[2] != 4 || count[3] != 4 {
			t.Errorf("start %d: leaders %v", start, count)
		}
	}
	parts := placeReplicas(live, map[int32]string{}, 0, 6, 3)
	followers := map[int32]int{}
	for _, p := range parts {
		if len(p.Replicas) != 3 || p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) {
			t.Fatalf("partition %+v", p)
		}
		s := slices.Clone(p.Replicas)
		slices.Sort(s)
		if !slices.Equal(s, live) {
			t.Errorf("replicas %v", p.Replicas)
		}
		followers[p.Replicas[1]]++
	}
	if followers[1] != 2 || followers[2] != 2 || followers[3] != 2 {
		t.Errorf("second replicas %v", followers)
	}
}

func TestPlaceReplicasRackAware(t *testing.T) {
	live := []int32{1, 2, 3, 4, 5, 6}
	racks := map[int32]string{1: "a", 2: "a", 3: "a", 4: "b", 5: "b", 6: "c"}
	for start := range len(live) {
		parts := placeReplicas(live, racks, start, 30, 3)
		count := map[int32]int{}
		for _, p := range parts {
			count[p.Leader]++
			seen := map[string]bool{}
			for _, r := range p.Replicas {
				if seen[racks[r]] {
					t.Fatalf("start %d partition %v: two replicas on rack %s", start, p.Replicas, racks[r])
				}
				seen[racks[r]] = true
			}
		}
		for _, id := range live {
			if count[id] != 5 {
				t.Errorf("start %d: leaders %v", start, count)
				break
			}
		}
	}
	// More replicas than racks: distinct racks first, then any broker.
	parts := placeReplicas([]int32{1, 2, 3, 4}, map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"}, 0, 4, 3)
	for _, p := range parts {
		if len(p.Replicas) != 3 {
			t.Fatalf("replicas %v", p.Replicas)
		}
		r := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"}
		if r[p.Replicas[0]] == r[p.Replicas[1]] {
			t.Errorf("first two replicas %v share a rack", p.Replicas)
		}
	}
}
