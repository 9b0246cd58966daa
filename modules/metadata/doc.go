// Package metadata is the "metadata.raft" module: the cluster's metadata (brokers,
// topics, partition placement, leaders and ISRs, dynamic configs) kept in a
// hashicorp/raft log and applied on every broker to an immutable, versioned
// kernel.Image that other modules read without locks.
//
// A single-node broker is a one-voter raft quorum: the same code path as a cluster,
// with no separate "local" mode. The module also serves the admin APIs that read or
// write metadata: Metadata, CreateTopics, DeleteTopics, CreatePartitions,
// DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (topic, broker and group
// configs) and DescribeCluster. Other modules create internal topics through it
// (kernel.TopicCreator) and keep their own cluster-wide records in it
// (kernel.ExtensionStore: PutExtension, Image.Extensions).
//
// # Usage
//
//	reg.Register(metadata.Info()) // in modules/standard
//
//	modules:
//	  metadata: {use: raft}                      # one voter, in-memory transport
//	  metadata: {use: raft, raft_listen: 127.0.0.1:9093,
//	             voters: ["1@10.0.0.1:9093", "2@10.0.0.2:9093", "3@10.0.0.3:9093"]}
//
// Another module finds it during Provision and follows the image:
//
//	mod, _ := ctx.Lookup("metadata")
//	md := mod.(kernel.Metadata)
//	cancel := md.Subscribe(func(im *kernel.Image) { ... }) // cancel in Stop
//	t := md.Image().Topic("orders")
//
// # Lifecycle
//
// Provision opens the stores and claims the API keys. Start starts raft, bootstraps a
// new log with the configured voters, and waits until this broker is registered: the
// raft leader first writes the cluster id (a fresh log only) and a LeaderChange entry
// naming itself controller; Start then writes a RegisterBroker entry with a new
// incarnation id and this broker's listeners and rack. Stop shuts raft down; Cleanup
// closes the stores.
//
// # Storage
//
// Under <data_dir>/metadata: raft.db holds raft's log and stable store, snapshots/ holds
// raft FileSnapshotStore snapshots (two retained). raft.db is a bbolt file, written by a
// small LogStore/StableStore in store.go: bbolt is simple, keeps everything in one file,
// commits each write in an fsync'd transaction (so a crash leaves the last committed
// state), and is what raft's own stores are built on. raft-boltdb itself does not
// resolve with our go-metrics version. Buckets "logs" (key: index u64 big endian) and
// "stable" (raft's keys). A log value is
//
//	| enc u8 = 1 | index u64 | term u64 | type u8 | appended_at i64 ns | data_len u32 | data | ext_len u32 | ext |
//
// big endian; appended_at 0 means unset. A value that does not parse is reported as
// ErrCorruptEntry; bbolt's own transactions mean there is no torn tail to repair.
//
// # Log entries
//
// Each raft command is one typed, versioned record:
//
//	| type u8 | version u8 | JSON payload |
//
// Types (frozen; never renumbered or reused): 1 ClusterID, 2 RegisterBroker,
// 3 FenceBroker, 4 UnfenceBroker, 5 CreateTopic, 6 DeleteTopic, 7 CreatePartitions,
// 8 AlterTopicConfigs, 9 AlterBrokerConfigs (node "" = cluster default),
// 10 PartitionChange, 11 LeaderChange, 12 Extension, 13 ProducerIDs. Every type is at
// version 1. JSON field names are frozen; ids are 22-character unpadded base64url, as
// Kafka prints them.
//
// Extension (kernel.ExtensionStore, extensions.go) is
//
//	{"namespace": s, "key": s, "value": base64, "delete": true}
//
// ("value" omitted when empty, "delete" when false): it sets or removes one value of
// Image.Extensions. Namespace and key are 1 to 255 bytes (checked by Apply too);
// values are opaque, at most kernel.MaxExtensionValueBytes (checked by the proposer
// only: the bound lives in kernel, and Apply must not depend on it). An empty value is
// stored as an empty, non-nil slice; deleting an absent key is accepted and changes
// nothing; removing a namespace's last key removes the namespace.
//
// ProducerIDs (kernel.ProducerIDAllocator, producerids.go) is
//
//	{"broker_id": i32, "count": i32}
//
// and reserves a block of count producer ids for broker_id. The entry names no ids:
// the state keeps the first unallocated id (0 on a new log, not shown in the image),
// and Apply gives the entry [next, next+count) and advances next by count. The
// proposer learns its block from its own entry's apply result (the raft future's
// response), never from the state afterwards, where another allocation may already
// be applied. count is 1 to 1,000,000 (frozen; checked by the proposer and by Apply),
// broker_id at least 0 (checked by Apply); an entry that would take next past the
// largest int64 is rejected. Only the controller proposes (elsewhere ErrNotController;
// forwarding is not done yet).
//
// Group configs (the GROUP config resource of DescribeConfigs, AlterConfigs and
// IncrementalAlterConfigs; groupconfigs.go) are Extension entries in namespace
// "groups.configs" (GroupConfigsNamespace), key the group id, value a JSON object of
// config name to string value, keys sorted, values canonical:
//
//	{"consumer.heartbeat.interval.ms":"6000","consumer.session.timeout.ms":"50000","sluice.consumer.assignor":"range"}
//
// The key is deleted when no config remains. Names: consumer.session.timeout.ms
// (45000 to 60000), consumer.heartbeat.interval.ms (5000 to 15000, and less than the
// effective session timeout), sluice.consumer.assignor (1 to 255 bytes; the group
// coordinator checks it names a configured assignor). The bounds are Kafka's defaults
// of group.consumer.{min,max}.session.timeout.ms and
// group.consumer.{min,max}.heartbeat.interval.ms, which are not broker configs here.
// Unset, the first two default to the broker's group.consumer.session.timeout.ms and
// group.consumer.heartbeat.interval.ms, the assignor to "" (the broker's default
// order). Writes of group configs are serialised in the controller, each computed from
// the image its predecessor left. Groups need not exist to be configured; a group id
// longer than 255 bytes (the extension key limit) cannot be configured.
//
// Bumping a version: a new optional field that old readers may safely ignore needs no
// bump (encoding/json skips unknown fields). A change old readers would misapply (a new
// field they must not ignore, a changed meaning) bumps that type's version: raise
// newest in recordVersions, keep reading newest-1, and write the new version only once
// every broker can read it (gated by a feature level in the log, once there is a second
// version). A broker that meets an entry it cannot read logs an error and keeps its
// image unchanged for that entry.
//
// Snapshots serialize the whole state: | format u8 | JSON | with brokers sorted by id
// and topics by name, so equal states give equal bytes. Format 1 has no extensions;
// format 2 adds "extensions" (namespace -> key -> base64 value); format 3 adds
// "next_producer_id" (the first unallocated producer id) to format 2. Each snapshot is
// written in the oldest format that holds its state (3 once an id was allocated, else
// 2 when there are extensions, else 1), so older brokers read it while they can, and
// refuse it, rather than silently drop extensions or reset the producer id counter,
// once they cannot. All three formats load; formats 1 and 2 give a counter of 0, which
// is right: they predate ProducerIDs entries, so nothing was allocated before them.
//
// # Invariants
//
//   - Image versions only grow: an image's Version is the index of the last command
//     entry applied, and every applied entry (accepted or rejected) publishes a new one.
//   - Apply is deterministic: it reads no clock, no randomness and no local config.
//     Ids (cluster, topic, incarnation), placements and timestamps are chosen by the
//     proposer and carried in the entry. An entry that no longer fits the image (topic
//     exists, partition count moved, unknown broker) is rejected by every broker alike.
//   - A published image is never modified; a change copies what it touches (maps, the
//     changed topic and its partition slice, the Extensions map and the one changed
//     namespace map) and shares the rest, extension values included.
//   - An admin response that reports success is sent only after the entry is applied to
//     this broker's image.
//   - A topic is addressed by name and id together in entries, so an entry for a topic
//     that was deleted and re-created under the same name does not touch the new one.
//   - A new partition's leader is its first replica, its ISR all replicas, epochs 0.
//   - Producer-id blocks never overlap and never repeat: the counter only grows, every
//     broker applies the same entries in the same order, and the counter is in every
//     snapshot (format 3), so this holds across restarts, snapshots and controller
//     changes. A block whose proposer gave up (ctx cancelled, leadership lost after
//     the entry committed) is simply never used.
//
// # Concurrency
//
// raft calls the FSM from one goroutine; it builds the next state and publishes it
// with an atomic store (Image() is a lock-free load). Each subscriber has its own queue
// and goroutine, so a slow subscriber delays only itself; publish never blocks. Handlers
// run concurrently: they read one image, validate against it, and propose entries;
// races between handlers are settled by Apply. Goroutines the module starts (the
// leader loop, raft-future waiters, subscribers) are stopped and waited for by
// Stop/Cleanup. Lock order: hub.mu, then subscriber.mu.
package metadata
