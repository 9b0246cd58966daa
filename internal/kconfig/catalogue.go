package kconfig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// def describes one config: the facts Kafka users rely on (name, type, default, valid
// range) and a short description of our own.
type def struct {
	name  string
	typ   Type
	dflt  *string // nil: no default (Kafka's null); the value is then unset
	check check   // nil: any value of the type
	doc   string
}

// sensitive reports whether values of d must never be shown.
func (d *def) sensitive() bool { return d.typ == TypePassword }

// parse parses and checks raw for d; it returns the reason when raw is refused.
func (d *def) parse(raw string) (value, string) {
	v, reason := parse(d.typ, raw)
	if reason == "" && d.check != nil {
		reason = d.check(v)
	}
	return v, reason
}

// invalid builds the ErrInvalidValue error for raw.
func (d *def) invalid(resource, raw, reason string) error {
	if d.sensitive() {
		raw = "[hidden]"
	}
	return &ConfigError{Err: ErrInvalidValue, Resource: resource, Name: d.name, Value: raw, Reason: reason}
}

// topicDef is a topic config and the broker configs that supply its default.
type topicDef struct {
	def
	synonyms []synonym // broker configs, highest precedence first
}

// synonym is a broker config that supplies a topic config's default.
type synonym struct {
	name  string
	scale int64 // the topic value is the broker value times scale (0 means 1)
	// negForever: a negative broker value means "no limit" and becomes -1
	// (log.retention.minutes and log.retention.hours).
	negForever bool
}

// toTopic converts a broker synonym's value to the topic config's units.
func (s synonym) toTopic(v value) value {
	if s.scale <= 1 {
		return v
	}
	n := v.n * s.scale // no overflow: scaled synonyms are INT typed
	if s.negForever && v.n < 0 {
		n = -1
	}
	return value{s: strconv.FormatInt(n, 10), n: n}
}

// brokerDef is a broker config.
type brokerDef struct {
	def
	// dynamic: can be changed at runtime, for one node or as the cluster-wide default.
	// Otherwise the config is read-only and comes only from the config file.
	dynamic bool
	// lower lists broker configs that set the same thing with lower precedence
	// (log.retention.ms: log.retention.minutes, log.retention.hours).
	lower []string
}

func ptr(s string) *string { return &s }

const (
	maxLong = "9223372036854775807"
	week    = "604800000"
)

