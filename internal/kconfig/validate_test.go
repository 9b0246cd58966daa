package kconfig

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateTopic covers each validation rule of the topic configs. want is nil for a
// valid value, else the sentinel; reason (if set) must appear in the message.
func TestValidateTopic(t *testing.T) {
	tests := []validateCase{
		{"unknown", "no.such.config", "1", ErrUnknownConfig, ""},
		{"broker name is not a topic config", "log.retention.ms", "1", ErrUnknownConfig, ""},

		{"retention.ms -1", "retention.ms", "-1", nil, ""},
		{"retention.ms 0", "retention.ms", "0", nil, ""},
		{"retention.ms -2", "retention.ms", "-2", ErrInvalidValue, "at least -1"},
		{"retention.ms text", "retention.ms", "week", ErrInvalidValue, "type LONG"},
		{"retention.bytes any long", "retention.bytes", "-100", nil, ""},
		{"segment.bytes 14", "segment.bytes", "14", nil, ""},
		{"segment.bytes 13", "segment.bytes", "13", ErrInvalidValue, "at least 14"},
		{"segment.bytes beyond INT", "segment.bytes", "4294967296", ErrInvalidValue, "type INT"},
		{"segment.ms 1", "segment.ms", "1", nil, ""},
		{"segment.ms 0", "segment.ms", "0", ErrInvalidValue, "at least 1"},
		{"segment.jitter.ms -1", "segment.jitter.ms", "-1", ErrInvalidValue, "at least 0"},
		{"segment.index.bytes 4", "segment.index.bytes", "4", nil, ""},
		{"segment.index.bytes 3", "segment.index.bytes", "3", ErrInvalidValue, "at least 4"},
		{"index.interval.bytes 0", "index.interval.bytes", "0", nil, ""},
		{"index.interval.bytes -1", "index.interval.bytes", "-1", ErrInvalidValue, "at least 0"},
		{"min.insync.replicas 1", "min.insync.replicas", "1", nil, ""},
		{"min.insync.replicas 0", "min.insync.replicas", "0", ErrInvalidValue, "at least 1"},
		{"max.message.bytes 0", "max.message.bytes", "0", nil, ""},
		{"max.message.bytes -1", "max.message.bytes", "-1", ErrInvalidValue, "at least 0"},
		{"flush.ms 0", "flush.ms", "0", nil, ""},
		{"flush.ms -1", "flush.ms", "-1", ErrInvalidValue, "at least 0"},
		{"flush.messages 1", "flush.messages", "1", nil, ""},
		{"flush.messages 0", "flush.messages", "0", ErrInvalidValue, "at least 1"},
		{"file.delete.delay.ms -1", "file.delete.delay.ms", "-1", ErrInvalidValue, "at least 0"},
		{"delete.retention.ms -1", "delete.retention.ms", "-1", ErrInvalidValue, "at least 0"},
		{"min.compaction.lag.ms -1", "min.compaction.lag.ms", "-1", ErrInvalidValue, "at least 0"},
		{"max.compaction.lag.ms 0", "max.compaction.lag.ms", "0", ErrInvalidValue, "at least 1"},
		{"message.timestamp.before.max.ms -1", "message.timestamp.before.max.ms", "-1", ErrInvalidValue, "at least 0"},
		{"message.timestamp.after.max.ms 0", "message.timestamp.after.max.ms", "0", nil, ""},
		{"message.timestamp.difference.max.ms -1", "message.timestamp.difference.max.ms", "-1", ErrInvalidValue, "at least 0"},
		{"local.retention.ms -2", "local.retention.ms", "-2", nil, ""},
		{"local.retention.ms -3", "local.retention.ms", "-3", ErrInvalidValue, "at least -2"},
		{"local.retention.bytes -3", "local.retention.bytes", "-3", ErrInvalidValue, "at least -2"},

		{"min.cleanable.dirty.ratio 0", "min.cleanable.dirty.ratio", "0", nil, ""},
		{"min.cleanable.dirty.ratio 1", "min.cleanable.dirty.ratio", "1", nil, ""},
		{"min.cleanable.dirty.ratio 0.75", "min.cleanable.dirty.ratio", "0.75", nil, ""},
		{"min.cleanable.dirty.ratio 1.5", "min.cleanable.dirty.ratio", "1.5", ErrInvalidValue, "at most 1"},
		{"min.cleanable.dirty.ratio -0.1", "min.cleanable.dirty.ratio", "-0.1", ErrInvalidValue, "at least 0"},
		{"min.cleanable.dirty.ratio NaN", "min.cleanable.dirty.ratio", "NaN", ErrInvalidValue, "type DOUBLE"},

		{"cleanup.policy delete", "cleanup.policy", "delete", nil, ""},
		{"cleanup.policy compact", "cleanup.policy", "compact", nil, ""},
		{"cleanup.policy both with spaces", "cleanup.policy", "compact, delete", nil, ""},
		{"cleanup.policy empty", "cleanup.policy", "", ErrInvalidValue, "must not be empty"},
		{"cleanup.policy unknown", "cleanup.policy", "delete,archive", ErrInvalidValue, `"archive"`},
		{"cleanup.policy case", "cleanup.policy", "Delete", ErrInvalidValue, `"Delete"`},

		{"compression.type zstd", "compression.type", "zstd", nil, ""},
		{"compression.type lz4", "compression.type", "lz4", nil, ""},
		{"compression.type snappy", "compression.type", "snappy", nil, ""},
		{"compression.type gzip", "compression.type", "gzip", nil, ""},
		{"compression.type uncompressed", "compression.type", "uncompressed", nil, ""},
		{"compression.type producer", "compression.type", "producer", nil, ""},
		{"compression.type none", "compression.type", "none", ErrInvalidValue, "one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{"compression.type upper", "compression.type", "GZIP", ErrInvalidValue, "one of"},

		{"compression.gzip.level -1", "compression.gzip.level", "-1", nil, ""},
		{"compression.gzip.level 1", "compression.gzip.level", "1", nil, ""},
		{"compression.gzip.level 9", "compression.gzip.level", "9", nil, ""},
		{"compression.gzip.level 0", "compression.gzip.level", "0", ErrInvalidValue, "-1 or between 1 and 9"},
		{"compression.gzip.level 10", "compression.gzip.level", "10", ErrInvalidValue, "-1 or between 1 and 9"},
		{"compression.lz4.level 0", "compression.lz4.level", "0", ErrInvalidValue, "at least 1"},
		{"compression.lz4.level 18", "compression.lz4.level", "18", ErrInvalidValue, "at most 17"},
		{"compression.zstd.level min", "compression.zstd.level", "-131072", nil, ""},
		{"compression.zstd.level below min", "compression.zstd.level", "-131073", ErrInvalidValue, "at least -131072"},
		{"compression.zstd.level 23", "compression.zstd.level", "23", ErrInvalidValue, "at most 22"},

		{"message.timestamp.type CreateTime", "message.timestamp.type", "CreateTime", nil, ""},
		{"message.timestamp.type LogAppendTime", "message.timestamp.type", "LogAppendTime", nil, ""},
		{"message.timestamp.type lower", "message.timestamp.type", "createtime", ErrInvalidValue, "one of: CreateTime, LogAppendTime"},

		{"unclean true", "unclean.leader.election.enable", "true", nil, ""},
		{"unclean TRUE", "unclean.leader.election.enable", "TRUE", nil, ""},
		{"unclean 1", "unclean.leader.election.enable", "1", ErrInvalidValue, "true or false"},
		{"preallocate yes", "preallocate", "yes", ErrInvalidValue, "true or false"},
		{"message.downconversion.enable false", "message.downconversion.enable", "false", nil, ""},
		{"remote.storage.enable false", "remote.storage.enable", "false", nil, ""},
		{"remote.storage.enable true refused: no remote tier", "remote.storage.enable", "true", ErrInvalidValue, "Tiered Storage functionality is disabled"},

		{"throttled star", "leader.replication.throttled.replicas", "*", nil, ""},
		{"throttled pairs", "follower.replication.throttled.replicas", "0:1,1:2", nil, ""},
		{"throttled empty", "follower.replication.throttled.replicas", "", nil, ""},
		{"throttled garbage", "leader.replication.throttled.replicas", "all", ErrInvalidValue, "partitionId:brokerId"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTopic(tc.config, tc.value)
			checkErr(t, err, tc.want, tc.reason)
			if tc.want == ErrInvalidValue && !strings.Contains(err.Error(), "for configuration "+tc.config+":") {
				t.Errorf("message %q does not name the config", err)
			}
		})
	}
}

