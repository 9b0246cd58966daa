package assignor

import (
	"context"
	"fmt"
	"testing"
)

// benchGroups are the sizes in BENCH.md: members × partitions (10 topics).
var benchGroups = []struct{ members, partitions int }{{20, 200}, {200, 2000}}

func benchAssignor(b *testing.B, a Assignor) {
	for _, size := range benchGroups {
		counts := make([]int32, 10)
		for i := range counts {
			counts[i] = int32(size.partitions / len(counts))
		}
		ts := topics(counts...)
		subs := names(len(counts))
		fresh := Input{Members: members(size.members, subs...), Topics: ts}
		b.Run(fmt.Sprintf("%dx%d/fresh", size.members, size.partitions), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Assign(context.Background(), fresh); err != nil {
					b.Fatal(err)
				}
			}
		})
		// A member joins a group that has a stable assignment.
		prev := members(size.members-1, subs...)
		out, err := a.Assign(context.Background(), Input{Members: prev, Topics: ts})
		if err != nil {
			b.Fatal(err)
		}
		join := Input{Topics: ts, Members: make([]Member, 0, size.members)}
		for _, m := range prev {
			m.Current = out[m.ID]
			join.Members = append(join.Members, m)
		}
		join.Members = append(join.Members, Member{ID: "joiner", Topics: subs})
		b.Run(fmt.Sprintf("%dx%d/join", size.members, size.partitions), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Assign(context.Background(), join); err != nil {
					b.Fatal(err)
				}
			}
		})
		// One member owns everything (e.g. it was alone until now).
		skewed := Input{Topics: ts, Members: members(size.members, subs...)}
		skewed.Members[0].Current = map[TopicID][]int32{}
		for id, tp := range ts {
			for p := range tp.Partitions {
				skewed.Members[0].Current[id] = append(skewed.Members[0].Current[id], p)
			}
		}
		b.Run(fmt.Sprintf("%dx%d/skewed", size.members, size.partitions), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Assign(context.Background(), skewed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUniform(b *testing.B) { benchAssignor(b, Uniform{}) }
func BenchmarkRange(b *testing.B)   { benchAssignor(b, Range{}) }