// topicDefs is the topic catalogue, in name order.
var topicDefs = []topicDef{
	{def{"cleanup.policy", TypeList, ptr("delete"), listOf("compact", "delete"),
		"How old segments are cleaned up: delete removes segments past the retention limits, compact keeps only the latest record per key; both may be listed."},
		[]synonym{{name: "log.cleanup.policy"}}},
	{def{"compression.gzip.level", TypeInt, ptr("-1"), gzipLevel,
		"Level used when the broker compresses with gzip: 1 (fastest) to 9 (smallest), or -1 for the codec's default."},
		[]synonym{{name: "compression.gzip.level"}}},
	{def{"compression.lz4.level", TypeInt, ptr("9"), between(1, 17),
		"Level used when the broker compresses with lz4, 1 to 17."},
		[]synonym{{name: "compression.lz4.level"}}},
	{def{"compression.type", TypeString, ptr("producer"), oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		"Codec batches are stored with. producer keeps whatever codec the producer used; any other value makes the broker recompress to that codec."},
		[]synonym{{name: "compression.type"}}},
	{def{"compression.zstd.level", TypeInt, ptr("3"), between(-131072, 22),
		"Level used when the broker compresses with zstd, -131072 (fastest) to 22 (smallest)."},
		[]synonym{{name: "compression.zstd.level"}}},
	{def{"delete.retention.ms", TypeLong, ptr("86400000"), atLeast(0),
		"For compacted topics, how long a tombstone (a record with a null value) is kept after compaction so that slow consumers still see the delete."},
		[]synonym{{name: "log.cleaner.delete.retention.ms"}}},
	{def{"file.delete.delay.ms", TypeLong, ptr("60000"), atLeast(0),
		"How long a segment removed from the log waits before its files are deleted from disk. No effect in Sluice: a removed segment's files go at once, and a read in flight keeps its open files (the reason Kafka delays)."},
		[]synonym{{name: "log.segment.delete.delay.ms"}}},
	{def{"flush.messages", TypeLong, ptr(maxLong), atLeast(1),
		"Force an fsync after this many records are appended to a partition. The default leaves flushing to the operating system and relies on replication for durability."},
		[]synonym{{name: "log.flush.interval.messages"}}},
	{def{"flush.ms", TypeLong, ptr(maxLong), atLeast(0),
		"Force an fsync when the oldest unflushed record of a partition is this old. The default leaves flushing to the operating system."},
		[]synonym{{name: "log.flush.interval.ms"}, {name: "log.flush.scheduler.interval.ms"}}},
	{def{"follower.replication.throttled.replicas", TypeList, ptr(""), throttledReplicas,
		"Replicas whose follower-side replication is throttled: \"*\" for all, or partitionId:brokerId pairs."},
		nil},
	{def{"index.interval.bytes", TypeInt, ptr("4096"), atLeast(0),
		"Bytes of log appended between two entries of the offset index. Smaller values give denser indexes and more precise seeks."},
		[]synonym{{name: "log.index.interval.bytes"}}},
	{def{"leader.replication.throttled.replicas", TypeList, ptr(""), throttledReplicas,
		"Replicas whose leader-side replication is throttled: \"*\" for all, or partitionId:brokerId pairs."},
		nil},
	{def{"local.retention.bytes", TypeLong, ptr("-2"), atLeast(-2),
		"Tiered storage: bytes kept on local disk. -2 means use retention.bytes. No effect in Sluice: it has no remote tier (remote.storage.enable is refused), so all data is local."},
		[]synonym{{name: "log.local.retention.bytes"}}},
	{def{"local.retention.ms", TypeLong, ptr("-2"), atLeast(-2),
		"Tiered storage: time data is kept on local disk. -2 means use retention.ms. No effect in Sluice: it has no remote tier (remote.storage.enable is refused), so all data is local."},
		[]synonym{{name: "log.local.retention.ms"}}},
	{def{"max.compaction.lag.ms", TypeLong, ptr(maxLong), atLeast(1),
		"For compacted topics, the longest a record may stay uncompacted."},
		[]synonym{{name: "log.cleaner.max.compaction.lag.ms"}}},
	{def{"max.message.bytes", TypeInt, ptr("1048588"), atLeast(0),
		"Largest record batch (after compression) the broker accepts for this topic."},
		[]synonym{{name: "message.max.bytes"}}},
	{def{"message.downconversion.enable", TypeBoolean, ptr("true"), nil,
		"Whether fetches from old clients may be served by converting batches to an older message format. No effect in Sluice: it serves only message format 2 (Fetch v4+), as Kafka 4 does, and never converts."},
		[]synonym{{name: "log.message.downconversion.enable"}}},
	{def{"message.timestamp.after.max.ms", TypeLong, ptr(maxLong), atLeast(0),
		"With CreateTime, how far in the future (relative to the broker's clock) a batch timestamp may be before the batch is rejected."},
		[]synonym{{name: "log.message.timestamp.after.max.ms"}}},
	{def{"message.timestamp.before.max.ms", TypeLong, ptr(maxLong), atLeast(0),
		"With CreateTime, how far in the past (relative to the broker's clock) a batch timestamp may be before the batch is rejected."},
		[]synonym{{name: "log.message.timestamp.before.max.ms"}}},
	{def{"message.timestamp.difference.max.ms", TypeLong, ptr(maxLong), atLeast(0),
		"Deprecated: the largest allowed distance between a batch timestamp and the broker's clock. Used for the before/after limits that are left at their defaults."},
		[]synonym{{name: "log.message.timestamp.difference.max.ms"}}},
	{def{"message.timestamp.type", TypeString, ptr("CreateTime"), oneOf("CreateTime", "LogAppendTime"),
		"Which timestamp records carry: CreateTime keeps the producer's, LogAppendTime replaces it with the broker's clock at append."},
		[]synonym{{name: "log.message.timestamp.type"}}},
	{def{"min.cleanable.dirty.ratio", TypeDouble, ptr("0.5"), betweenFloat(0, 1),
		"For compacted topics, the share of the log that must be uncompacted before the cleaner works on it."},
		[]synonym{{name: "log.cleaner.min.cleanable.ratio"}}},
	{def{"min.compaction.lag.ms", TypeLong, ptr("0"), atLeast(0),
		"For compacted topics, the shortest time a record stays uncompacted."},
		[]synonym{{name: "log.cleaner.min.compaction.lag.ms"}}},
	{def{"min.insync.replicas", TypeInt, ptr("1"), atLeast(1),
		"With acks=all, the fewest in-sync replicas that must have a write before it is acknowledged; fewer makes produce fail with NOT_ENOUGH_REPLICAS."},
		[]synonym{{name: "min.insync.replicas"}}},
	{def{"preallocate", TypeBoolean, ptr("false"), nil,
		"Whether a new segment file is allocated at full size up front. No effect in Sluice: segment files grow as they are written (Kafka's default too)."},
		[]synonym{{name: "log.preallocate"}}},
	{def{"remote.storage.enable", TypeBoolean, ptr("false"), noTieredStorage,
		"Tiered storage switch. Sluice has no remote tier: only false is accepted (true is INVALID_CONFIG, as Kafka answers on a broker without remote.log.storage.system.enable)."},
		nil},
	{def{"retention.bytes", TypeLong, ptr("-1"), nil,
		"Per partition, the size the log may grow to before old segments are deleted (delete policy). -1 means no size limit."},
		[]synonym{{name: "log.retention.bytes"}}},
	{def{"retention.ms", TypeLong, ptr(week), atLeast(-1),
		"How long a segment is kept after its newest record before it is deleted (delete policy). -1 means no time limit."},
		[]synonym{
			{name: "log.retention.ms"},
			{name: "log.retention.minutes", scale: 60 * 1000, negForever: true},
			{name: "log.retention.hours", scale: 3600 * 1000, negForever: true},
		}},
	{def{"segment.bytes", TypeInt, ptr("1073741824"), atLeast(14),
		"Size at which the active segment is closed and a new one started."},
		[]synonym{{name: "log.segment.bytes"}}},
	{def{"segment.index.bytes", TypeInt, ptr("10485760"), atLeast(4),
		"Size preallocated for a segment's offset and time indexes; a full index also rolls the segment."},
		[]synonym{{name: "log.index.size.max.bytes"}}},
	{def{"segment.jitter.ms", TypeLong, ptr("0"), atLeast(0),
		"Largest random amount subtracted from segment.ms per segment, so that many partitions do not roll at once."},
		[]synonym{{name: "log.roll.jitter.ms"}, {name: "log.roll.jitter.hours", scale: 3600 * 1000}}},
	{def{"segment.ms", TypeLong, ptr(week), atLeast(1),
		"Age at which the active segment is rolled even if not full, so that retention and compaction can act on it."},
		[]synonym{{name: "log.roll.ms"}, {name: "log.roll.hours", scale: 3600 * 1000}}},
	{def{"unclean.leader.election.enable", TypeBoolean, ptr("false"), nil,
		"Whether a replica outside the ISR may become leader when no in-sync replica is left, trading possible data loss for availability."},
		[]synonym{{name: "unclean.leader.election.enable"}}},
}