// validateCase is one value check: config=value is valid (want nil) or fails with the
// sentinel want, with reason (if set) in the message.
type validateCase struct {
	name   string
	config string
	value  string
	want   error
	reason string
}

// runValidateCases runs each case as a subtest of validate.
func runValidateCases(t *testing.T, cases []validateCase, validate func(config, value string) error) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, validate(tc.config, tc.value), tc.want, tc.reason)
		})
	}
}

func checkErr(t *testing.T, err, want error, reason string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("message %q does not contain %q", err, reason)
	}
}

func TestValidateBroker(t *testing.T) {
	tests := []validateCase{
		{"unknown", "no.such.config", "1", ErrUnknownConfig, "no.such.config"},
		{"topic name is not a broker config", "retention.ms", "1", ErrUnknownConfig, "retention.ms"},

		// Read-only: refused whatever the value.
		{"node.id", "node.id", "2", ErrReadOnly, "node.id"},
		{"broker.id", "broker.id", "2", ErrReadOnly, "broker.id"},
		{"log.dirs", "log.dirs", "/tmp", ErrReadOnly, "log.dirs"},
		{"listeners", "listeners", "PLAINTEXT://:9093", ErrReadOnly, "listeners"},
		{"num.partitions", "num.partitions", "3", ErrReadOnly, ""},
		{"auto.create.topics.enable", "auto.create.topics.enable", "false", ErrReadOnly, ""},
		{"delete.topic.enable", "delete.topic.enable", "false", ErrReadOnly, ""},
		{"offsets.topic.num.partitions", "offsets.topic.num.partitions", "5", ErrReadOnly, ""},
		{"read-only beats invalid", "socket.request.max.bytes", "lots", ErrReadOnly, ""},
		{"retention hours are read-only", "log.retention.hours", "24", ErrReadOnly, ""},
		{"retention minutes are read-only", "log.retention.minutes", "24", ErrReadOnly, ""},
		{"roll hours are read-only", "log.roll.hours", "24", ErrReadOnly, ""},
		{"flush scheduler is read-only", "log.flush.scheduler.interval.ms", "1000", ErrReadOnly, ""},
		{"password is read-only", "ssl.keystore.password", "x", ErrReadOnly, ""},

		// Dynamic.
		{"log.retention.ms", "log.retention.ms", "3600000", nil, ""},
		{"log.retention.ms -1", "log.retention.ms", "-1", nil, ""},
		{"log.retention.ms -2", "log.retention.ms", "-2", ErrInvalidValue, "at least -1"},
		{"log.roll.ms 0", "log.roll.ms", "0", ErrInvalidValue, "at least 1"},
		{"log.segment.bytes", "log.segment.bytes", "1048576", nil, ""},
		{"log.segment.bytes 13", "log.segment.bytes", "13", ErrInvalidValue, "at least 14"},
		{"message.max.bytes", "message.max.bytes", "2000000", nil, ""},
		{"message.max.bytes -1", "message.max.bytes", "-1", ErrInvalidValue, "at least 0"},
		{"min.insync.replicas", "min.insync.replicas", "2", nil, ""},
		{"min.insync.replicas 0", "min.insync.replicas", "0", ErrInvalidValue, "at least 1"},
		{"unclean.leader.election.enable", "unclean.leader.election.enable", "true", nil, ""},
		{"unclean.leader.election.enable bad", "unclean.leader.election.enable", "maybe", ErrInvalidValue, "true or false"},
		{"compression.type", "compression.type", "lz4", nil, ""},
		{"compression.type bad", "compression.type", "brotli", ErrInvalidValue, "one of"},
		{"log.cleanup.policy", "log.cleanup.policy", "compact,delete", nil, ""},
		{"log.cleanup.policy bad", "log.cleanup.policy", "keep", ErrInvalidValue, "not one of"},
		{"log.message.timestamp.type", "log.message.timestamp.type", "LogAppendTime", nil, ""},
		{"log.message.timestamp.type bad", "log.message.timestamp.type", "Now", ErrInvalidValue, "one of"},
		{"log.cleaner.min.cleanable.ratio", "log.cleaner.min.cleanable.ratio", "2", ErrInvalidValue, "at most 1"},
		{"log.flush.interval.ms", "log.flush.interval.ms", "1000", nil, ""},
		{"producer.id.expiration.ms", "producer.id.expiration.ms", "60000", nil, ""},
		{"producer.id.expiration.ms 0", "producer.id.expiration.ms", "0", ErrInvalidValue, "at least 1"},
	}
	runValidateCases(t, tests, ValidateBroker)
}

