package metadata

import (
	"maps"
	"slices"

	"github.com/sluicehq/sluice/modules/metadata/image"
)

// placeReplicas assigns rf replicas to each of count partitions over live (sorted
// broker ids, rf <= len(live)); racks gives each broker's rack ("" = none).
//
// The brokers are first put in rack-alternating order: racks sorted by name, and the
// order takes one broker of each rack in turn (brokers of a rack by id), so neighbours
// in the order sit on different racks while racks last. Partition p's leader is
// order[(start+p) % n], so the leaders of one call are spread evenly (12 partitions on
// 3 brokers: 4 leaders each). Its followers are taken walking the order from the leader
// (shifted by p/n, so followers spread too), first only brokers on racks the partition
// does not use yet, then any broker not chosen: replicas of a partition are on distinct
// racks as far as the racks allow. Without racks this is plain round-robin.
func placeReplicas(live []int32, racks map[int32]string, start, count, rf int) []image.PartitionAssignment {
	order := rackAlternating(live, racks)
	n := len(order)
	out := make([]image.PartitionAssignment, count)
	for p := range out {
		pos := (start + p) % n
		replicas := []int32{order[pos]}
		usedRack := map[string]bool{racks[order[pos]]: true}
		shift := 0
		if n > 1 {
			shift = (p / n) % (n - 1)
		}
		walk := func(rackAware bool) {
			for k := 0; k < n-1 && len(replicas) < rf; k++ {
				b := order[(pos+1+(shift+k)%(n-1))%n]
				if slices.Contains(replicas, b) {
					continue
				}
				if rackAware && (racks[b] == "" || usedRack[racks[b]]) {
					continue
				}
				replicas = append(replicas, b)
				usedRack[racks[b]] = true
			}
		}
		walk(true)
		walk(false)
		out[p] = image.PartitionAssignment{Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)}
	}
	return out
}

// rackAlternating orders brokers so that consecutive ones are on different racks while
// every rack still has brokers left: round-robin over racks sorted by name.
func rackAlternating(live []int32, racks map[int32]string) []int32 {
	byRack := map[string][]int32{}
	for _, id := range live {
		byRack[racks[id]] = append(byRack[racks[id]], id)
	}
	if len(byRack) <= 1 {
		return slices.Clone(live)
	}
	names := slices.Sorted(maps.Keys(byRack))
	out := make([]int32, 0, len(live))
	for i := 0; len(out) < len(live); i++ {
		for _, r := range names {
			if ids := byRack[r]; i < len(ids) {
				out = append(out, ids[i])
			}
		}
	}
	return out
}