// synonymDefs are the broker configs that supply topic defaults. Those in topic units
// accept what the topic config accepts; the hours/minutes forms are INTs.
var synonymDefs = []brokerDef{
	{def: def{"compression.type", TypeString, ptr("producer"), topicCheck("compression.type"),
		"Default compression.type of topics."}},
	{def: def{"compression.gzip.level", TypeInt, ptr("-1"), topicCheck("compression.gzip.level"),
		"Default compression.gzip.level of topics."}},
	{def: def{"compression.lz4.level", TypeInt, ptr("9"), topicCheck("compression.lz4.level"),
		"Default compression.lz4.level of topics."}},
	{def: def{"compression.zstd.level", TypeInt, ptr("3"), topicCheck("compression.zstd.level"),
		"Default compression.zstd.level of topics."}},
	{def: def{"log.cleaner.delete.retention.ms", TypeLong, ptr("86400000"), atLeast(0),
		"Default delete.retention.ms of topics."}},
	{def: def{"log.cleaner.max.compaction.lag.ms", TypeLong, ptr(maxLong), atLeast(1),
		"Default max.compaction.lag.ms of topics."}},
	{def: def{"log.cleaner.min.cleanable.ratio", TypeDouble, ptr("0.5"), betweenFloat(0, 1),
		"Default min.cleanable.dirty.ratio of topics."}},
	{def: def{"log.cleaner.min.compaction.lag.ms", TypeLong, ptr("0"), atLeast(0),
		"Default min.compaction.lag.ms of topics."}},
	{def: def{"log.cleanup.policy", TypeList, ptr("delete"), topicCheck("cleanup.policy"),
		"Default cleanup.policy of topics."}},
	{def: def{"log.flush.interval.messages", TypeLong, ptr(maxLong), atLeast(1),
		"Default flush.messages of topics."}},
	{def: def{"log.flush.interval.ms", TypeLong, nil, atLeast(0),
		"Default flush.ms of topics; when unset, log.flush.scheduler.interval.ms is used."}},
	{def: def{"log.flush.scheduler.interval.ms", TypeLong, ptr(maxLong), atLeast(0),
		"Fallback default for flush.ms when log.flush.interval.ms is unset."}},
	{def: def{"log.index.interval.bytes", TypeInt, ptr("4096"), atLeast(0),
		"Default index.interval.bytes of topics."}},
	{def: def{"log.index.size.max.bytes", TypeInt, ptr("10485760"), atLeast(4),
		"Default segment.index.bytes of topics."}},
	{def: def{"log.local.retention.bytes", TypeLong, ptr("-2"), atLeast(-2),
		"Default local.retention.bytes of topics. No effect in Sluice (see local.retention.bytes)."}},
	{def: def{"log.local.retention.ms", TypeLong, ptr("-2"), atLeast(-2),
		"Default local.retention.ms of topics. No effect in Sluice (see local.retention.ms)."}},
	{def: def{"log.message.downconversion.enable", TypeBoolean, ptr("true"), nil,
		"Default message.downconversion.enable of topics. No effect in Sluice (see message.downconversion.enable)."}},
	{def: def{"log.message.timestamp.after.max.ms", TypeLong, ptr(maxLong), atLeast(0),
		"Default message.timestamp.after.max.ms of topics."}},
	{def: def{"log.message.timestamp.before.max.ms", TypeLong, ptr(maxLong), atLeast(0),
		"Default message.timestamp.before.max.ms of topics."}},
	{def: def{"log.message.timestamp.difference.max.ms", TypeLong, ptr(maxLong), atLeast(0),
		"Default message.timestamp.difference.max.ms of topics (deprecated)."}},
	{def: def{"log.message.timestamp.type", TypeString, ptr("CreateTime"), topicCheck("message.timestamp.type"),
		"Default message.timestamp.type of topics."}},
	{def: def{"log.preallocate", TypeBoolean, ptr("false"), nil,
		"Default preallocate of topics. No effect in Sluice (see preallocate)."}},
	{def: def{"log.retention.bytes", TypeLong, ptr("-1"), nil,
		"Default retention.bytes of topics."}},
	{def: def{"log.retention.hours", TypeInt, ptr("168"), nil,
		"Default retention.ms of topics, in hours; used when log.retention.ms and log.retention.minutes are unset. Negative means no limit."}},
	{def: def{"log.retention.minutes", TypeInt, nil, nil,
		"Default retention.ms of topics, in minutes; used when log.retention.ms is unset. Negative means no limit."}},
	{def: def{"log.retention.ms", TypeLong, nil, atLeast(-1),
		"Default retention.ms of topics; takes precedence over log.retention.minutes and log.retention.hours."}},
	{def: def{"log.roll.hours", TypeInt, ptr("168"), atLeast(1),
		"Default segment.ms of topics, in hours; used when log.roll.ms is unset."}},
	{def: def{"log.roll.jitter.hours", TypeInt, ptr("0"), atLeast(0),
		"Default segment.jitter.ms of topics, in hours; used when log.roll.jitter.ms is unset."}},
	{def: def{"log.roll.jitter.ms", TypeLong, nil, atLeast(0),
		"Default segment.jitter.ms of topics; takes precedence over log.roll.jitter.hours."}},
	{def: def{"log.roll.ms", TypeLong, nil, atLeast(1),
		"Default segment.ms of topics; takes precedence over log.roll.hours."}},
	{def: def{"log.segment.bytes", TypeInt, ptr("1073741824"), atLeast(14),
		"Default segment.bytes of topics."}},
	{def: def{"log.segment.delete.delay.ms", TypeLong, ptr("60000"), atLeast(0),
		"Default file.delete.delay.ms of topics. No effect in Sluice (see file.delete.delay.ms)."}},
	{def: def{"message.max.bytes", TypeInt, ptr("1048588"), atLeast(0),
		"Default max.message.bytes of topics: the largest record batch the broker accepts."}},
	{def: def{"min.insync.replicas", TypeInt, ptr("1"), atLeast(1),
		"Default min.insync.replicas of topics."}},
	{def: def{"unclean.leader.election.enable", TypeBoolean, ptr("false"), nil,
		"Default unclean.leader.election.enable of topics."}},
}