func TestValidateStaticBroker(t *testing.T) {
	tests := []validateCase{
		{"unknown", "no.such.config", "1", ErrUnknownConfig, ""},
		{"read-only is fine", "num.partitions", "3", nil, ""},
		{"read-only checked", "num.partitions", "0", ErrInvalidValue, "at least 1"},
		{"node.id", "node.id", "1", nil, ""},
		{"log.dirs", "log.dirs", "/a,/b", nil, ""},
		{"retention hours", "log.retention.hours", "-1", nil, ""},
		{"roll hours", "log.roll.hours", "0", ErrInvalidValue, "at least 1"},
		{"default.replication.factor", "default.replication.factor", "3", nil, ""},
		{"default.replication.factor too big", "default.replication.factor", "40000", ErrInvalidValue, "at most 32767"},
		{"offsets.topic.replication.factor short", "offsets.topic.replication.factor", "40000", ErrInvalidValue, "type SHORT"},
		{"socket.request.max.bytes", "socket.request.max.bytes", "0", ErrInvalidValue, "at least 1"},
		{"auto.create.topics.enable", "auto.create.topics.enable", "no", ErrInvalidValue, "true or false"},
		{"password", "ssl.keystore.password", "s3cret", nil, ""},
		{"queued.max.request.bytes unbounded", "queued.max.request.bytes", "-1", nil, ""},
		{"queued.max.request.bytes zero", "queued.max.request.bytes", "0", ErrInvalidValue, "-1 or at least 1"},
		{"listener max.connections", "listener.name.internal.max.connections", "10", nil, ""},
		{"listener creation rate checked", "listener.name.internal.max.connection.creation.rate", "-1", ErrInvalidValue, "at least 0"},
		{"listener scoped other config", "listener.name.internal.max.connections.per.ip", "1", ErrUnknownConfig, ""},
	}
	runValidateCases(t, tests, ValidateStaticBroker)
}

