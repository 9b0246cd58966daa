package assignor

import (
	"context"
	"fmt"
	"testing"
)

// benchGroups are the sizes in BENCH.md: members × partitions (10 topics).
var benchGroups = []struct{ members, partitions int }{{20, 200}, {200, 2000}}

func benchAssignor(b *testing.B, a Assignor, racked bool) {
	for _, size := range benchGroups {
		counts := make([]int32, 10)
		for i := range counts {
			counts[i] = int32(size.partitions / len(counts))
		}
		ts := topics(counts...)
		subs := names(len(counts))
		name := fmt.Sprintf("%dx%d", size.members, size.partitions)
		group := func(n int) []Member { return members(n, subs...) }
		if racked {
			// Members on racks r0, r1, r2 in turn; partition p of each topic
			// on rack p%3.
			name = "racked/" + name
			ts = withRacks(ts, func(_, p int) []string { return []string{fmt.Sprint("r", p%3)} })
			group = func(n int) []Member {
				ms := members(n, subs...)
				for i := range ms {
					ms[i].Rack = fmt.Sprint("r", i%3)
				}
				return ms
			}
		}
		fresh := Input{Members: group(size.members), Topics: ts}
		b.Run(name+"/fresh", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Assign(context.Background(), fresh); err != nil {
					b.Fatal(err)
				}
			}
		})
		// A member joins a group that has a stable assignment.
		all := group(size.members)
		prev := all[:size.members-1]
		out, err := a.Assign(context.Background(), Input{Members: prev, Topics: ts})
		if err != nil {
			b.Fatal(err)
		}
		join := Input{Topics: ts, Members: make([]Member, 0, size.members)}
		for _, m := range prev {
			m.Current = out[m.ID]
			join.Members = append(join.Members, m)
		}
		joiner := all[size.members-1]
		joiner.ID = "joiner"
		join.Members = append(join.Members, joiner)
		b.Run(name+"/join", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Assign(context.Background(), join); err != nil {
					b.Fatal(err)
				}
			}
		})
		// One member owns everything (e.g. it was alone until now).
		skewed := Input{Topics: ts, Members: group(size.members)}
		skewed.Members[0].Current = map[TopicID][]int32{}
		for id, tp := range ts {
			for p := range tp.Partitions {
				skewed.Members[0].Current[id] = append(skewed.Members[0].Current[id], p)
			}
		}
		b.Run(name+"/skewed", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Assign(context.Background(), skewed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUniform(b *testing.B) {
	benchAssignor(b, Uniform{}, false)
	benchAssignor(b, Uniform{}, true) // uniform reads racks; racked cases
}
func BenchmarkRange(b *testing.B) { benchAssignor(b, Range{}, false) }