// brokerOnlyDefs are broker configs that are not topic defaults.
//
// Deliberate differences from Kafka's defaults, so that a single node works out of the
// box: offsets.topic.replication.factor and transaction.state.log.replication.factor are
// 1 (Kafka: 3) and transaction.state.log.min.isr is 1 (Kafka: 2). A cluster sets them in
// its config file.
var brokerOnlyDefs = []brokerDef{
	{def: def{"advertised.listeners", TypeString, nil, nil,
		"Addresses given to clients in metadata, when they differ from listeners."}},
	{def: def{"auto.create.topics.enable", TypeBoolean, ptr("true"), nil,
		"Whether metadata requests for an unknown topic create it with the default settings."}},
	{def: def{"broker.id", TypeInt, ptr("-1"), nil,
		"Legacy name of node.id; used when node.id is unset."}},
	{def: def{"broker.heartbeat.interval.ms", TypeInt, ptr("2000"), atLeast(1),
		"How often a broker heartbeats to the active controller."}},
	{def: def{"broker.session.timeout.ms", TypeInt, ptr("9000"), atLeast(1),
		"How long the controller waits without a heartbeat before it fences a broker."}},
	{def: def{"connections.max.idle.ms", TypeLong, ptr("600000"), nil,
		"Idle time after which the broker closes a client connection."}},
	{def: def{"default.replication.factor", TypeInt, ptr("1"), between(1, math16),
		"Replication factor of automatically created topics and of CreateTopics requests that leave it to the broker."}},
	{def: def{"delete.topic.enable", TypeBoolean, ptr("true"), nil,
		"Whether DeleteTopics is allowed."}},
	{def: def{"group.consumer.heartbeat.interval.ms", TypeInt, ptr("5000"), atLeast(1),
		"Heartbeat interval given to members of consumer-protocol (KIP-848) groups."}},
	{def: def{"group.consumer.session.timeout.ms", TypeInt, ptr("45000"), atLeast(1),
		"Session timeout of members of consumer-protocol (KIP-848) groups."}},
	{def: def{"group.consumer.max.size", TypeInt, ptr("2147483647"), atLeast(1),
		"Most members one consumer-protocol (KIP-848) group may have."}},
	{def: def{"group.consumer.migration.policy", TypeString, ptr("bidirectional"), oneOf("disabled", "upgrade", "downgrade", "bidirectional"),
		"Whether a group moves between the classic and consumer (KIP-848) protocols while it has members: upgrade (a consumer-protocol member may join a classic group, which becomes a consumer group; its classic members stay), downgrade (new classic members may join a consumer group, which becomes a classic group when its last consumer-protocol member leaves), bidirectional (both) or disabled (neither: a group holds one protocol's members)."}},
	{def: def{"leader.replication.throttled.rate", TypeLong, ptr(maxLong), atLeast(0),
		"Bytes per second this broker, as leader, sends to followers of throttled replicas (leader.replication.throttled.replicas) that are out of the ISR; the default means no limit."}},
	{def: def{"follower.replication.throttled.rate", TypeLong, ptr(maxLong), atLeast(0),
		"Bytes per second this broker, as follower, fetches for throttled replicas (follower.replication.throttled.replicas) while it is out of their ISR; the default means no limit."}},
	{def: def{"replication.quota.window.num", TypeInt, ptr("11"), atLeast(1),
		"Samples kept of the replication throttles' rates (each replication.quota.window.size.seconds long)."}},
	{def: def{"replication.quota.window.size.seconds", TypeInt, ptr("1"), atLeast(1),
		"Time span of each sample of the replication throttles' rates."}},
	{def: def{"quota.window.num", TypeInt, ptr("11"), atLeast(1),
		"Samples kept of each client's rate for its quotas (each quota.window.size.seconds long)."}},
	{def: def{"quota.window.size.seconds", TypeInt, ptr("1"), atLeast(1),
		"Time span of each sample of a client's rate for its quotas."}},
	{def: def{"group.max.size", TypeInt, ptr("2147483647"), atLeast(1),
		"Most members one classic group may have."}},
	{def: def{"group.share.delivery.count.limit", TypeInt, ptr("5"), between(2, 10),
		"How many times a share group delivers a record before it archives it (and sends it to the group's dead-letter topic, if it has one)."}},
	{def: def{"group.share.enable", TypeBoolean, ptr("true"), nil,
		"Whether the broker serves share groups (KIP-932): ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and their admin APIs. Read at start."}},
	{def: def{"group.share.heartbeat.interval.ms", TypeInt, ptr("5000"), atLeast(1),
		"Heartbeat interval given to members of share groups."}},
	{def: def{"group.share.max.size", TypeInt, ptr("200"), between(1, 1000),
		"Most members one share group may have."}},
	{def: def{"group.share.partition.max.record.locks", TypeInt, ptr("2000"), between(100, 10000),
		"Most records of one share-partition acquired (locked for a consumer) at once."}},
	{def: def{"group.share.record.lock.duration.ms", TypeInt, ptr("30000"), between(1000, 3600000),
		"How long a share consumer holds an acquired record before it is released for redelivery."}},
	{def: def{"group.share.session.timeout.ms", TypeInt, ptr("45000"), atLeast(1),
		"Session timeout of members of share groups."}},
	{def: def{"group.initial.rebalance.delay.ms", TypeInt, ptr("3000"), nil,
		"How long the first rebalance of an empty classic group waits for more members to join."}},
	{def: def{"group.max.session.timeout.ms", TypeInt, ptr("1800000"), nil,
		"Largest session timeout a classic group member may ask for."}},
	{def: def{"group.min.session.timeout.ms", TypeInt, ptr("6000"), nil,
		"Smallest session timeout a classic group member may ask for."}},
	{def: def{"listeners", TypeString, ptr("PLAINTEXT://:9092"), nil,
		"The addresses the broker accepts connections on, as NAME://host:port, comma separated."}},
	{def: def{"log.cleaner.backoff.ms", TypeLong, ptr("15000"), atLeast(0),
		"How long a cleaner thread sleeps when no log needs cleaning."}},
	{def: def{"log.cleaner.dedupe.buffer.size", TypeLong, ptr("134217728"), nil,
		"Memory for the cleaners' offset maps (key hash to latest offset), shared by all cleaner threads; a log with more keys than fit is cleaned in several passes."}},
	{def: def{"log.cleaner.enable", TypeBoolean, ptr("true"), nil,
		"Whether the log cleaner runs; without it topics with cleanup.policy=compact, including __consumer_offsets and __transaction_state, grow without bound."}},
	{def: def{"log.cleaner.io.buffer.load.factor", TypeDouble, ptr("0.9"), nil,
		"How full the cleaner lets an offset map get before it starts a new pass."}},
	{def: def{"log.cleaner.io.buffer.size", TypeInt, ptr("524288"), atLeast(0),
		"Read and write buffer memory of the cleaners, shared by all cleaner threads. No effect in Sluice: its cleaner reads a segment through a 64 KiB buffer and holds one batch at a time; the memory that matters is the offset map (log.cleaner.dedupe.buffer.size)."}},
	{def: def{"log.cleaner.io.max.bytes.per.second", TypeDouble, ptr("1.7976931348623157E308"), nil,
		"Limit on the cleaners' combined read and write rate, in bytes per second; the default means no limit."}},
	{def: def{"log.cleaner.threads", TypeInt, ptr("1"), atLeast(0),
		"Number of background threads that clean compacted logs."}},
	{def: def{"log.dirs", TypeString, nil, nil,
		"Comma-separated directories that hold partition data (JBOD): each partition lives in one of them, a new one in the directory holding the fewest, and a failed directory takes only its own partitions offline. Default: data_dir. Read at start."}},
	{def: def{"log.retention.check.interval.ms", TypeLong, ptr("300000"), atLeast(1),
		"How often the broker looks for segments to delete under the retention limits."}},
	{def: def{"sluice.memory.limit.bytes", TypeLong, ptr("0"), atLeast(-1),
		"Soft limit on the broker process's memory, handed to the Go runtime (GOMEMLIMIT): near it the garbage collector runs more often instead of letting the heap grow. 0: 80% of the memory limit of the cgroup the broker runs in, or none outside one. -1: none. At least 64 MiB when set; the GOMEMLIMIT environment variable wins. Read at start. Sluice's own."}},
	{def: def{"sluice.log.open.files.max", TypeInt, ptr("0"), atLeast(0),
		"Segment files (.log, .index, .timeindex) the storage keeps open at most; the least recently used are closed and reopened on demand. 0: half the soft RLIMIT_NOFILE, the rest left to sockets."}},
	{def: def{"sluice.quota.burst.ms", TypeLong, ptr("1000"), atLeast(0),
		"How far ahead of its byte-rate or request quota a client may get at once, in milliseconds of its quota. With a value above 0 a client is throttled by a leaky bucket draining at its quota, so it keeps to the quota over any span and bursts at most this much; 0 throttles on the rate sampled over quota.window.num windows as Kafka does, which lets a client that was idle, or whose burst just left the window, send quota.window.num-1 windows' worth at once. Read at start. Sluice's own."}},
	{def: def{"sluice.metrics.partition.series", TypeBoolean, ptr("true"), nil,
		"Whether /metrics carries per-partition series (consumer lag by group, topic and partition). false aggregates them per topic (the lag summed, the time lag the largest), bounding the series by groups times topics. Read at start. Sluice's own."}},
	{def: def{"max.request.partition.size.limit", TypeInt, ptr("2000"), atLeast(1),
		"Most partitions one DescribeTopicPartitions answer holds; a request asking for more gets a cursor to continue from."}},
	{def: def{"node.id", TypeInt, ptr("-1"), nil,
		"This node's id in the cluster."}},
	{def: def{"num.partitions", TypeInt, ptr("1"), atLeast(1),
		"Partition count of automatically created topics and of CreateTopics requests that leave it to the broker."}},
	{def: def{"offset.metadata.max.bytes", TypeInt, ptr("4096"), atLeast(0),
		"Largest metadata string an offset commit may carry."}},
	{def: def{"offsets.retention.check.interval.ms", TypeLong, ptr("600000"), atLeast(1),
		"How often expired committed offsets are looked for."}},
	{def: def{"offsets.retention.minutes", TypeInt, ptr("10080"), atLeast(1),
		"How long the committed offsets of an empty group are kept."}},
	{def: def{"offsets.topic.num.partitions", TypeInt, ptr("50"), atLeast(1),
		"Partition count of __consumer_offsets; fixed once the topic exists."}},
	{def: def{"offsets.topic.replication.factor", TypeShort, ptr("1"), atLeast(1),
		"Replication factor of __consumer_offsets. Sluice defaults to 1 (Kafka: 3) so that a single node works; set 3 for a cluster."}},
	{def: def{"offsets.topic.segment.bytes", TypeInt, ptr("104857600"), atLeast(1),
		"segment.bytes of __consumer_offsets, kept small so that it is compacted and loaded quickly; applies when the topic is created."}},
	{def: def{"producer.id.expiration.ms", TypeInt, ptr("86400000"), atLeast(1),
		"How long the broker remembers an idempotent producer's state after its last write."}},
	{def: def{"replica.lag.time.max.ms", TypeLong, ptr("30000"), nil,
		"A follower that has not caught up with the leader for this long is removed from the ISR."}},
	{def: def{"replica.fetch.max.bytes", TypeInt, ptr("1048576"), atLeast(0),
		"Bytes a follower asks for per partition in one fetch (a larger first batch is still returned whole)."}},
	{def: def{"replica.fetch.response.max.bytes", TypeInt, ptr("10485760"), atLeast(0),
		"Bytes a follower asks for in one whole fetch response."}},
	{def: def{"replica.fetch.wait.max.ms", TypeInt, ptr("500"), atLeast(0),
		"How long a follower's fetch may wait at the leader for new records; keep it below replica.lag.time.max.ms."}},
	{def: def{"replica.fetch.min.bytes", TypeInt, ptr("1"), atLeast(1),
		"Bytes a follower's fetch waits for at the leader before it is answered."}},
	{def: def{"replica.fetch.backoff.ms", TypeInt, ptr("1000"), atLeast(0),
		"How long a follower waits after a failed fetch before it tries again."}},
	{def: def{"num.replica.fetchers", TypeInt, ptr("1"), atLeast(1),
		"Fetcher connections per source broker; partitions are spread over them."}},
	{def: def{"log.flush.offset.checkpoint.interval.ms", TypeInt, ptr("60000"), atLeast(0),
		"How often each log dir's recovery points are written to recovery-point-offset-checkpoint when only they moved (a later one costs a longer recovery after a crash, never data). Log start offsets, removals and unclean stops are written within a second (Kafka waits for log.flush.start.offset.checkpoint.interval.ms)."}},
	{def: def{"replica.high.watermark.checkpoint.interval.ms", TypeLong, ptr("5000"), atLeast(1),
		"How often each log dir's high watermarks are written to replication-offset-checkpoint."}},
	{def: def{"inter.broker.listener.name", TypeString, nil, nil,
		"The listener brokers use to reach each other (follower fetch). Unset: the first listener."}},
	{def: def{"auto.leader.rebalance.enable", TypeBoolean, ptr("true"), nil,
		"Whether the controller moves leadership back to preferred replicas when the imbalance passes leader.imbalance.per.broker.percentage."}},
	{def: def{"leader.imbalance.check.interval.seconds", TypeLong, ptr("300"), atLeast(1),
		"How often the controller checks leader imbalance."}},
	{def: def{"leader.imbalance.per.broker.percentage", TypeInt, ptr("10"), atLeast(0),
		"Share of a broker's partitions that may be led by a non-preferred replica before a rebalance."}},
	{def: def{"socket.request.max.bytes", TypeInt, ptr("104857600"), atLeast(1),
		"Largest request the broker reads; larger ones close the connection."}},
	{def: def{"queued.max.request.bytes", TypeLong, ptr("268435456"), queuedBytes,
		"Bytes of requests read and not yet answered across all connections; at the limit the broker stops reading sockets until answers free room. Kafka's default is -1 (unbounded, still allowed); Sluice's 256 MiB keeps a flood of large or stalled requests from exhausting memory. Must be at least socket.request.max.bytes."}},
	{def: def{"queued.max.decompressed.bytes", TypeLong, ptr("268435456"), atLeast(1),
		"Bytes of decompressed output that produce validation may hold at once across all requests; a batch waits for room (bounded by the request's timeout) or fails with a retriable error. Sluice's own: Kafka has no such bound."}},
	{def: def{"max.connections", TypeInt, ptr("2147483647"), atLeast(0),
		"Connections the broker holds at once over all listeners (listener.name.<l>.max.connections for one); at the limit it stops accepting until one closes."}},
	{def: def{"max.connections.per.ip", TypeInt, ptr("2147483647"), atLeast(0),
		"Connections one client address may hold; a new one over the limit is closed at once."}},
	{def: def{"max.connections.per.ip.overrides", TypeString, ptr(""), nil,
		"Per-address exceptions to max.connections.per.ip, as ip:count pairs separated by commas; Sluice takes IP addresses, not host names."}},
	{def: def{"max.connection.creation.rate", TypeInt, ptr("2147483647"), atLeast(0),
		"New connections a listener accepts per second (listener.name.<l>.max.connection.creation.rate for one); faster arrivals wait to be accepted."}},
	{def: def{"ssl.key.password", TypePassword, nil, nil,
		"Password of the private key in the key store (an encrypted PKCS#8 PEM key)."}},
	{def: def{"ssl.keystore.location", TypeString, nil, nil,
		"Path of the PEM key store: the broker's private key and certificate chain. Reloaded when the file changes."}},
	{def: def{"ssl.keystore.password", TypePassword, nil, nil,
		"Password of the key store; unused with PEM files."}},
	{def: def{"ssl.keystore.type", TypeString, ptr("PEM"), oneOf("PEM"),
		"Format of the key store; Sluice reads PEM."}},
	{def: def{"ssl.keystore.certificate.chain", TypePassword, nil, nil,
		"The broker's certificate chain in PEM, inline instead of ssl.keystore.location."}},
	{def: def{"ssl.keystore.key", TypePassword, nil, nil,
		"The broker's private key in PEM, inline instead of ssl.keystore.location."}},
	{def: def{"ssl.truststore.location", TypeString, nil, nil,
		"Path of the PEM trust store: the CA certificates that verify client (and broker) certificates. Reloaded when the file changes."}},
	{def: def{"ssl.truststore.password", TypePassword, nil, nil,
		"Password of the trust store; unused with PEM files."}},
	{def: def{"ssl.truststore.type", TypeString, ptr("PEM"), oneOf("PEM"),
		"Format of the trust store; Sluice reads PEM."}},
	{def: def{"ssl.truststore.certificates", TypePassword, nil, nil,
		"CA certificates in PEM, inline instead of ssl.truststore.location."}},
	{def: def{"ssl.client.auth", TypeString, ptr("none"), oneOf("none", "requested", "required"),
		"Whether TLS listeners ask clients for a certificate: none, requested (verified when given) or required (mTLS)."}},
	{def: def{"ssl.principal.mapping.rules", TypeString, ptr("DEFAULT"), nil,
		"Rules that map a client certificate's subject to a principal name (RULE:pattern/replacement/[LU], comma separated, then DEFAULT)."}},
	{def: def{"ssl.enabled.protocols", TypeList, ptr("TLSv1.2,TLSv1.3"), nil,
		"TLS versions the broker accepts; TLSv1.2 and TLSv1.3."}},
	{def: def{"ssl.endpoint.identification.algorithm", TypeString, ptr("https"), nil,
		"How a broker checks the certificate of a broker it connects to: https checks the host name, empty checks only the chain."}},
	{def: def{"listener.security.protocol.map", TypeString, ptr("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"), nil,
		"Security protocol of each listener, as NAME:PROTOCOL pairs; a listener not named here must be named after its protocol."}},
	{def: def{"security.inter.broker.protocol", TypeString, ptr("PLAINTEXT"), oneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
		"Security protocol brokers use between themselves when inter.broker.listener.name is unset."}},
	{def: def{"sasl.enabled.mechanisms", TypeList, ptr("SCRAM-SHA-256,SCRAM-SHA-512"), nil,
		"SASL mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. Kafka's default, GSSAPI, is not supported."}},
	{def: def{"sasl.mechanism.inter.broker.protocol", TypeString, ptr("SCRAM-SHA-512"), nil,
		"SASL mechanism brokers use to authenticate to each other on a SASL inter-broker listener."}},
	{def: def{"sasl.server.max.receive.size", TypeInt, ptr("524288"), atLeast(1),
		"Largest SASL message a client may send before it is authenticated; larger closes the connection."}},
	{def: def{"sasl.oauthbearer.jwks.endpoint.url", TypeString, nil, nil,
		"Where OAUTHBEARER's signing keys are read: a JWKS file as file:///path or a path. Reloaded when the file changes."}},
	{def: def{"sasl.oauthbearer.expected.audience", TypeList, nil, nil,
		"Audiences an OAUTHBEARER token must name one of (its aud claim); unset accepts any."}},
	{def: def{"sasl.oauthbearer.expected.issuer", TypeString, nil, nil,
		"The issuer an OAUTHBEARER token must name (its iss claim); unset accepts any."}},
	{def: def{"sasl.oauthbearer.sub.claim.name", TypeString, ptr("sub"), nil,
		"The token claim that names the principal."}},
	{def: def{"sasl.oauthbearer.scope.claim.name", TypeString, ptr("scope"), nil,
		"The token claim that holds its scopes."}},
	{def: def{"sasl.oauthbearer.clock.skew.seconds", TypeInt, ptr("30"), atLeast(0),
		"Clock difference allowed when checking a token's exp, nbf and iat."}},
	{def: def{"connections.max.reauth.ms", TypeLong, ptr("0"), atLeast(0),
		"Longest a SASL session lasts before the client must re-authenticate (KIP-368); 0 means forever."}},
	{def: def{"connection.failed.authentication.delay.ms", TypeInt, ptr("100"), atLeast(0),
		"How long the broker waits before it answers a failed authentication and closes the connection."}},
	{def: def{"super.users", TypeString, nil, nil,
		"Principals allowed every operation whatever the ACLs say, semicolon separated (User:admin;User:broker)."}},
	{def: def{"allow.everyone.if.no.acl.found", TypeBoolean, ptr("false"), nil,
		"Whether a resource no ACL matches is open to everyone (true) or to no one but super users (false)."}},
	{def: def{"telemetry.max.bytes", TypeInt, ptr("1048576"), atLeast(1),
		"Largest metrics payload a client may push (PushTelemetry, KIP-714), compressed; larger pushes answer TELEMETRY_TOO_LARGE."}},
	{def: def{"transaction.max.timeout.ms", TypeInt, ptr("900000"), atLeast(1),
		"Largest transaction timeout a producer may ask for."}},
	{def: def{"transaction.state.log.min.isr", TypeInt, ptr("1"), atLeast(1),
		"min.insync.replicas of __transaction_state. Sluice defaults to 1 (Kafka: 2)."}},
	{def: def{"transaction.state.log.num.partitions", TypeInt, ptr("50"), atLeast(1),
		"Partition count of __transaction_state; fixed once the topic exists."}},
	{def: def{"transaction.state.log.replication.factor", TypeShort, ptr("1"), atLeast(1),
		"Replication factor of __transaction_state. Sluice defaults to 1 (Kafka: 3) so that a single node works; set 3 for a cluster."}},
	{def: def{"transaction.state.log.segment.bytes", TypeInt, ptr("104857600"), atLeast(1),
		"segment.bytes of __transaction_state, kept small so that it is compacted and loaded quickly; applies when the topic is created."}},
	{def: def{"transactional.id.expiration.ms", TypeInt, ptr("604800000"), atLeast(1),
		"How long the coordinator keeps a transactional id it has not heard from."}},
	// Sluice's own: not a Kafka config (Kafka lets a full disk take the log dir offline).
	{def: def{"sluice.data.dir.reserve.bytes", TypeLong, ptr("1073741824"), atLeast(0),
		"Free space the broker keeps on its data dir's file system. Below it, produce answers KAFKA_STORAGE_ERROR and offset commits NOT_COORDINATOR, while reads, DeleteTopics and DeleteRecords keep working; writes resume by themselves when space returns. Below half of it the broker does not start. 0 turns the check off. The default covers a second of writes, the metadata log and the offsets store's files. Each log dir (log.dirs) is held to it on its own: one below it refuses produce to its own partitions (KAFKA_STORAGE_ERROR) and holds back the follower appends of its own replicas, while the other dirs take writes."}},
}

