package groups

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// benchInput is 100 members subscribed to 10 topics of 100 partitions (1000
// partitions), with end offsets and lag filled as the coordinator fills them for
// plugins, each member's Current its share of a previous uniform assignment.
func benchInput(b *testing.B) assignor.Input {
	in := assignor.Input{Topics: map[assignor.TopicID]assignor.Topic{}}
	var names []string
	for t := range 10 {
		id := assignor.TopicID{byte(t + 1)}
		name := fmt.Sprintf("topic-%d", t)
		names = append(names, name)
		ends, lag := make([]int64, 100), make([]int64, 100)
		for p := range ends {
			ends[p], lag[p] = int64(1_000_000+p), int64(p*10)
		}
		in.Topics[id] = assignor.Topic{ID: id, Name: name, Partitions: 100, PartitionEndOffsets: ends, PartitionLag: lag}
	}
	for m := range 100 {
		in.Members = append(in.Members, assignor.Member{ID: fmt.Sprintf("member-%03d", m), Topics: names})
	}
	prev, err := assignor.Uniform{}.Assign(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	for i := range in.Members {
		in.Members[i].Current = prev[in.Members[i].ID]
	}
	return in
}

// BenchmarkPluginAssign: one assignment of 100 members × 1000 partitions, by the
// in-process built-in and by the test plugin over go-plugin gRPC (the same uniform
// algorithm, and the trivial "smallest" answer to show the transport's share). The
// plugin figures include the host's assignor.Check of the answer.
func BenchmarkPluginAssign(b *testing.B) {
	in := benchInput(b)
	ctx := context.Background()
	b.Run("builtin-uniform", func(b *testing.B) {
		for b.Loop() {
			if _, err := (assignor.Uniform{}).Assign(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("builtin-uniform+check", func(b *testing.B) {
		for b.Loop() {
			out, err := (assignor.Uniform{}).Assign(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			if err := assignor.Check(in, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, mode := range []string{"uniform", "good"} {
		b.Run("plugin-"+map[string]string{"uniform": "uniform", "good": "smallest"}[mode], func(b *testing.B) {
			p, _ := startTestPlugin(b, mode, func(c *AssignorConfig) { c.TimeoutMs = 10_000 })
			for b.Loop() {
				if _, err := p.Assign(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			if s := p.stats(); s.Errors != 0 {
				b.Fatalf("plugin errors: %+v", s)
			}
		})
	}
}
