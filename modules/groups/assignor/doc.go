// Package assignor holds the server-side partition assignors of KIP-848
// consumer groups: the interface every assignor implements, the built-ins
// Uniform ("uniform") and Range ("range"), and the tools to verify an
// assignor: Check, Balance and Scenario.
//
// The group coordinator builds an Input from the group (members with their
// subscriptions, resolved to topic names, and current assignments; topic
// metadata from the metadata image) and asks the group's assignor for the
// target assignment, which it then reconciles member by member. Assignors
// that run as go-plugin processes implement the same interface; every type
// here is plain data (JSON-friendly, topic ids as text map keys) so it can
// cross a process boundary.
//
//	a := assignor.Builtin("uniform") // or assignor.Uniform{}
//	in := assignor.Input{
//		Members: []assignor.Member{
//			{ID: "m1", Rack: "r1", Topics: []string{"orders"}},
//			{ID: "m2", Topics: []string{"orders"}, Current: map[assignor.TopicID][]int32{ordersID: {0, 1, 2}}},
//		},
//		Topics: map[assignor.TopicID]assignor.Topic{
//			ordersID: {ID: ordersID, Name: "orders", Partitions: 3},
//		},
//	}
//	target, err := a.Assign(ctx, in)
//	if err == nil {
//		err = assignor.Check(in, target) // what the host does with a plugin's answer
//	}
//
// # Invariants
//
// Given a valid Input (see Input for the rules; a broken one is
// ErrInvalidInput), an assignor returns an Assignment that Check accepts:
//   - every partition of every topic someone subscribes to is assigned to
//     exactly one member, and only to a member subscribed to that topic;
//   - partitions of topics nobody subscribes to are not assigned;
//   - no unknown member, unknown topic or out-of-range partition appears, and
//     each member's partitions are listed once, ascending.
//
// The built-ins also hold these:
//   - Deterministic: the output depends only on the content of the Input, not
//     on the order of Members, of their Topics or Current lists, nor on map
//     iteration order. Every member appears in the output, possibly with an
//     empty map.
//   - A fixed point: feeding an assignment back as Current returns it
//     unchanged, so a stable group is not shuffled.
//   - Uniform: with homogeneous subscriptions member counts differ by at most
//     one, and a member joining a balanced group of N members owning P
//     partitions moves at most ceil(P/(N+1)) partitions; a member leaving
//     moves only its own. With heterogeneous subscriptions no partition could
//     go to a subscriber owning two or more fewer partitions than its owner.
//     Within those rules it is rack-aware (KIP-881 on the server): members
//     with a Rack get partitions with a replica in their rack
//     (Topic.PartitionRacks) where balance and then stickiness allow. When no
//     member's rack hosts a replica of a partition it subscribes to, racks
//     change nothing: the answer is the rack-blind one.
//   - Range: per topic, contiguous ranges in member-id order on a fresh group
//     (first partitions%members members get one more), so co-partitioned
//     topics line up; later each member keeps its partitions up to its quota.
//     It ignores racks.
//
// Member.InstanceID is carried for assignors that want it; the built-ins
// ignore it: the coordinator gives a returning static member its
// predecessor's assignment as Current, and that is what keeps it sticky.
//
// Scenario drives an assignor through members joining and leaving and
// reports how many partitions moved; plugin authors use it with Check (this
// is what becomes the assignortest package).
//
// # Concurrency
//
// The coordinator calls one Assignor value concurrently for different groups.
// An implementation must be stateless or safe for concurrent use, must not
// keep or modify the Input (it is shared with the caller), and should return
// promptly when ctx is cancelled. Uniform and Range are empty structs with no
// state; Check, Balance and Scenario share nothing between calls.
package assignor