const math16 = 1<<15 - 1

// extraDynamic are broker configs that are not topic defaults but may still be changed
// at runtime (as in Kafka: the log cleaner's settings other than log.cleaner.enable are
// cluster-wide dynamic).
var extraDynamic = []string{
	"leader.replication.throttled.rate",
	"follower.replication.throttled.rate",
	"producer.id.expiration.ms",
	"log.cleaner.backoff.ms",
	"log.cleaner.dedupe.buffer.size",
	"log.cleaner.io.buffer.load.factor",
	"log.cleaner.io.buffer.size",
	"log.cleaner.io.max.bytes.per.second",
	"log.cleaner.threads",
}

// topicCheck returns the check of a topic config, for a broker synonym in the same
// units. It reads topicDefs, which is initialized first (it has no dependencies).
func topicCheck(name string) check {
	for i := range topicDefs {
		if topicDefs[i].name == name {
			return topicDefs[i].check
		}
	}
	panic("kconfig: no topic config " + name)
}

// catalogue is the immutable index built once at package initialization.
type catalogue struct {
	topics      []*topicDef // by name
	brokers     []*brokerDef
	topicByName map[string]*topicDef
	brokerBy    map[string]*brokerDef
	defaults    map[*def]value // parsed defaults of the configs that have one; shared, never modified
}

