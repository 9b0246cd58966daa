// Package groups is the group coordinator module (groups.coordinator): consumer
// groups of both protocols and their committed offsets.
//
// # Pieces
//
//	groups (this package)  the module: API handlers, __consumer_offsets shards,
//	                       the sweeper
//	groups/classic         classic protocol state machine (JoinGroup, SyncGroup,
//	                       Heartbeat, LeaveGroup), pure and clock-driven
//	groups/consumer        KIP-848 state machine (ConsumerGroupHeartbeat), pure
//	groups/assignor        server-side assignors of KIP-848 groups
//	groups/offsets         __consumer_offsets record formats and the badger store
//
// # Where state lives
//
// A group is coordinated by the leader of __consumer_offsets partition
// offsets.PartitionFor(group, offsets.topic.num.partitions); FindCoordinator
// creates the topic on first use (compacted, through kernel.TopicCreator).
// Every committed offset, deleted offset (tombstone) and classic group metadata
// record is appended to that partition through kernel.Partitions.Append (the
// produce leader path with acks=all semantics) and only then applied to the
// badger store under <data dir>/groups/offsets, which serves OffsetFetch. The
// log is the truth and the store a view of it: on leadership of a partition
// (and at every start) the coordinator replays the partition into the store
// from the store's applied offset + 1. Deleting the store directory therefore
// loses nothing; the next start rebuilds it.
//
// Classic group membership survives a restart or coordinator move: when a classic
// group reaches a new Stable generation its full snapshot (classic.Snapshot:
// generation, protocol type and protocol, leader, members with client id, host,
// instance id, session and rebalance timeouts, subscription and assignment) is
// written as a group metadata record, by the leader's SyncGroup handler before it
// answers (so the record is in the log before the leader sees its assignment; the
// sweeper writes it too if that failed), and when the group becomes Empty by the
// sweeper. When a shard loads, after the replay, every group of its partition with a
// metadata record is restored (classic.Restore): Stable with its members, whose
// session timers start at the load, or Empty at its generation. Members that come
// back keep heartbeating and committing with their generation; members that do not
// expire and the group rebalances, as in Kafka. Only Stable and Empty snapshots are
// written, so a crash mid-rebalance restores the previous generation. KIP-848 members
// still rejoin with epoch 0: Sluice does not write KIP-848 group records (key
// versions 3+).
//
// # Shards and the writer
//
// Each led partition is a shard (shard.go) with its groups and one writer
// goroutine. The writer takes every queued write, appends them as one batch and
// applies them to the store in one badger transaction (one fsync), so concurrent
// commits to groups of one partition share the cost. A write is acknowledged
// only after both. A failed append (leadership lost) unloads the shard; a failed
// apply of a committed append unloads it too, and the reload replays the record.
//
// # The sweeper
//
// One goroutine, every sweep_interval_ms (default 100 ms): follows which
// __consumer_offsets partitions this broker leads (loading and unloading shards),
// fires due group timers (session, rebalance, join and sync deadlines), writes a
// group metadata record when a classic group's snapshot changed (a new Stable
// generation not yet written by SyncGroup, a static member's new id, or Empty), forgets groups empty for empty_group_idle_ms (their offsets stay)
// and, every offsets.retention.check.interval.ms, writes tombstones for offsets of
// empty groups older than offsets.retention.minutes (counted from when the group
// became empty, else from the commit).
//
// # One protocol per group
//
// A group id holds classic members or KIP-848 members, never both (Kafka's
// group.consumer.migration.policy=disabled): see consumer_handlers.go.
//
// # Invariants
//
//   - An acknowledged OffsetCommit is in the log at or below the high watermark
//     and in the store; a later OffsetFetch to the same coordinator sees it.
//   - Records reach the store in log order per partition, from one writer or the
//     replay, never both at once (a new shard waits for the old one's done).
//   - Handlers never block on a group's lock for long: the state machines answer
//     through buffered channels; JoinGroup and SyncGroup wait on those channels
//     or the request context.
//   - A group's metadata records reach the log in the order of their snapshots:
//     they are taken and queued under the shard's metaMu (restore.go).
//   - No goroutine outlives Stop: the sweeper, loaders and writers are counted in
//     Module.wg, and Stop marks every group dead so waiting joins are answered.
package groups
