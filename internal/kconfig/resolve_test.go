package kconfig

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

const (
	hourMs = 3600 * 1000
	weekMs = 7 * 24 * hourMs
)

func TestResolveTopicDefaults(t *testing.T) {
	want := Topic{
		LogConfig: kernel.LogConfig{
			SegmentBytes:       1 << 30,
			SegmentMs:          weekMs,
			SegmentJitterMs:    0,
			IndexIntervalBytes: 4096,
			SegmentIndexBytes:  10 << 20,
			RetentionMs:        weekMs,
			RetentionBytes:     -1,
			FlushMessages:      math.MaxInt64,
			FlushMs:            math.MaxInt64,
			FileDeleteDelayMs:  60000,
			CleanupPolicy:      "delete",

			DeleteRetentionMs:      86400000,
			MinCompactionLagMs:     0,
			MaxCompactionLagMs:     math.MaxInt64,
			MinCleanableDirtyRatio: 0.5,
		},
		MaxMessageBytes:                 1048588,
		MessageTimestampType:            "CreateTime",
		MessageTimestampBeforeMaxMs:     math.MaxInt64,
		MessageTimestampAfterMaxMs:      math.MaxInt64,
		MessageTimestampDifferenceMaxMs: math.MaxInt64,
		MinInsyncReplicas:               1,
		UncleanLeaderElectionEnable:     false,
		CompressionType:                 "producer",
		CompressionGzipLevel:            -1,
		CompressionLz4Level:             9,
		CompressionZstdLevel:            3,
		Preallocate:                     false,
		MessageDownconversionEnable:     true,
		RemoteStorageEnable:             false,
		LocalRetentionMs:                -2,
		LocalRetentionBytes:             -2,
	}
	for _, tc := range []struct {
		name      string
		overrides map[string]string
		broker    map[string]string
	}{
		{"nil maps", nil, nil},
		{"empty maps", map[string]string{}, map[string]string{}},
		{"unknown names ignored", map[string]string{"bogus": "1"}, map[string]string{"retention.ms": "5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ResolveTopic(tc.overrides, tc.broker); !reflect.DeepEqual(got, want) {
				t.Errorf("ResolveTopic =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestResolveTopicOverrides sets each topic config as an override and as its broker
// synonym, and checks the typed field.
func TestResolveTopicOverrides(t *testing.T) {
	tests := []struct {
		config string
		value  string
		field  func(Topic) any
		want   any
	}{
		{"segment.bytes", "1048576", func(t Topic) any { return t.SegmentBytes }, int64(1048576)},
		{"segment.ms", "1000", func(t Topic) any { return t.SegmentMs }, int64(1000)},
		{"segment.jitter.ms", "50", func(t Topic) any { return t.SegmentJitterMs }, int64(50)},
		{"index.interval.bytes", "100", func(t Topic) any { return t.IndexIntervalBytes }, int64(100)},
		{"segment.index.bytes", "4096", func(t Topic) any { return t.SegmentIndexBytes }, int64(4096)},
		{"retention.ms", "-1", func(t Topic) any { return t.RetentionMs }, int64(-1)},
		{"retention.bytes", "1000000", func(t Topic) any { return t.RetentionBytes }, int64(1000000)},
		{"flush.messages", "1", func(t Topic) any { return t.FlushMessages }, int64(1)},
		{"flush.ms", "10", func(t Topic) any { return t.FlushMs }, int64(10)},
		{"file.delete.delay.ms", "0", func(t Topic) any { return t.FileDeleteDelayMs }, int64(0)},
		{"cleanup.policy", "compact", func(t Topic) any { return t.CleanupPolicy }, "compact"},
		{"max.message.bytes", "2000000", func(t Topic) any { return t.MaxMessageBytes }, int64(2000000)},
		{"message.timestamp.type", "LogAppendTime", func(t Topic) any { return t.MessageTimestampType }, "LogAppendTime"},
		{"message.timestamp.before.max.ms", "100", func(t Topic) any { return t.MessageTimestampBeforeMaxMs }, int64(100)},
		{"message.timestamp.after.max.ms", "200", func(t Topic) any { return t.MessageTimestampAfterMaxMs }, int64(200)},
		{"message.timestamp.difference.max.ms", "300", func(t Topic) any { return t.MessageTimestampDifferenceMaxMs }, int64(300)},
		{"min.insync.replicas", "2", func(t Topic) any { return t.MinInsyncReplicas }, int32(2)},
		{"unclean.leader.election.enable", "true", func(t Topic) any { return t.UncleanLeaderElectionEnable }, true},
		{"compression.type", "zstd", func(t Topic) any { return t.CompressionType }, "zstd"},
		{"compression.gzip.level", "9", func(t Topic) any { return t.CompressionGzipLevel }, int32(9)},
		{"compression.lz4.level", "17", func(t Topic) any { return t.CompressionLz4Level }, int32(17)},
		{"compression.zstd.level", "-5", func(t Topic) any { return t.CompressionZstdLevel }, int32(-5)},
		{"delete.retention.ms", "5", func(t Topic) any { return t.DeleteRetentionMs }, int64(5)},
		{"min.compaction.lag.ms", "6", func(t Topic) any { return t.MinCompactionLagMs }, int64(6)},
		{"max.compaction.lag.ms", "7", func(t Topic) any { return t.MaxCompactionLagMs }, int64(7)},
		{"min.cleanable.dirty.ratio", "0.1", func(t Topic) any { return t.MinCleanableDirtyRatio }, 0.1},
		{"preallocate", "true", func(t Topic) any { return t.Preallocate }, true},
		{"message.downconversion.enable", "false", func(t Topic) any { return t.MessageDownconversionEnable }, false},
		{"leader.replication.throttled.replicas", "0:1, 1:2", func(t Topic) any { return t.LeaderReplicationThrottledReplicas }, "0:1,1:2"},
		{"follower.replication.throttled.replicas", "*", func(t Topic) any { return t.FollowerReplicationThrottledReplicas }, "*"},
		// Only false is valid (no remote tier): a stored true resolves to the default.
		{"remote.storage.enable", "true", func(t Topic) any { return t.RemoteStorageEnable }, false},
		{"local.retention.ms", "1000", func(t Topic) any { return t.LocalRetentionMs }, int64(1000)},
		{"local.retention.bytes", "2000", func(t Topic) any { return t.LocalRetentionBytes }, int64(2000)},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.config] = true
		t.Run(tc.config, func(t *testing.T) {
			got := tc.field(ResolveTopic(map[string]string{tc.config: tc.value}, nil))
			if got != tc.want {
				t.Errorf("override: got %v (%T), want %v (%T)", got, got, tc.want, tc.want)
			}
			d := cat.topicByName[tc.config]
			if len(d.synonyms) == 0 {
				return
			}
			broker := map[string]string{d.synonyms[0].name: tc.value}
			if got := tc.field(ResolveTopic(nil, broker)); got != tc.want {
				t.Errorf("broker %s: got %v, want %v", d.synonyms[0].name, got, tc.want)
			}
		})
	}
	for _, name := range TopicConfigNames() {
		if !covered[name] {
			t.Errorf("no override test for %s", name)
		}
	}
}

func TestResolveTopicPrecedence(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		broker    map[string]string
		field     func(Topic) int64
		want      int64
	}{
		{"retention: override beats broker", map[string]string{"retention.ms": "1000"},
			map[string]string{"log.retention.ms": "2000"}, retention, 1000},
		{"retention: log.retention.ms beats minutes and hours", nil,
			map[string]string{"log.retention.ms": "2000", "log.retention.minutes": "3", "log.retention.hours": "4"}, retention, 2000},
		{"retention: minutes beat hours", nil,
			map[string]string{"log.retention.minutes": "3", "log.retention.hours": "4"}, retention, 3 * 60000},
		{"retention: hours", nil, map[string]string{"log.retention.hours": "4"}, retention, 4 * hourMs},
		{"retention: negative hours mean forever", nil, map[string]string{"log.retention.hours": "-5"}, retention, -1},
		{"retention: negative minutes mean forever", nil, map[string]string{"log.retention.minutes": "-1"}, retention, -1},
		{"retention: big hours do not overflow", nil, map[string]string{"log.retention.hours": "2147483647"}, retention, 2147483647 * hourMs},
		{"retention: log.retention.ms -1", nil, map[string]string{"log.retention.ms": "-1", "log.retention.hours": "1"}, retention, -1},
		{"retention: invalid override falls to broker", map[string]string{"retention.ms": "-7"},
			map[string]string{"log.retention.minutes": "2"}, retention, 2 * 60000},
		{"retention: invalid log.retention.ms falls to minutes", nil,
			map[string]string{"log.retention.ms": "soon", "log.retention.minutes": "2"}, retention, 2 * 60000},
		{"retention: out-of-range log.retention.ms falls to hours", nil,
			map[string]string{"log.retention.ms": "-3", "log.retention.hours": "2"}, retention, 2 * hourMs},
		{"retention: all invalid falls to default", map[string]string{"retention.ms": "x"},
			map[string]string{"log.retention.ms": "y", "log.retention.minutes": "z", "log.retention.hours": "1.5"}, retention, weekMs},
		{"segment.ms: log.roll.ms beats hours", nil,
			map[string]string{"log.roll.ms": "5000", "log.roll.hours": "1"}, segmentMs, 5000},
		{"segment.ms: log.roll.hours", nil, map[string]string{"log.roll.hours": "2"}, segmentMs, 2 * hourMs},
		{"segment.ms: log.roll.hours 0 invalid", nil, map[string]string{"log.roll.hours": "0"}, segmentMs, weekMs},
		{"segment.ms: override beats roll", map[string]string{"segment.ms": "9"},
			map[string]string{"log.roll.ms": "5000"}, segmentMs, 9},
		{"segment.jitter.ms: hours", nil, map[string]string{"log.roll.jitter.hours": "1"}, jitter, hourMs},
		{"segment.jitter.ms: ms beats hours", nil,
			map[string]string{"log.roll.jitter.ms": "10", "log.roll.jitter.hours": "1"}, jitter, 10},
		{"flush.ms: interval beats scheduler", nil,
			map[string]string{"log.flush.interval.ms": "10", "log.flush.scheduler.interval.ms": "20"}, flushMs, 10},
		{"flush.ms: scheduler when interval unset", nil,
			map[string]string{"log.flush.scheduler.interval.ms": "20"}, flushMs, 20},
		{"segment.bytes from broker", nil, map[string]string{"log.segment.bytes": "1048576"},
			func(t Topic) int64 { return t.SegmentBytes }, 1048576},
		{"segment.bytes below 14 falls back", nil, map[string]string{"log.segment.bytes": "13"},
			func(t Topic) int64 { return t.SegmentBytes }, 1 << 30},
		{"max.message.bytes from message.max.bytes", nil, map[string]string{"message.max.bytes": "500"},
			func(t Topic) int64 { return t.MaxMessageBytes }, 500},
		{"min.insync.replicas override beats broker", map[string]string{"min.insync.replicas": "3"},
			map[string]string{"min.insync.replicas": "2"}, func(t Topic) int64 { return int64(t.MinInsyncReplicas) }, 3},
		{"timestamp before falls back to difference", map[string]string{"message.timestamp.difference.max.ms": "1000"}, nil,
			func(t Topic) int64 { return t.MessageTimestampBeforeMaxMs }, 1000},
		{"timestamp after falls back to difference", nil, map[string]string{"log.message.timestamp.difference.max.ms": "1000"},
			func(t Topic) int64 { return t.MessageTimestampAfterMaxMs }, 1000},
		{"timestamp explicit before beats difference", map[string]string{"message.timestamp.difference.max.ms": "1000",
			"message.timestamp.before.max.ms": "5"}, nil, func(t Topic) int64 { return t.MessageTimestampBeforeMaxMs }, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.field(ResolveTopic(tc.overrides, tc.broker)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func retention(t Topic) int64 { return t.RetentionMs }
func segmentMs(t Topic) int64 { return t.SegmentMs }
func jitter(t Topic) int64    { return t.SegmentJitterMs }
func flushMs(t Topic) int64   { return t.FlushMs }

func TestResolveTopicStringConfigs(t *testing.T) {
	tests := []struct {
		name          string
		overrides     map[string]string
		broker        map[string]string
		policy        string
		compact, del  bool
		timestampType string
		compression   string
	}{
		{"defaults", nil, nil, "delete", false, true, "CreateTime", "producer"},
		{"broker defaults", nil, map[string]string{"log.cleanup.policy": "compact", "log.message.timestamp.type": "LogAppendTime",
			"compression.type": "gzip"}, "compact", true, false, "LogAppendTime", "gzip"},
		{"policy canonical order", map[string]string{"cleanup.policy": "delete , compact"}, nil, "compact,delete", true, true, "CreateTime", "producer"},
		{"policy deduplicated", map[string]string{"cleanup.policy": "compact,compact"}, nil, "compact", true, false, "CreateTime", "producer"},
		{"empty policy falls back", map[string]string{"cleanup.policy": ""}, map[string]string{"log.cleanup.policy": "compact"}, "compact", true, false, "CreateTime", "producer"},
		{"override beats broker", map[string]string{"compression.type": "lz4", "message.timestamp.type": "CreateTime"},
			map[string]string{"compression.type": "gzip", "log.message.timestamp.type": "LogAppendTime"}, "delete", false, true, "CreateTime", "lz4"},
		{"invalid strings fall back", map[string]string{"compression.type": "brotli", "message.timestamp.type": "Now"},
			nil, "delete", false, true, "CreateTime", "producer"},
		{"trimmed", map[string]string{"compression.type": " snappy "}, nil, "delete", false, true, "CreateTime", "snappy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ResolveTopic(tc.overrides, tc.broker)
			if got.CleanupPolicy != tc.policy || got.Compact() != tc.compact || got.Delete() != tc.del {
				t.Errorf("policy = %q compact=%v delete=%v, want %q %v %v", got.CleanupPolicy, got.Compact(), got.Delete(), tc.policy, tc.compact, tc.del)
			}
			if got.MessageTimestampType != tc.timestampType {
				t.Errorf("timestamp type = %q, want %q", got.MessageTimestampType, tc.timestampType)
			}
			if got.CompressionType != tc.compression {
				t.Errorf("compression = %q, want %q", got.CompressionType, tc.compression)
			}
		})
	}
}

func TestMergeBroker(t *testing.T) {
	tests := []struct {
		name                        string
		static, dynDefault, dynNode map[string]string
		want                        map[string]string
	}{
		{"all nil", nil, nil, nil, map[string]string{}},
		{"static only", map[string]string{"num.partitions": "3"}, nil, nil, map[string]string{"num.partitions": "3"}},
		{"node over default over static",
			map[string]string{"log.retention.ms": "1", "message.max.bytes": "10", "min.insync.replicas": "2"},
			map[string]string{"log.retention.ms": "2", "message.max.bytes": "20"},
			map[string]string{"log.retention.ms": "3"},
			map[string]string{"log.retention.ms": "3", "message.max.bytes": "20", "min.insync.replicas": "2"}},
		{"dynamic read-only dropped",
			map[string]string{"num.partitions": "3"},
			map[string]string{"num.partitions": "5", "log.retention.hours": "1"},
			map[string]string{"auto.create.topics.enable": "false"},
			map[string]string{"num.partitions": "3"}},
		{"invalid dynamic does not hide lower value",
			map[string]string{"log.segment.bytes": "1000"},
			map[string]string{"log.segment.bytes": "2000"},
			map[string]string{"log.segment.bytes": "5"},
			map[string]string{"log.segment.bytes": "2000"}},
		{"invalid static kept (resolution skips it)",
			map[string]string{"log.segment.bytes": "5"}, nil, nil,
			map[string]string{"log.segment.bytes": "5"}},
		{"unknown dynamic kept", nil, map[string]string{"x.y": "1"}, nil, map[string]string{"x.y": "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := []map[string]string{maps.Clone(tc.static), maps.Clone(tc.dynDefault), maps.Clone(tc.dynNode)}
			got := MergeBroker(tc.static, tc.dynDefault, tc.dynNode)
			if !maps.Equal(got, tc.want) {
				t.Errorf("MergeBroker = %v, want %v", got, tc.want)
			}
			after := []map[string]string{tc.static, tc.dynDefault, tc.dynNode}
			for i := range before {
				if !maps.Equal(before[i], after[i]) {
					t.Errorf("input %d modified: %v -> %v", i, before[i], after[i])
				}
			}
		})
	}
}

func TestResolveBrokerDefaults(t *testing.T) {
	got := ResolveBroker(nil)
	want := Broker{
		NodeID:                                   -1,
		Listeners:                                "PLAINTEXT://:9092",
		AutoCreateTopics:                         true,
		MaxRequestPartitionSizeLimit:             2000,
		DeleteTopicEnable:                        true,
		NumPartitions:                            1,
		DefaultReplicationFactor:                 1,
		SocketRequestMaxBytes:                    104857600,
		ConnectionsMaxIdleMs:                     600000,
		MessageMaxBytes:                          1048588,
		QueuedMaxDecompressedBytes:               256 << 20,
		LogRetentionCheckIntervalMs:              300000,
		SluiceDataDirReserveBytes:                1 << 30,
		SluiceMetricsPartitions:                  true,
		ReplicaLagTimeMaxMs:                      30000,
		LogCleanerEnable:                         true,
		LogCleanerThreads:                        1,
		LogCleanerBackoffMs:                      15000,
		LogCleanerDedupeBufferSize:               134217728,
		LogCleanerIOBufferSize:                   524288,
		LogCleanerIOBufferLoadFactor:             0.9,
		LogCleanerIOMaxBytesPerSecond:            math.MaxFloat64,
		ReplicaFetchMaxBytes:                     1048576,
		ReplicaFetchResponseMaxBytes:             10485760,
		ReplicaFetchWaitMaxMs:                    500,
		ReplicaFetchMinBytes:                     1,
		ReplicaFetchBackoffMs:                    1000,
		NumReplicaFetchers:                       1,
		ReplicaHighWatermarkCheckpointIntervalMs: 5000,
		LogFlushOffsetCheckpointIntervalMs:       60000,
		AutoLeaderRebalanceEnable:                true,
		LeaderImbalanceCheckIntervalSeconds:      300,
		LeaderImbalancePerBrokerPercentage:       10,
		OffsetsTopicNumPartitions:                50,
		OffsetsTopicReplicationFactor:            1,
		OffsetsRetentionMs:                       10080 * 60000,
		OffsetsRetentionCheckIntervalMs:          600000,
		OffsetsTopicSegmentBytes:                 104857600,
		TransactionStateLogNumPartitions:         50,
		TransactionStateLogReplicationFactor:     1,
		TransactionStateLogMinISR:                1,
		TransactionMaxTimeoutMs:                  900000,
		TransactionalIDExpirationMs:              604800000,
		ProducerIDExpirationMs:                   86400000,
		TransactionStateLogSegmentBytes:          104857600,
		TelemetryMaxBytes:                        1048576,
		GroupInitialRebalanceDelayMs:             3000,
		GroupMinSessionTimeoutMs:                 6000,
		GroupMaxSessionTimeoutMs:                 1800000,
		GroupConsumerSessionTimeoutMs:            45000,
		GroupConsumerHeartbeatIntervalMs:         5000,
		GroupMaxSize:                             2147483647,
		GroupConsumerMaxSize:                     2147483647,
		GroupConsumerMigrationPolicy:             "bidirectional",
		GroupShareEnable:                         true,
		GroupShareSessionTimeoutMs:               45000,
		GroupShareHeartbeatIntervalMs:            5000,
		GroupShareMaxSize:                        200,
		GroupShareRecordLockDurationMs:           30000,
		GroupShareDeliveryCountLimit:             5,
		GroupSharePartitionMaxRecordLocks:        2000,
		OffsetMetadataMaxBytes:                   4096,
		QuotaWindowNum:                           11,
		QuotaWindowSizeSeconds:                   1,
		SluiceQuotaBurstMs:                       1000,
		LeaderReplicationThrottledRate:           math.MaxInt64,
		FollowerReplicationThrottledRate:         math.MaxInt64,
		ReplicationQuotaWindowNum:                11,
		ReplicationQuotaWindowSizeSeconds:        1,
		MinInsyncReplicas:                        1,
		CompressionType:                          "producer",
		LogMessageTimestampType:                  "CreateTime",
		LogCleanupPolicy:                         "delete",
		TopicDefaults:                            ResolveTopic(nil, nil),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ResolveBroker(nil) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestResolveBroker(t *testing.T) {
	tests := []struct {
		name   string
		merged map[string]string
		field  func(Broker) any
		want   any
	}{
		{"node.id", map[string]string{"node.id": "3", "broker.id": "4"}, func(b Broker) any { return b.NodeID }, int32(3)},
		{"broker.id when node.id unset", map[string]string{"broker.id": "4"}, func(b Broker) any { return b.NodeID }, int32(4)},
		{"log.dirs split", map[string]string{"log.dirs": "/a, /b,,"}, func(b Broker) any { return b.LogDirs }, []string{"/a", "/b"}},
		{"listeners", map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"}, func(b Broker) any { return b.Listeners }, "PLAINTEXT://127.0.0.1:0"},
		{"advertised.listeners", map[string]string{"advertised.listeners": "PLAINTEXT://h:1"}, func(b Broker) any { return b.AdvertisedListeners }, "PLAINTEXT://h:1"},
		{"auto.create.topics.enable", map[string]string{"auto.create.topics.enable": "false"}, func(b Broker) any { return b.AutoCreateTopics }, false},
		{"delete.topic.enable", map[string]string{"delete.topic.enable": "false"}, func(b Broker) any { return b.DeleteTopicEnable }, false},
		{"num.partitions", map[string]string{"num.partitions": "6"}, func(b Broker) any { return b.NumPartitions }, int32(6)},
		{"num.partitions invalid", map[string]string{"num.partitions": "0"}, func(b Broker) any { return b.NumPartitions }, int32(1)},
		{"default.replication.factor", map[string]string{"default.replication.factor": "3"}, func(b Broker) any { return b.DefaultReplicationFactor }, int16(3)},
		{"default.replication.factor too big", map[string]string{"default.replication.factor": "70000"}, func(b Broker) any { return b.DefaultReplicationFactor }, int16(1)},
		{"socket.request.max.bytes", map[string]string{"socket.request.max.bytes": "1000"}, func(b Broker) any { return b.SocketRequestMaxBytes }, int32(1000)},
		{"connections.max.idle.ms", map[string]string{"connections.max.idle.ms": "5"}, func(b Broker) any { return b.ConnectionsMaxIdleMs }, int64(5)},
		{"message.max.bytes", map[string]string{"message.max.bytes": "5000"}, func(b Broker) any { return b.MessageMaxBytes }, int32(5000)},
		{"log.retention.check.interval.ms", map[string]string{"log.retention.check.interval.ms": "10"}, func(b Broker) any { return b.LogRetentionCheckIntervalMs }, int64(10)},
		{"replica.lag.time.max.ms", map[string]string{"replica.lag.time.max.ms": "10"}, func(b Broker) any { return b.ReplicaLagTimeMaxMs }, int64(10)},
		{"offsets.topic.num.partitions", map[string]string{"offsets.topic.num.partitions": "3"}, func(b Broker) any { return b.OffsetsTopicNumPartitions }, int32(3)},
		{"offsets.topic.replication.factor", map[string]string{"offsets.topic.replication.factor": "3"}, func(b Broker) any { return b.OffsetsTopicReplicationFactor }, int16(3)},
		{"offsets.retention.minutes", map[string]string{"offsets.retention.minutes": "2"}, func(b Broker) any { return b.OffsetsRetentionMs }, int64(120000)},
		{"offsets.retention.check.interval.ms", map[string]string{"offsets.retention.check.interval.ms": "2"}, func(b Broker) any { return b.OffsetsRetentionCheckIntervalMs }, int64(2)},
		{"transaction.state.log.num.partitions", map[string]string{"transaction.state.log.num.partitions": "4"}, func(b Broker) any { return b.TransactionStateLogNumPartitions }, int32(4)},
		{"transaction.state.log.replication.factor", map[string]string{"transaction.state.log.replication.factor": "3"}, func(b Broker) any { return b.TransactionStateLogReplicationFactor }, int16(3)},
		{"transaction.state.log.min.isr", map[string]string{"transaction.state.log.min.isr": "2"}, func(b Broker) any { return b.TransactionStateLogMinISR }, int32(2)},
		{"transaction.max.timeout.ms", map[string]string{"transaction.max.timeout.ms": "2"}, func(b Broker) any { return b.TransactionMaxTimeoutMs }, int64(2)},
		{"transactional.id.expiration.ms", map[string]string{"transactional.id.expiration.ms": "2"}, func(b Broker) any { return b.TransactionalIDExpirationMs }, int64(2)},
		{"producer.id.expiration.ms", map[string]string{"producer.id.expiration.ms": "2"}, func(b Broker) any { return b.ProducerIDExpirationMs }, int64(2)},
		{"log.cleaner.enable", map[string]string{"log.cleaner.enable": "false"}, func(b Broker) any { return b.LogCleanerEnable }, false},
		{"log.cleaner.threads", map[string]string{"log.cleaner.threads": "4"}, func(b Broker) any { return b.LogCleanerThreads }, int32(4)},
		{"log.cleaner.threads negative", map[string]string{"log.cleaner.threads": "-1"}, func(b Broker) any { return b.LogCleanerThreads }, int32(1)},
		{"log.cleaner.backoff.ms", map[string]string{"log.cleaner.backoff.ms": "10"}, func(b Broker) any { return b.LogCleanerBackoffMs }, int64(10)},
		{"log.cleaner.backoff.ms negative", map[string]string{"log.cleaner.backoff.ms": "-1"}, func(b Broker) any { return b.LogCleanerBackoffMs }, int64(15000)},
		{"log.cleaner.dedupe.buffer.size", map[string]string{"log.cleaner.dedupe.buffer.size": "1048576"}, func(b Broker) any { return b.LogCleanerDedupeBufferSize }, int64(1 << 20)},
		{"log.cleaner.io.buffer.size", map[string]string{"log.cleaner.io.buffer.size": "4096"}, func(b Broker) any { return b.LogCleanerIOBufferSize }, int64(4096)},
		{"log.cleaner.io.buffer.load.factor", map[string]string{"log.cleaner.io.buffer.load.factor": "0.5"}, func(b Broker) any { return b.LogCleanerIOBufferLoadFactor }, 0.5},
		{"log.cleaner.io.max.bytes.per.second", map[string]string{"log.cleaner.io.max.bytes.per.second": "1e6"}, func(b Broker) any { return b.LogCleanerIOMaxBytesPerSecond }, 1e6},
		{"offsets.topic.segment.bytes", map[string]string{"offsets.topic.segment.bytes": "1024"}, func(b Broker) any { return b.OffsetsTopicSegmentBytes }, int64(1024)},
		{"offsets.topic.segment.bytes zero", map[string]string{"offsets.topic.segment.bytes": "0"}, func(b Broker) any { return b.OffsetsTopicSegmentBytes }, int64(104857600)},
		{"transaction.state.log.segment.bytes", map[string]string{"transaction.state.log.segment.bytes": "2048"}, func(b Broker) any { return b.TransactionStateLogSegmentBytes }, int64(2048)},
		{"transaction.state.log.segment.bytes zero", map[string]string{"transaction.state.log.segment.bytes": "0"}, func(b Broker) any { return b.TransactionStateLogSegmentBytes }, int64(104857600)},
		{"group.initial.rebalance.delay.ms", map[string]string{"group.initial.rebalance.delay.ms": "0"}, func(b Broker) any { return b.GroupInitialRebalanceDelayMs }, int64(0)},
		{"group.min.session.timeout.ms", map[string]string{"group.min.session.timeout.ms": "1"}, func(b Broker) any { return b.GroupMinSessionTimeoutMs }, int64(1)},
		{"group.max.session.timeout.ms", map[string]string{"group.max.session.timeout.ms": "2"}, func(b Broker) any { return b.GroupMaxSessionTimeoutMs }, int64(2)},
		{"group.consumer.session.timeout.ms", map[string]string{"group.consumer.session.timeout.ms": "3"}, func(b Broker) any { return b.GroupConsumerSessionTimeoutMs }, int64(3)},
		{"group.consumer.heartbeat.interval.ms", map[string]string{"group.consumer.heartbeat.interval.ms": "4"}, func(b Broker) any { return b.GroupConsumerHeartbeatIntervalMs }, int64(4)},
		{"unclean.leader.election.enable", map[string]string{"unclean.leader.election.enable": "true"}, func(b Broker) any { return b.UncleanLeaderElectionEnable }, true},
		{"min.insync.replicas", map[string]string{"min.insync.replicas": "2"}, func(b Broker) any { return b.MinInsyncReplicas }, int32(2)},
		{"compression.type", map[string]string{"compression.type": "zstd"}, func(b Broker) any { return b.CompressionType }, "zstd"},
		{"log.message.timestamp.type", map[string]string{"log.message.timestamp.type": "LogAppendTime"}, func(b Broker) any { return b.LogMessageTimestampType }, "LogAppendTime"},
		{"log.cleanup.policy", map[string]string{"log.cleanup.policy": "delete,compact"}, func(b Broker) any { return b.LogCleanupPolicy }, "compact,delete"},
		{"topic defaults follow log.*", map[string]string{"log.retention.hours": "1", "log.segment.bytes": "1000"},
			func(b Broker) any { return [2]int64{b.TopicDefaults.RetentionMs, b.TopicDefaults.SegmentBytes} }, [2]int64{hourMs, 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.field(ResolveBroker(tc.merged))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v (%T), want %v (%T)", got, got, tc.want, tc.want)
			}
		})
	}
}

// TestResolveBrokerThroughMerge: read-only configs ignore dynamic layers end to end.
func TestResolveBrokerThroughMerge(t *testing.T) {
	b := ResolveBroker(MergeBroker(
		map[string]string{"num.partitions": "3", "message.max.bytes": "100"},
		map[string]string{"num.partitions": "9", "message.max.bytes": "200"},
		map[string]string{"message.max.bytes": "300"},
	))
	if b.NumPartitions != 3 || b.MessageMaxBytes != 300 || b.TopicDefaults.MaxMessageBytes != 300 {
		t.Errorf("NumPartitions=%d MessageMaxBytes=%d topic default %d, want 3 300 300",
			b.NumPartitions, b.MessageMaxBytes, b.TopicDefaults.MaxMessageBytes)
	}
	if got := slices.Collect(maps.Keys(MergeBroker(nil, map[string]string{"node.id": "1"}, nil))); len(got) != 0 {
		t.Errorf("dynamic node.id kept: %v", got)
	}
}
