// Package metadata is the "metadata.raft" module: the cluster's metadata (brokers,
// topics, partition placement, leaders and ISRs, dynamic configs) kept in a
// hashicorp/raft log and applied on every broker to an immutable, versioned
// kernel.Image that other modules read without locks.
//
// A single-node broker is a one-voter raft quorum: the same code path as a cluster,
// with no separate "local" mode. The module also serves the admin APIs that read or
// write metadata: Metadata, CreateTopics, DeleteTopics, CreatePartitions,
// DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (topic, broker and group
// configs), DescribeCluster, ElectLeaders, AlterPartitionReassignments and
// ListPartitionReassignments. Other modules create internal topics through it
// (kernel.TopicCreator), keep their own cluster-wide records in it
// (kernel.ExtensionStore: PutExtension, Image.Extensions), and, as partition leaders,
// change ISRs through the controller (kernel.PartitionChanger: AlterPartition).
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
// # Cluster configuration
//
// Module keys (the `metadata:` section):
//
//   - voters: the static raft voter set, "id@host:port" each, the same list on every
//     broker. host:port is the voter's raft port, which also serves the controller RPC
//     (below); it must be reachable from every broker (not 0.0.0.0). Default: this
//     node alone.
//   - raft_listen: host:port this broker binds its raft port to. A voter may leave it
//     empty when its voters entry is bindable; 0.0.0.0 is fine when the voters entry
//     names the real host. Required for a non-voter (below).
//   - heartbeat_timeout, election_timeout, lease_timeout, commit_timeout: raft's
//     timings (Go durations). Zero: short ones for a single voter, otherwise raft's
//     defaults (1 s, 1 s, 500 ms) and a 10 ms commit timeout (raft's is 50 ms; it is
//     how long an idle leader waits before telling followers what committed, so it is
//     the metadata propagation delay).
//   - snapshot_threshold, snapshot_interval: see Storage (8192 entries, 2 m).
//
// Broker configs (the `configs:` section; read-only, Kafka's names and defaults):
//
//   - broker.heartbeat.interval.ms (2000): how often a broker heartbeats to the
//     controller.
//   - broker.session.timeout.ms (9000): how long the controller waits without a
//     heartbeat before it fences a broker.
//   - auto.leader.rebalance.enable (true), leader.imbalance.check.interval.seconds
//     (300), leader.imbalance.per.broker.percentage (10): the controller's automatic
//     preferred-leader rebalance (see Leader election), read from the controller's
//     static configs.
//   - unclean.leader.election.enable (false; dynamic, and a topic config): see Leader
//     election.
//
// The node id, rack and client listeners come from the broker config (node_id, rack,
// listeners), as for a single node. Three brokers on one machine (broker 1 shown; 2
// and 3 change node_id, data_dir, listener and admin ports and raft_listen, and keep
// voters identical):
//
//	node_id: 1
//	data_dir: /tmp/sluice/1
//	listeners: [{name: PLAINTEXT, address: 127.0.0.1:9092}]
//	admin_listen: 127.0.0.1:9644
//	modules:
//	  metadata: {use: raft, raft_listen: "127.0.0.1:9192",
//	             voters: ["1@127.0.0.1:9192", "2@127.0.0.1:9193", "3@127.0.0.1:9194"]}
//	  # ... storage, replication, auth as for a single node
//
// Start them in any order: Start returns once a leader is elected and this broker is
// registered, so each waits until a quorum (two of three) is up.
//
// A non-voter (a broker that follows the log but does not vote) lists the same voters,
// is not among them, and sets raft_listen to an address the voters can reach (port 0
// picks one). On Start it asks the controller to add it to the raft configuration as a
// non-voter (raft AddNonvoter; AddObserver below), receives the log, then registers.
// Its node id must not be a voter's. AddRaftVoter and RemoveRaftVoter (KIP-853,
// voters.go) change the voter set of a running log; from then on the log's raft
// configuration, not the voters setting, says who votes (docs/quorum.md).
//
// # Controller RPC
//
// Brokers talk to the active controller (the raft leader) over the raft port: raft's
// NetworkTransport runs over a StreamLayer (rpc.Mux) that reads each accepted
// connection's first byte; raft's own connections start with an rpc type (0-4), a
// controller RPC connection starts with the 4 bytes "SLC" 0x01 (first byte 'S', 0x53).
// Multiplexing keeps one port per voter (no second address to configure, advertise and
// firewall); the cost is a goroutine per new connection until its first byte arrives
// (10 s at most). When the inter-broker listener's protocol uses TLS (SSL, SASL_SSL;
// internal/interbroker) the raft port is mutual TLS: each accepted connection
// completes a TLS handshake first (on its goroutine, 10 s at most) and must present a
// certificate of the trust store's CA; raft's and the controller RPC's dialers present
// the broker's certificate (docs/cluster-security.md). After the preamble a connection
// carries Kafka frames, one request at a time:
//
//	request:  | size i32 | api_key i16 | api_version i16 | correlation_id i32 |
//	            client_id str16 | tagged fields (uvarint 0) | body |
//	response: | size i32 | correlation_id i32 | tagged fields (uvarint 0) | body |
//
// Kafka's APIs where Kafka has one, bodies encoded by kmsg: BrokerRegistration (62, v4),
// BrokerHeartbeat (63, v1), DescribeQuorum (55, v2), AddRaftVoter (80, v1),
// RemoveRaftVoter (81, v0), UpdateRaftVoter (82, v0). Sluice's own (keys from 32000,
// frozen; big endian; str16 = | len i16 | bytes |):
//
//	32000 Forward v0:     | timeout_ms i32 | count i32 | count × (len i32 | log entry) |
//	      response:       | error_code i16 | leader_id i32 | applied_index i64 | count i32 |
//	                        count × (code i16 | message str16 | index i64 | first_producer_id i64) |
//	32001 AddObserver v0: | node_id i32 | raft_address str16 |
//	      response:       | error_code i16 | leader_id i32 |
//
// A Forward entry is a metadata log entry (below). Its result code is 0 (applied and
// accepted) or the position of its error in forwardErrs (forward.go; 1 not controller,
// 2 not running, 3 timeout, 4 topic exists, 5 unknown topic, 6 unknown broker, 7 stale,
// 8 cluster id set, 9 invalid entry, 10 producer ids exhausted, 11 bad producer id
// count, 12 bad extension, 13 cancelled, 14 not the partition leader, 15 fenced leader
// epoch, 16 ineligible replica, 17 unsupported feature level, 18 broker live; -1
// other; append only), so errors.Is works on the
// forwarding broker as on the controller. Bounds: a frame is at most 64 MiB (an
// extension entry of 32 MiB is ~43 MB); a server connection idle 5 minutes is closed;
// responses are written within 30 s; a frame or message that does not parse, and an
// unknown key or version, close the connection after a log line. A new version of a
// Sluice message gets a new version number; the sender uses the newest both sides know
// (v0 only today). Clients keep up to 4 idle connections per controller for 60 s and
// check that an idle one is still open before reusing it.
//
// # Forwarding
//
// Every metadata write (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, group configs, extensions, producer-id blocks, TopicCreator)
// is planned on the broker that received it, against its image, and the resulting
// records are proposed: through raft on the controller, otherwise with Forward. The
// controller proposes them, waits until they are applied on it, and answers each
// record's outcome and the highest index; the forwarding broker then waits until its
// own image has that index, so a client reads its write from the broker it wrote
// through. NOT_CONTROLLER is answered only when no controller answered within the
// request's timeout (15 s when it has none): a broker tries the raft leader it knows,
// else the voters in turn, with backoff. A request lost after it was sent (the
// controller died) reports REQUEST_TIMED_OUT: it may have been applied.
//
// Forwarding records rather than client requests is safe because Apply re-validates
// every record on every broker against the image at its index (see Invariants): a
// record planned on a stale image is rejected everywhere alike, and the verdict goes
// back to the forwarding broker. Client authorization happens on the receiving broker,
// before planning.
//
// # Brokers
//
// Each Start picks a fresh incarnation id. Registration (BrokerRegistration) writes a
// RegisterBroker entry, unfenced; its index is the broker epoch. Every
// broker.heartbeat.interval.ms the broker sends BrokerHeartbeat with its epoch and its
// image version (its applied metadata offset); BROKER_ID_NOT_REGISTERED or
// STALE_BROKER_EPOCH makes it register again. The controller keeps each broker's
// session in memory: it fences a broker (FenceBroker) after broker.session.timeout.ms
// without a heartbeat, and unfences it (UnfenceBroker) at its next heartbeat. A new
// controller starts every session afresh, so each broker gets a whole session timeout
// to find it. A restarted broker registers again, with a new incarnation, which
// unfences it. As in Kafka, a new incarnation is refused (DUPLICATE_BROKER_REGISTRATION,
// and the broker retries) while the node's registered incarnation is unfenced and the
// current controller has heard from it within the session timeout: two processes with one node id cannot take turns, and a broker
// restarted right after a crash waits up to broker.session.timeout.ms (one that shut
// down cleanly was fenced and registers at once). When a new incarnation replaces a
// registration that was never fenced (the controller changed, and the new one had not
// heard from the old incarnation), the controller first takes the node out of every
// ISR it is not the last member of and moves its leaderships, as fencing would: its log
// may have lost what it had not written to disk (Kafka's unclean shutdown handling).
//
// Leader election: the controller keeps every partition in line with broker liveness
// (electLeaders, sessions.go). An ISR member that is not a live (registered, unfenced)
// broker leaves the ISR, unless no member is live: an offline partition keeps its ISR,
// whose members are the ones that can lead it cleanly again. A partition whose leader
// is not a live ISR member gets the first live ISR member in replica order, with leader
// epoch + 1 (PartitionChange). Without one it stays offline (leader -1; Metadata then
// answers LEADER_NOT_AVAILABLE), unless unclean.leader.election.enable (the topic's,
// else the dynamic broker default of the controller's node or the cluster, else the
// controller's static config) allows the first live replica to lead with the ISR {it},
// which loses what only the old ISR had (logged as a warning). This runs after every
// fence and unfence and on every controller tick (half the heartbeat interval, at most
// 1 s), so a broker that comes back takes the offline partitions whose ISR it is in.
// The ISR grows again only through the leader (AlterPartition, once the follower caught
// up).
//
// ElectLeaders (ALTER on CLUSTER; planned on the receiving broker, forwarded as version
// 2 PartitionChange entries that Apply validates, re-planned up to 3 times when a
// partition changed meanwhile, then REQUEST_TIMED_OUT): PREFERRED makes the first
// replica leader when it is a live ISR member (ELECTION_NOT_NEEDED when it leads,
// PREFERRED_LEADER_NOT_AVAILABLE otherwise); UNCLEAN only helps a partition without a
// live leader: the first live ISR member, else the first live replica with the ISR {it}
// (ELECTION_NOT_NEEDED when the leader is live, ELIGIBLE_LEADERS_NOT_AVAILABLE without
// a live replica), whatever unclean.leader.election.enable says. Null topics elect
// every partition and answer only those that needed an election. Every
// leader.imbalance.check.interval.seconds, when auto.leader.rebalance.enable, the
// controller does the preferred elections of every broker whose share of the
// partitions it is preferred for but does not lead exceeds
// leader.imbalance.per.broker.percentage, for those where it is a live ISR member.
//
// Controlled shutdown: Stop first heartbeats with WantShutdown; the controller fences
// the broker and moves its leaderships as above, and answers ShouldShutdown once the
// broker leads nothing. Stop waits for that at most 10 s (and its ctx); a raft leader
// then transfers raft leadership to another voter before shutting raft down. A broker
// with no live peer skips this.
//
// Reassignment (reassign.go), as Kafka's KRaft controller: AlterPartitionReassignments
// (ALTER on CLUSTER; planned on the receiving broker and forwarded like ElectLeaders)
// with a target replica list sets the replicas to the target followed by the current
// replicas it leaves out, adding = target minus current, removing = current minus
// target (PartitionImage.AddingReplicas/RemovingReplicas; the current replicas are the
// union when a reassignment is already in progress); leader and ISR stay. New replicas
// start fetching (the replication module follows every partition it is a replica of),
// and the leader adds them to the ISR once caught up (AlterPartition). The controller
// completes a reassignment once the ISR without the removing replicas is non-empty and
// holds every target replica (so every adding replica is in sync): replicas = target,
// ISR = ISR minus removing, and a leader that was removed (or is not live) gives way to
// the first live ISR member in target order; that is a reconciliation too, done on
// every scan where no partition needed a liveness repair, and at once after any
// validated PartitionChange. A target that only reorders the replicas takes effect at
// once; one equal to the current replicas changes nothing. A null target cancels: the
// adding replicas leave the replicas and the ISR (when that would empty the ISR, the
// first remaining replica becomes the ISR, refused unless unclean leader election is
// enabled for the topic), and a leader being added gives way to the first live ISR
// member. Errors: INVALID_REPLICA_ASSIGNMENT (empty, duplicates, unregistered brokers,
// an unclean cancel), NO_REASSIGNMENT_IN_PROGRESS (cancelling nothing),
// UNKNOWN_TOPIC_OR_PARTITION. ListPartitionReassignments (DESCRIBE on CLUSTER) answers
// from this broker's image: every reassignment in progress for null topics, else those
// of the named partitions (unknown ones left out).
//
// Placement of new partitions (placement.go): brokers in rack-alternating order, the
// leader of new partition p at position (start+p) mod n from a random start, followers
// walking the order from the leader, racks the partition does not use yet first. The
// leaders of one request are spread evenly; a broker registered later is used by new
// topics.
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
// new log with the configured voters (a voter only), joins as a non-voter when this
// broker is not a voter, and waits until this broker is registered: the raft leader
// first writes the cluster id (a fresh log only) and a LeaderChange entry naming itself
// controller; the broker then registers with the controller with a new incarnation id,
// its listeners and rack, and starts heartbeating. Stop does a controlled shutdown,
// then shuts raft down; Cleanup closes the stores.
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
// 10 PartitionChange, 11 LeaderChange, 12 Extension, 13 ProducerIDs, 14 Batch,
// 15 FeatureLevel, 16 UnregisterBroker. Every type is at version 1 but
// PartitionChange, which is at version 2 (below). UnregisterBroker is {"node_id": i32}
// and removes a fenced broker's registration (a live one is refused); partitions keep
// it in their replicas. JSON field
// names are frozen; ids are 22-character unpadded base64url, as Kafka prints them.
//
// Batch is the one type without a JSON payload: it holds other entries verbatim,
//
//	| 14 | 1 | count u32 | count × (len u32 | entry) |
//
// (big endian; batches do not nest). Its entries apply in order, each as if it were
// its own entry at the batch's index, to one new state: one image, one publish. An
// entry the state rejects changes nothing and the others still apply; the raft
// future's response carries each entry's result. The proposer packs the records of
// one proposal (one CreateTopics, DeleteTopics, CreatePartitions, config change,
// election round) into batches of up to 1 MiB, a lone record going as itself, so a
// request of 10,000 topics is two raft appends instead of 10,000. A broker that cannot
// read one entry of a batch cannot read the batch (as for any unreadable entry, below).
// Like PartitionChange version 2, batches are written without a feature level to gate
// them: every broker of a cluster must read type 14 before any writes one.
//
// PartitionChange is
//
//	{"topic": s, "id": id, "partition": i32, "partition_epoch": i32,
//	 "leader": i32, "isr": [i32], "replicas": [i32],                       (version 1)
//	 "expect_leader": i32, "expect_leader_epoch": i32, "validate": true,
//	 "reassignment": {"adding": [i32], "removing": [i32]}}                 (version 2)
//
// with absent fields kept as they are. A partition_epoch of -1 is not checked; any
// other must be the partition's (else the entry is stale). A new leader bumps the
// leader epoch; an applied entry bumps the partition epoch. Version 2 adds checks and
// the reassignment state, which version 1 readers must not ignore: "expect_leader" and
// "expect_leader_epoch" must be the partition's leader and leader epoch (else not the
// partition leader / fenced leader epoch); with "validate" the partition the entry
// leaves must hold the invariants (replicas non-empty and distinct, the ISR a non-empty
// distinct subset of them holding the leader unless it is -1, adding and removing
// disjoint subsets of the replicas), every broker it adds to the replicas must be
// registered (else unknown broker), and every broker it adds to the ISR, and a new
// leader, registered and unfenced (else ineligible replica); an ISR equal to the
// current one as a set keeps the current one, and a validated entry that changes
// nothing is accepted without a new partition epoch. "reassignment" replaces the adding
// and removing replicas (both empty: no reassignment in progress). An entry is written
// at version 2 only when it sets a version 2 field, so the controller's own elections
// stay readable by version 1 brokers; a version 1 entry is read without version 2
// fields whatever its payload holds.
//
// FeatureLevel (features.go, KIP-584) is
//
//	{"name": s, "level": i16}
//
// and finalizes a feature at a level; level 0 takes it out of Image.Features. Apply
// refuses an empty name or one over 255 bytes, a negative level, and a level above 0
// that a registered broker which listed its features does not support. RegisterBroker
// carries that list as an optional "features": {name: [min, max]} (older readers
// ignore it; a broker without it predates feature levels and is not asked). The
// controller writes each supported feature's default level when the log has no
// metadata.version (a new cluster, or one older than feature levels), UpdateFeatures
// writes the rest, and a registration whose features do not cover every finalized level
// is refused (UNSUPPORTED_VERSION; the broker does not start).
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
// largest int64 is rejected. A broker that is not the controller forwards the entry and
// reads its block from the Forward response.
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
// every broker can read it. A broker that meets an entry it cannot read logs an error
// and keeps its image unchanged for that entry. PartitionChange version 2 is the first
// second version, and there is no feature level in the log yet to gate it: entries that
// need it (AlterPartition, ElectLeaders, reassignments) are written whenever asked for,
// and the rest stay version 1 (a versionedRecord names the oldest version that holds
// it). So every broker of a cluster must run code that reads version 2 before leaders
// change ISRs. metadata.version (features.go) is now in the log to gate the next new
// version: write it only once the finalized metadata.version says every broker reads
// it.
//
// Snapshots serialize the whole state: | format u8 | JSON | with brokers sorted by id
// and topics by name, so equal states give equal bytes. Format 1 has no extensions;
// format 2 adds "extensions" (namespace -> key -> base64 value); format 3 adds
// "next_producer_id" (the first unallocated producer id) to format 2; format 4 adds
// each partition's "adding" and "removing" replicas (omitted when empty) to format 3;
// format 5 adds "features" (the finalized levels) and each broker's "features" (its
// supported ranges) to format 4. Each snapshot is written in the oldest format that
// holds its state (5 once a feature is finalized or a broker listed its features, else
// 4 while a reassignment is in progress, else 3 once an id was allocated, else 2 when
// there are extensions, else 1), so older brokers read it while they can, and refuse it, rather
// than silently drop extensions, reset the producer id counter or forget a
// reassignment or the feature levels, once they cannot. All five formats load; formats
// 1 and 2 give a counter of 0, which is right: they predate ProducerIDs entries, so
// nothing was allocated before them; formats 1 to 3 give no reassignment and 1 to 4 no
// feature levels, which predate them too.
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
//   - Only the raft leader proposes; other brokers forward records (never client
//     requests) to it, and Apply re-validates each record on every broker.
//   - FenceBroker and UnfenceBroker name the registration epoch they are about, so a
//     decision about an old registration never touches a newer one.
//   - A partition's leader changes only through PartitionChange entries checked against
//     the partition epoch the controller saw; a raced change is rejected and redone on
//     the next controller tick.
//   - A leader's ISR change (AlterPartition) is checked by Apply against the leader, the
//     leader epoch and the partition epoch the leader saw, and against the partition
//     invariants, so a change planned on a stale image is refused on every broker.
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
// leader loop, the controller loop, the heartbeat loop, raft-future waiters,
// subscribers, the raft port's accept loop and its RPC connections) are stopped and
// waited for by Stop/Cleanup. Lock order (DESIGN.md): groupConfigsMu, then hub.mu,
// then subscriber.mu; node.mu, controller.mu, rpc.Client.mu and rpc.Mux.mu are leaves.
package metadata