func TestValidateTopicConfigs(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		broker    map[string]string
		want      error
		reason    string
	}{
		{"none", nil, nil, nil, ""},
		{"valid set", map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}, nil, nil, ""},
		{"first bad in name order", map[string]string{"segment.ms": "0", "retention.ms": "-9"}, nil, ErrInvalidValue, "retention.ms"},
		{"unknown", map[string]string{"retention.ms": "1", "bogus": "1"}, nil, ErrUnknownConfig, "bogus"},
		{"lags in order", map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"}, nil, nil, ""},
		{"min lag above max lag", map[string]string{"min.compaction.lag.ms": "11", "max.compaction.lag.ms": "10"}, nil,
			ErrInvalidValue, "Invalid value 11 for configuration min.compaction.lag.ms: Value must not be greater than max.compaction.lag.ms (10)"},
		{"min lag above broker max lag", map[string]string{"min.compaction.lag.ms": "11"},
			map[string]string{"log.cleaner.max.compaction.lag.ms": "10"}, ErrInvalidValue, "max.compaction.lag.ms (10)"},
		{"max lag below broker min lag", map[string]string{"max.compaction.lag.ms": "5"},
			map[string]string{"log.cleaner.min.compaction.lag.ms": "10"}, ErrInvalidValue, "Invalid value 5 for configuration max.compaction.lag.ms: Value must not be less than min.compaction.lag.ms (10)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, ValidateTopicConfigs(tc.overrides, tc.broker), tc.want, tc.reason)
		})
	}
}

// TestEveryTopicSynonymValidatesLikeItsTopicConfig: a broker synonym in the topic
// config's units accepts exactly what the topic config accepts.
func TestEveryTopicSynonymValidatesLikeItsTopicConfig(t *testing.T) {
	samples := []string{"", "-3", "-2", "-1", "0", "1", "13", "14", "0.5", "1.5", "true", "TRUE", "x",
		"delete", "compact,delete", "zstd", "CreateTime", "LogAppendTime", "*", "0:1", maxLong}
	for _, d := range cat.topics {
		for _, s := range d.synonyms {
			if s.scale > 1 {
				continue
			}
			b := cat.brokerBy[s.name]
			for _, v := range samples {
				_, tr := d.parse(v)
				_, br := b.parse(v)
				if tr != br {
					t.Errorf("%s=%q: topic says %q, broker synonym %s says %q", d.name, v, tr, s.name, br)
				}
			}
		}
	}
}