var cat = buildCatalogue()

// buildCatalogue indexes the definitions and derives which broker configs are dynamic
// and which are lower-precedence forms of others. It panics on an inconsistent table:
// that is a programmer error, caught by any test run.
func buildCatalogue() *catalogue {
	c := &catalogue{topicByName: map[string]*topicDef{}, brokerBy: map[string]*brokerDef{}, defaults: map[*def]value{}}
	for i := range topicDefs {
		d := new(topicDef)
		*d = topicDefs[i] // copies: the tables themselves are never modified
		if c.topicByName[d.name] != nil {
			panic("kconfig: duplicate topic config " + d.name)
		}
		c.topicByName[d.name] = d
		c.topics = append(c.topics, d)
	}
	for _, list := range [][]brokerDef{synonymDefs, brokerOnlyDefs} {
		for i := range list {
			d := new(brokerDef)
			*d = list[i]
			if c.brokerBy[d.name] != nil {
				panic("kconfig: duplicate broker config " + d.name)
			}
			c.brokerBy[d.name] = d
			c.brokers = append(c.brokers, d)
		}
	}
	for _, t := range c.topics {
		for i, s := range t.synonyms {
			b := c.brokerBy[s.name]
			if b == nil {
				panic(fmt.Sprintf("kconfig: synonym %s of %s is not a broker config", s.name, t.name))
			}
			// Like Kafka, only the first (most precise) synonym can be changed at runtime.
			if i == 0 {
				b.dynamic = true
			}
			for _, lower := range t.synonyms[i+1:] {
				b.lower = append(b.lower, lower.name)
			}
		}
	}
	for _, name := range extraDynamic {
		c.brokerBy[name].dynamic = true
	}
	for _, d := range c.allDefs() {
		if d.dflt == nil {
			continue
		}
		v, reason := d.parse(*d.dflt)
		if reason != "" {
			panic(fmt.Sprintf("kconfig: default %q of %s: %s", *d.dflt, d.name, reason))
		}
		c.defaults[d] = v
	}
	slices.SortFunc(c.topics, func(a, b *topicDef) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(c.brokers, func(a, b *brokerDef) int { return strings.Compare(a.name, b.name) })
	return c
}

// allDefs returns the plain definitions of every topic and broker config.
func (c *catalogue) allDefs() []*def {
	var out []*def
	for _, t := range c.topics {
		out = append(out, &t.def)
	}
	for _, b := range c.brokers {
		out = append(out, &b.def)
	}
	return out
}
