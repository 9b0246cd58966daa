package kconfig

import (
	"math"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// Topic is a topic's effective, typed configuration.
type Topic struct {
	// kernel.LogConfig holds what storage honours. Its CleanupPolicy is canonical:
	// "delete", "compact" or "compact,delete".
	kernel.LogConfig
	MaxMessageBytes             int64  // max.message.bytes
	MessageTimestampType        string // message.timestamp.type: CreateTime | LogAppendTime
	MessageTimestampBeforeMaxMs int64  // message.timestamp.before.max.ms (see below)
	MessageTimestampAfterMaxMs  int64  // message.timestamp.after.max.ms (see below)
	MinInsyncReplicas           int32  // min.insync.replicas
	UncleanLeaderElectionEnable bool   // unclean.leader.election.enable
	CompressionType             string // compression.type (producer = keep the producer's)

	// Levels for broker-side compression (when CompressionType is not producer).
	CompressionGzipLevel int32 // compression.gzip.level; -1 = codec default
	CompressionLz4Level  int32 // compression.lz4.level
	CompressionZstdLevel int32 // compression.zstd.level

	// MessageTimestampDifferenceMaxMs is the deprecated message.timestamp.difference.max.ms.
	// As in Kafka, it stands in for MessageTimestampBeforeMaxMs and
	// MessageTimestampAfterMaxMs where those are left at their default (no limit), so
	// the Before/After fields already account for it.
	MessageTimestampDifferenceMaxMs int64

	Preallocate                 bool // preallocate
	MessageDownconversionEnable bool // message.downconversion.enable

	// Replication throttles: "" (none), "*" (all) or "partition:broker" pairs joined by ",".
	LeaderReplicationThrottledReplicas   string // leader.replication.throttled.replicas
	FollowerReplicationThrottledReplicas string // follower.replication.throttled.replicas

	// Tiered storage configs are accepted and reported but have no effect.
	RemoteStorageEnable bool  // remote.storage.enable
	LocalRetentionMs    int64 // local.retention.ms
	LocalRetentionBytes int64 // local.retention.bytes
}

// Compact reports whether the cleanup policy includes compaction.
func (t Topic) Compact() bool { return strings.Contains(t.CleanupPolicy, "compact") }

// Delete reports whether the cleanup policy includes deletion by retention.
func (t Topic) Delete() bool { return strings.Contains(t.CleanupPolicy, "delete") }

// ResolveTopic returns the effective configuration of a topic from its overrides
// (topic-level names) and broker configs (broker-level names such as log.retention.ms,
// merged static + dynamic with MergeBroker). For each topic config the first usable
// value wins: the override, then each broker synonym in order (log.retention.ms, then
// log.retention.minutes, then log.retention.hours), each explicit value before its
// default. Values that fail to parse or validate are skipped, so they fall back to the
// next source and in the end to the default.
func ResolveTopic(overrides, broker map[string]string) Topic {
	return topicFrom(effectiveTopic(overrides, []layer{{SourceStaticBroker, broker}}))
}

func topicFrom(eff map[string]value) Topic {
	n := func(name string) int64 { return eff[name].n }
	t := Topic{
		LogConfig: kernel.LogConfig{
			SegmentBytes:       n("segment.bytes"),
			SegmentMs:          n("segment.ms"),
			SegmentJitterMs:    n("segment.jitter.ms"),
			IndexIntervalBytes: n("index.interval.bytes"),
			SegmentIndexBytes:  n("segment.index.bytes"),
			RetentionMs:        n("retention.ms"),
			RetentionBytes:     n("retention.bytes"),
			FlushMessages:      n("flush.messages"),
			FlushMs:            n("flush.ms"),
			FileDeleteDelayMs:  n("file.delete.delay.ms"),
			CleanupPolicy:      canonicalPolicy(eff["cleanup.policy"].l),

			DeleteRetentionMs:      n("delete.retention.ms"),
			MinCompactionLagMs:     n("min.compaction.lag.ms"),
			MaxCompactionLagMs:     n("max.compaction.lag.ms"),
			MinCleanableDirtyRatio: eff["min.cleanable.dirty.ratio"].f,
		},
		MaxMessageBytes:                      n("max.message.bytes"),
		MessageTimestampType:                 eff["message.timestamp.type"].s,
		MessageTimestampBeforeMaxMs:          n("message.timestamp.before.max.ms"),
		MessageTimestampAfterMaxMs:           n("message.timestamp.after.max.ms"),
		MessageTimestampDifferenceMaxMs:      n("message.timestamp.difference.max.ms"),
		MinInsyncReplicas:                    int32(n("min.insync.replicas")),
		UncleanLeaderElectionEnable:          eff["unclean.leader.election.enable"].bool(),
		CompressionType:                      eff["compression.type"].s,
		CompressionGzipLevel:                 int32(n("compression.gzip.level")),
		CompressionLz4Level:                  int32(n("compression.lz4.level")),
		CompressionZstdLevel:                 int32(n("compression.zstd.level")),
		Preallocate:                          eff["preallocate"].bool(),
		MessageDownconversionEnable:          eff["message.downconversion.enable"].bool(),
		LeaderReplicationThrottledReplicas:   eff["leader.replication.throttled.replicas"].s,
		FollowerReplicationThrottledReplicas: eff["follower.replication.throttled.replicas"].s,
		RemoteStorageEnable:                  eff["remote.storage.enable"].bool(),
		LocalRetentionMs:                     n("local.retention.ms"),
		LocalRetentionBytes:                  n("local.retention.bytes"),
	}
	if t.MessageTimestampBeforeMaxMs == math.MaxInt64 {
		t.MessageTimestampBeforeMaxMs = t.MessageTimestampDifferenceMaxMs
	}
	if t.MessageTimestampAfterMaxMs == math.MaxInt64 {
		t.MessageTimestampAfterMaxMs = t.MessageTimestampDifferenceMaxMs
	}
	return t
}

// canonicalPolicy sorts and deduplicates a validated cleanup.policy list.
func canonicalPolicy(l []string) string {
	l = slices.Clone(l)
	slices.Sort(l)
	return strings.Join(slices.Compact(l), ",")
}

// MergeBroker merges the broker config layers into the one map ResolveTopic and
// ResolveBroker take: dynNode over dynDefault over static. A dynamic value is dropped
// when the config is read-only (only the config file sets it) or the value is invalid,
// so it cannot hide a usable lower-precedence value. Unknown names are kept. The inputs
// are not modified; nil maps are fine.
func MergeBroker(static, dynDefault, dynNode map[string]string) map[string]string {
	out := make(map[string]string, len(static)+len(dynDefault)+len(dynNode))
	for k, v := range static {
		out[k] = v
	}
	for _, m := range []map[string]string{dynDefault, dynNode} {
		for k, v := range m {
			if _, _, jaas := splitListenerJAAS(k); jaas {
				continue // static only
			}
			if d := cat.brokerBy[k]; d != nil {
				if !d.dynamic {
					continue
				}
				if _, reason := d.parse(v); reason != "" {
					continue
				}
			}
			out[k] = v
		}
	}
	return out
}

// Broker is a broker's effective, typed configuration (see ResolveBroker).
type Broker struct {
	NodeID              int32    // node.id, or broker.id when node.id is unset; -1 if neither
	LogDirs             []string // log.dirs split on commas; nil when unset
	Listeners           string   // listeners
	AdvertisedListeners string   // advertised.listeners; "" when unset

	AutoCreateTopics             bool  // auto.create.topics.enable
	MaxRequestPartitionSizeLimit int32 // max.request.partition.size.limit (DescribeTopicPartitions)
	DeleteTopicEnable            bool  // delete.topic.enable
	NumPartitions                int32 // num.partitions
	DefaultReplicationFactor     int16 // default.replication.factor

	SocketRequestMaxBytes int32 // socket.request.max.bytes
	ConnectionsMaxIdleMs  int64 // connections.max.idle.ms
	MessageMaxBytes       int32 // message.max.bytes

	QueuedMaxDecompressedBytes int64 // queued.max.decompressed.bytes

	LogRetentionCheckIntervalMs int64 // log.retention.check.interval.ms
	SluiceLogOpenFilesMax       int32 // sluice.log.open.files.max (0: half of RLIMIT_NOFILE)
	SluiceDataDirReserveBytes   int64 // sluice.data.dir.reserve.bytes (each log dir's too)
	SluiceMetricsPartitions     bool  // sluice.metrics.partition.series
	ReplicaLagTimeMaxMs         int64 // replica.lag.time.max.ms

	// The log cleaner (compaction); all but LogCleanerEnable are dynamic cluster-wide.
	LogCleanerEnable              bool    // log.cleaner.enable
	LogCleanerThreads             int32   // log.cleaner.threads
	LogCleanerBackoffMs           int64   // log.cleaner.backoff.ms
	LogCleanerDedupeBufferSize    int64   // log.cleaner.dedupe.buffer.size
	LogCleanerIOBufferSize        int64   // log.cleaner.io.buffer.size
	LogCleanerIOBufferLoadFactor  float64 // log.cleaner.io.buffer.load.factor
	LogCleanerIOMaxBytesPerSecond float64 // log.cleaner.io.max.bytes.per.second; math.MaxFloat64 = no limit

	ReplicaFetchMaxBytes                     int32  // replica.fetch.max.bytes
	ReplicaFetchResponseMaxBytes             int32  // replica.fetch.response.max.bytes
	ReplicaFetchWaitMaxMs                    int32  // replica.fetch.wait.max.ms
	ReplicaFetchMinBytes                     int32  // replica.fetch.min.bytes
	ReplicaFetchBackoffMs                    int32  // replica.fetch.backoff.ms
	NumReplicaFetchers                       int32  // num.replica.fetchers
	ReplicaHighWatermarkCheckpointIntervalMs int64  // replica.high.watermark.checkpoint.interval.ms
	LogFlushOffsetCheckpointIntervalMs       int64  // log.flush.offset.checkpoint.interval.ms
	InterBrokerListenerName                  string // inter.broker.listener.name ("" = the first listener)
	AutoLeaderRebalanceEnable                bool   // auto.leader.rebalance.enable
	LeaderImbalanceCheckIntervalSeconds      int64  // leader.imbalance.check.interval.seconds
	LeaderImbalancePerBrokerPercentage       int32  // leader.imbalance.per.broker.percentage

	OffsetsTopicNumPartitions       int32 // offsets.topic.num.partitions
	OffsetsTopicReplicationFactor   int16 // offsets.topic.replication.factor
	OffsetsRetentionMs              int64 // offsets.retention.minutes, in ms
	OffsetsRetentionCheckIntervalMs int64 // offsets.retention.check.interval.ms
	OffsetsTopicSegmentBytes        int64 // offsets.topic.segment.bytes

	TransactionStateLogNumPartitions     int32 // transaction.state.log.num.partitions
	TransactionStateLogReplicationFactor int16 // transaction.state.log.replication.factor
	TransactionStateLogMinISR            int32 // transaction.state.log.min.isr
	TransactionMaxTimeoutMs              int64 // transaction.max.timeout.ms
	TransactionalIDExpirationMs          int64 // transactional.id.expiration.ms
	ProducerIDExpirationMs               int64 // producer.id.expiration.ms
	TransactionStateLogSegmentBytes      int64 // transaction.state.log.segment.bytes

	TelemetryMaxBytes int64 // telemetry.max.bytes

	GroupInitialRebalanceDelayMs      int64  // group.initial.rebalance.delay.ms
	GroupMinSessionTimeoutMs          int64  // group.min.session.timeout.ms
	GroupMaxSessionTimeoutMs          int64  // group.max.session.timeout.ms
	GroupConsumerSessionTimeoutMs     int64  // group.consumer.session.timeout.ms
	GroupConsumerHeartbeatIntervalMs  int64  // group.consumer.heartbeat.interval.ms
	GroupMaxSize                      int32  // group.max.size
	GroupConsumerMaxSize              int32  // group.consumer.max.size
	GroupConsumerMigrationPolicy      string // group.consumer.migration.policy
	GroupShareEnable                  bool   // group.share.enable
	GroupShareSessionTimeoutMs        int64  // group.share.session.timeout.ms
	GroupShareHeartbeatIntervalMs     int64  // group.share.heartbeat.interval.ms
	GroupShareMaxSize                 int32  // group.share.max.size
	GroupShareRecordLockDurationMs    int64  // group.share.record.lock.duration.ms
	GroupShareDeliveryCountLimit      int32  // group.share.delivery.count.limit
	GroupSharePartitionMaxRecordLocks int32  // group.share.partition.max.record.locks
	OffsetMetadataMaxBytes            int32  // offset.metadata.max.bytes
	QuotaWindowNum                    int32  // quota.window.num
	QuotaWindowSizeSeconds            int32  // quota.window.size.seconds
	SluiceQuotaBurstMs                int64  // sluice.quota.burst.ms; 0: Kafka's sampled throttle

	// Replication throttles (reassignments): bytes/s; math.MaxInt64 = no limit.
	LeaderReplicationThrottledRate    int64 // leader.replication.throttled.rate
	FollowerReplicationThrottledRate  int64 // follower.replication.throttled.rate
	ReplicationQuotaWindowNum         int32 // replication.quota.window.num
	ReplicationQuotaWindowSizeSeconds int32 // replication.quota.window.size.seconds

	UncleanLeaderElectionEnable bool   // unclean.leader.election.enable
	MinInsyncReplicas           int32  // min.insync.replicas
	CompressionType             string // compression.type
	LogMessageTimestampType     string // log.message.timestamp.type
	LogCleanupPolicy            string // log.cleanup.policy, canonical as in Topic

	// TopicDefaults is what a topic without overrides gets: ResolveTopic(nil, merged).
	TopicDefaults Topic
}

// ResolveBroker returns the typed broker configuration from merged broker configs (see
// MergeBroker). Like ResolveTopic, an invalid value falls back to the default.
func ResolveBroker(merged map[string]string) Broker {
	layers := []layer{{SourceStaticBroker, merged}}
	eff := effectiveBroker(layers)
	n := func(name string) int64 { return eff[name].n }
	b := Broker{
		NodeID:              int32(n("node.id")),
		Listeners:           eff["listeners"].s,
		AdvertisedListeners: eff["advertised.listeners"].s,

		AutoCreateTopics:             eff["auto.create.topics.enable"].bool(),
		MaxRequestPartitionSizeLimit: int32(n("max.request.partition.size.limit")),
		DeleteTopicEnable:            eff["delete.topic.enable"].bool(),
		NumPartitions:                int32(n("num.partitions")),
		DefaultReplicationFactor:     int16(n("default.replication.factor")),

		SocketRequestMaxBytes: int32(n("socket.request.max.bytes")),
		ConnectionsMaxIdleMs:  n("connections.max.idle.ms"),
		MessageMaxBytes:       int32(n("message.max.bytes")),

		QueuedMaxDecompressedBytes: n("queued.max.decompressed.bytes"),

		LogRetentionCheckIntervalMs: n("log.retention.check.interval.ms"),
		SluiceLogOpenFilesMax:       int32(n("sluice.log.open.files.max")),
		SluiceDataDirReserveBytes:   n("sluice.data.dir.reserve.bytes"),
		SluiceMetricsPartitions:     eff["sluice.metrics.partition.series"].bool(),
		ReplicaLagTimeMaxMs:         n("replica.lag.time.max.ms"),

		LogCleanerEnable:              eff["log.cleaner.enable"].bool(),
		LogCleanerThreads:             int32(n("log.cleaner.threads")),
		LogCleanerBackoffMs:           n("log.cleaner.backoff.ms"),
		LogCleanerDedupeBufferSize:    n("log.cleaner.dedupe.buffer.size"),
		LogCleanerIOBufferSize:        n("log.cleaner.io.buffer.size"),
		LogCleanerIOBufferLoadFactor:  eff["log.cleaner.io.buffer.load.factor"].f,
		LogCleanerIOMaxBytesPerSecond: eff["log.cleaner.io.max.bytes.per.second"].f,

		ReplicaFetchMaxBytes:                     int32(n("replica.fetch.max.bytes")),
		ReplicaFetchResponseMaxBytes:             int32(n("replica.fetch.response.max.bytes")),
		ReplicaFetchWaitMaxMs:                    int32(n("replica.fetch.wait.max.ms")),
		ReplicaFetchMinBytes:                     int32(n("replica.fetch.min.bytes")),
		ReplicaFetchBackoffMs:                    int32(n("replica.fetch.backoff.ms")),
		NumReplicaFetchers:                       int32(n("num.replica.fetchers")),
		ReplicaHighWatermarkCheckpointIntervalMs: n("replica.high.watermark.checkpoint.interval.ms"),
		LogFlushOffsetCheckpointIntervalMs:       n("log.flush.offset.checkpoint.interval.ms"),
		InterBrokerListenerName:                  eff["inter.broker.listener.name"].s,
		AutoLeaderRebalanceEnable:                eff["auto.leader.rebalance.enable"].bool(),
		LeaderImbalanceCheckIntervalSeconds:      n("leader.imbalance.check.interval.seconds"),
		LeaderImbalancePerBrokerPercentage:       int32(n("leader.imbalance.per.broker.percentage")),

		OffsetsTopicNumPartitions:       int32(n("offsets.topic.num.partitions")),
		OffsetsTopicReplicationFactor:   int16(n("offsets.topic.replication.factor")),
		OffsetsRetentionMs:              n("offsets.retention.minutes") * 60 * 1000,
		OffsetsRetentionCheckIntervalMs: n("offsets.retention.check.interval.ms"),
		OffsetsTopicSegmentBytes:        n("offsets.topic.segment.bytes"),

		TransactionStateLogNumPartitions:     int32(n("transaction.state.log.num.partitions")),
		TransactionStateLogReplicationFactor: int16(n("transaction.state.log.replication.factor")),
		TransactionStateLogMinISR:            int32(n("transaction.state.log.min.isr")),
		TransactionMaxTimeoutMs:              n("transaction.max.timeout.ms"),
		TransactionalIDExpirationMs:          n("transactional.id.expiration.ms"),
		ProducerIDExpirationMs:               n("producer.id.expiration.ms"),
		TransactionStateLogSegmentBytes:      n("transaction.state.log.segment.bytes"),

		TelemetryMaxBytes: n("telemetry.max.bytes"),

		GroupInitialRebalanceDelayMs:      n("group.initial.rebalance.delay.ms"),
		GroupMinSessionTimeoutMs:          n("group.min.session.timeout.ms"),
		GroupMaxSessionTimeoutMs:          n("group.max.session.timeout.ms"),
		GroupConsumerSessionTimeoutMs:     n("group.consumer.session.timeout.ms"),
		GroupConsumerHeartbeatIntervalMs:  n("group.consumer.heartbeat.interval.ms"),
		GroupMaxSize:                      int32(n("group.max.size")),
		GroupConsumerMaxSize:              int32(n("group.consumer.max.size")),
		GroupConsumerMigrationPolicy:      eff["group.consumer.migration.policy"].s,
		GroupShareEnable:                  eff["group.share.enable"].bool(),
		GroupShareSessionTimeoutMs:        n("group.share.session.timeout.ms"),
		GroupShareHeartbeatIntervalMs:     n("group.share.heartbeat.interval.ms"),
		GroupShareMaxSize:                 int32(n("group.share.max.size")),
		GroupShareRecordLockDurationMs:    n("group.share.record.lock.duration.ms"),
		GroupShareDeliveryCountLimit:      int32(n("group.share.delivery.count.limit")),
		GroupSharePartitionMaxRecordLocks: int32(n("group.share.partition.max.record.locks")),
		OffsetMetadataMaxBytes:            int32(n("offset.metadata.max.bytes")),
		QuotaWindowNum:                    int32(n("quota.window.num")),
		QuotaWindowSizeSeconds:            int32(n("quota.window.size.seconds")),
		SluiceQuotaBurstMs:                n("sluice.quota.burst.ms"),

		LeaderReplicationThrottledRate:    n("leader.replication.throttled.rate"),
		FollowerReplicationThrottledRate:  n("follower.replication.throttled.rate"),
		ReplicationQuotaWindowNum:         int32(n("replication.quota.window.num")),
		ReplicationQuotaWindowSizeSeconds: int32(n("replication.quota.window.size.seconds")),

		UncleanLeaderElectionEnable: eff["unclean.leader.election.enable"].bool(),
		MinInsyncReplicas:           int32(n("min.insync.replicas")),
		CompressionType:             eff["compression.type"].s,
		LogMessageTimestampType:     eff["log.message.timestamp.type"].s,
		LogCleanupPolicy:            canonicalPolicy(eff["log.cleanup.policy"].l),

		TopicDefaults: topicFrom(effectiveTopic(nil, layers)),
	}
	if b.NodeID < 0 {
		b.NodeID = int32(n("broker.id"))
	}
	if dirs, ok := eff["log.dirs"]; ok {
		for _, d := range strings.Split(dirs.s, ",") {
			if d = strings.TrimSpace(d); d != "" {
				b.LogDirs = append(b.LogDirs, d)
			}
		}
	}
	return b
}
