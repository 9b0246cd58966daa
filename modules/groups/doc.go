// Package groups is the group coordinator module (groups.coordinator): consumer
// groups of both protocols and their committed offsets, and share groups (KIP-932).
//
// # Pieces
//
//	groups (this package)  the module: API handlers, __consumer_offsets shards,
//	                       the sweeper
//	groups/classic         classic protocol state machine (JoinGroup, SyncGroup,
//	                       Heartbeat, LeaveGroup), pure and clock-driven
//	groups/consumer        KIP-848 state machine (ConsumerGroupHeartbeat), pure
//	groups/assignor        server-side assignors of KIP-848 groups
//	groups/offsets         __consumer_offsets record formats, the View a store
//	                       offers, the badger Store and the in-memory Memory
//	groups/offsets/offsetstest  the View conformance suite both stores pass
//	groups/share           share group membership (ShareGroupHeartbeat), pure
//	groups/sharepart       one share-partition's record states, pure
//
// # Guests
//
// The module hosts guests (kernel/guest.go, guests.go) in two namespaces; config
// picks them as `use:` picks a role's module, and an unknown one fails the start with
// the known ones listed:
//
//	groups.assignor.uniform  built-in assignors, by name in `assignors:`
//	groups.assignor.range
//	groups.assignor.plugin   an `assignors:` mapping with plugin: (plugins.go)
//	groups.offsets.badger    the default offset store, <data dir>/groups/offsets
//	                         (setting: dir)
//	groups.offsets.memory    offsets in memory only, rebuilt from __consumer_offsets
//	                         at every load
//
//	groups: {use: coordinator, offsets: memory}        # or offsets: {use: memory}
//	groups: {assignors: [uniform, range, {name: rack-aware, plugin: ./bin/x}]}
//
// A guest is made in Validate from the registry the broker was composed from (the
// module's own guests when a test builds the module by hand); the offset store
// (OffsetsGuest) is opened at Start and closed at Cleanup.
//
// # Where state lives
//
// A group is coordinated by the leader of __consumer_offsets partition
// offsets.PartitionFor(group, offsets.topic.num.partitions); FindCoordinator
// creates the topic on first use (compacted, through kernel.TopicCreator).
// Every committed offset, deleted offset (tombstone) and classic group metadata
// record is appended to that partition through kernel.Partitions.Append (the
// produce leader path with acks=all semantics) and only then applied to the
// offset store (an offsets.View: by default the badger store under
// <data dir>/groups/offsets), which serves OffsetFetch. The log is the truth and
// the store a view of it: on leadership of a partition (and at every start) the
// coordinator replays the partition into the store from the store's applied
// offset + 1. Deleting the badger directory therefore loses nothing; the next
// start rebuilds it, and the memory store is rebuilt so at every start.
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
// written, so a crash mid-rebalance restores the previous generation. KIP-848 groups
// survive too (consumer_persist.go): every heartbeat that changes a group writes
// Kafka's consumer group records (key versions 3, 5, 6, 7, 8: group epoch, member
// metadata, target assignment, current assignment) before it is answered, and a load
// restores each group from them (consumer.Restore): members keep their epochs and
// assignments and heartbeat on; those that do not come back expire.
//
// # Shards and the writer
//
// Each led partition is a shard (shard.go) with its groups and one writer
// goroutine. The writer takes every queued write, appends them as one batch and
// applies them to the store in one badger transaction (one fsync), so concurrent
// commits to groups of one partition share the cost. A write is acknowledged
// only after both. A failed append (leadership lost) unloads the shard; a failed
// apply of a committed append unloads it too, and the reload replays the record.
// A TxnOffsetCommit is appended alone (its own producer's transactional batch), and
// the writer also applies the transaction markers queued by the marker listener, so
// the store has one writer.
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
// # Transactions
//
// FindCoordinator key type 1 asks the transaction coordinator (role "txn",
// kernel.TxnCoordinatorLocator, optional) for the transactional id's
// __transaction_state partition and answers its leader, as for groups.
//
// TxnOffsetCommit (txn.go, 28_txn_offset_commit.go) appends one transactional batch of
// the producer (id, epoch, base sequence -1) with ordinary offset commit records to
// the group's partition; the Log fences old epochs (INVALID_PRODUCER_EPOCH), and the
// transaction coordinator (kernel.TxnVerifier) first confirms the partition is in the
// producer's ongoing transaction (KIP-890 part 1; INVALID_TXN_STATE otherwise). The
// offsets stay pending per (partition, producer) until the producer's marker: the
// replication module reports markers appended to __consumer_offsets through
// kernel.TxnMarkerHook; the listener queues them to the partition's shard, whose
// writer applies a COMMIT's offsets (unless a plain commit or tombstone of the same
// partition was appended after the transactional batch: the latest record in the log
// wins, as in Kafka) or drops an ABORT's. OffsetFetch with require_stable answers
// UNSTABLE_OFFSET_COMMIT for partitions with pending offsets; deleting a group or an
// offset tombstones pending ones too; expiry skips them.
//
// A load replays from min(applied offset + 1, offsets.View.TxnReplayStart), the
// first offset of the earliest transactional batch whose marker was not applied,
// re-applying everything after it in log order: pending offsets survive a restart
// even when later plain commits moved the applied offset past them (the txnStart
// invariant, txn.go).
//
// # Protocols of a group
//
// A group id holds a classic group, a KIP-848 consumer group or a share group. A
// consumer group may also have classic-protocol members (JoinGroup, SyncGroup,
// Heartbeat and LeaveGroup are served by its consumer.Group), and a group moves
// between the classic and consumer protocols with members in it as
// group.consumer.migration.policy allows (migration.go: upgrade on a KIP-848 join,
// downgrade when the last KIP-848 member leaves). An empty group becomes a group of
// the protocol that joins it; a share group never mixes.
//
// # Share groups (KIP-932)
//
// With group.share.enable (read at start), two roles, on possibly different brokers:
//
//   - The group coordinator (the group's __consumer_offsets partition leader) runs
//     membership (76_share_group_heartbeat.go, groups/share: no revocation, partitions
//     may be shared), answers the admin APIs (90-92) and keeps each share-partition's
//     durable state as a group record (offsets.ShareStateKeyV1001, share_state.go),
//     fenced by state and leader epochs. Kafka keeps that state in a separate
//     __share_group_state topic behind a share coordinator; keeping it with the group
//     needs no other internal topic and lets DescribeShareGroupOffsets read it locally.
//   - Each partition's leader serves ShareFetch and ShareAcknowledge
//     (share_leader.go, groups/sharepart): share sessions, acquisition locks, delivery
//     counts, the delivery limit and the dead-letter topic. It reads a
//     share-partition's state when it first serves it (fencing the previous leader)
//     and writes it after acknowledgements (before answering) and after lock expiry
//     (the sweep), locally or through ReadShareGroupState / WriteShareGroupState.
//
// The leader does not check membership with the coordinator (Kafka does not either):
// a share session is keyed by group and member id, and what a member holds is
// released when its session closes or idles out.
//
// # Assignor plugins
//
// The `assignors:` list (the first is the broker's default) takes the names of
// groups.assignor guests (the built-ins) and plugin items (AssignorConfig, the
// groups.assignor.plugin guest): `{name, plugin, sha256, timeout_ms, fallback, args,
// env}`. Validate checks names are unique, the binary exists and is executable, the
// sha256 is 64 hex characters and the fallback (default uniform) is a built-in. A
// plugin may take a built-in's name and then replaces it for the clients that ask for
// it. plugins.go is the host side (the SDK is plugins/assignor): Start launches each
// plugin with hashicorp/go-plugin (gRPC only, AutoMTLS, SecureConfig when sha256 is
// set, the binary's stderr in the broker's log with plugin=<name>); a launch failure
// does not fail the broker. A supervisor per plugin relaunches it after it exits, with
// backoff from 100 ms to 30 s; its state is starting, running, restarting, failed (3
// launches in a row failed; it keeps trying) or stopped. Each call has a deadline
// (timeout_ms, default 1 s) and its answer must pass assignor.Check; when the plugin is
// not running, misses the deadline, errs, panics or answers an invalid assignment, the
// call counts an error and the fallback built-in answers: the consumer state machine
// sees a successful assignment, so a group never stalls on a plugin. Stop first
// unloads the groups, then refuses new plugin calls (fallback), waits for the calls in
// flight (bounded by its context) and kills each process (go-plugin reaps it): no
// plugin process outlives the broker. GET /v1/plugins (admin listener) and `sluice
// plugin list` show per plugin: state, pid, restarts, calls, errors, fallbacks, last
// latency and last error.
//
// For plugins only (consumer.StatsUser), the group fills each topic's
// PartitionEndOffsets (high watermark) and PartitionLag (high watermark minus the
// group's committed offset, or minus the log start when none is committed) through
// consumer.TopicStats, from kernel.PartitionOffsets of the replication module and the
// offset store; -1 for partitions this broker does not lead. Plugins and the built-in
// uniform assignor (consumer.RackUser) also get PartitionRacks through
// consumer.TopicRacks: each partition's replica racks from the image, so uniform
// prefers rack-local partitions for members that send a rack, balance first (range
// stays rack-blind). Built-ins get no end offsets or lag.
//
// Which assignor a group uses: the group config sluice.consumer.assignor (metadata
// extension records "groups.configs"/<group id>, a JSON object of config name → value,
// written by IncrementalAlterConfigs on the GROUP resource) when it names a configured
// assignor (else logged once and ignored); else, for KIP-848 groups, the one its
// members name in ServerAssignor (most votes; an unknown name is UNSUPPORTED_ASSIGNOR);
// else the broker's default. The coordinator logs at info which assignor computes a
// group's assignment and why, each time that changes. A change of the group config
// takes effect at the group's next rebalance (it does not bump the group epoch).
//
// Classic groups with that config set are assigned on the coordinator too
// (classic_assign.go, classic.ServerAssigner): members are all followers, each told
// its own protocol, and the configured assignor's answer is what SyncGroup returns,
// so clients that speak only the classic protocol reach built-ins and plugins alike.
// A classic group without the config is assigned by its leader, as in Kafka.
//
// # Invariants
//
//   - An acknowledged OffsetCommit is in the log at or below the high watermark
//     and in the store; a later OffsetFetch to the same coordinator sees it.
//   - An acknowledged TxnOffsetCommit is in the log and pending in memory; its
//     offsets reach the store only at its producer's COMMIT marker, and the store's
//     replay start (TxnReplayStart) stays at or below every open transaction's
//     first batch, so no pending offset is lost across a restart.
//   - Records reach the store in log order per partition, from one writer or the
//     replay, never both at once (a new shard waits for the old one's done).
//   - Handlers never block on a group's lock for long: the state machines answer
//     through buffered channels; JoinGroup and SyncGroup wait on those channels
//     or the request context.
//   - A group's metadata records reach the log in the order of their snapshots:
//     they are taken and queued under the shard's metaMu (restore.go).
//   - No goroutine outlives Stop: the sweeper, loaders and writers are counted in
//     Module.wg, classic server-side assignments in Module.assigning (each ends with
//     its shard's context), and Stop marks every group dead so waiting joins are
//     answered.
//   - No plugin process outlives Stop, and none is killed during a call unless Stop's
//     context ends first.
//   - A plugin never stalls a group: every plugin call ends within timeout_ms and any
//     failure is answered by the fallback built-in.
package groups
