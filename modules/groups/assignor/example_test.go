package assignor_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

func Example() {
	orders := assignor.TopicID{0: 1}
	in := assignor.Input{
		Topics: map[assignor.TopicID]assignor.Topic{
			orders: {ID: orders, Name: "orders", Partitions: 6},
		},
		Members: []assignor.Member{
			// m1 owned everything until m2 joined.
			{ID: "m1", Topics: []string{"orders"}, Current: map[assignor.TopicID][]int32{orders: {0, 1, 2, 3, 4, 5}}},
			{ID: "m2", Topics: []string{"orders"}},
		},
	}
	a := assignor.Builtin("uniform")
	target, err := a.Assign(context.Background(), in)
	if err == nil {
		err = assignor.Check(in, target)
	}
	fmt.Println(err)
	fmt.Println("m1", target["m1"][orders])
	fmt.Println("m2", target["m2"][orders])
	// Output:
	// <nil>
	// m1 [3 4 5]
	// m2 [0 1 2]
}

// Members that send a rack get the partitions with a replica in their rack,
// as far as balance allows.
func ExampleUniform_racks() {
	orders := assignor.TopicID{0: 1}
	in := assignor.Input{
		Topics: map[assignor.TopicID]assignor.Topic{
			orders: {ID: orders, Name: "orders", Partitions: 4,
				PartitionRacks: [][]string{{"az-a"}, {"az-b"}, {"az-a"}, {"az-b"}}},
		},
		Members: []assignor.Member{
			{ID: "m1", Rack: "az-b", Topics: []string{"orders"}},
			{ID: "m2", Rack: "az-a", Topics: []string{"orders"}},
		},
	}
	target, _ := assignor.Uniform{}.Assign(context.Background(), in)
	fmt.Println("m1", target["m1"][orders])
	fmt.Println("m2", target["m2"][orders])
	// Output:
	// m1 [1 3]
	// m2 [0 2]
}
