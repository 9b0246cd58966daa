// Package kconfig is the catalogue of Kafka topic and broker configs Sluice understands:
// names, types, defaults, validation, and resolution of a topic's effective values from
// its overrides and the broker's (static and dynamic) configs.
//
// STUB: the metadata work fills in the full catalogue; the API below is the contract.
package kconfig

import (
	"math"
	"strconv"

	"github.com/sluicehq/sluice/kernel"
)

// Topic is a topic's effective, typed configuration.
type Topic struct {
	kernel.LogConfig
	MaxMessageBytes             int64  // max.message.bytes
	MessageTimestampType        string // message.timestamp.type: CreateTime | LogAppendTime
	MessageTimestampBeforeMaxMs int64  // message.timestamp.before.max.ms
	MessageTimestampAfterMaxMs  int64  // message.timestamp.after.max.ms
	MinInsyncReplicas           int32  // min.insync.replicas
	UncleanLeaderElectionEnable bool   // unclean.leader.election.enable
	CompressionType             string // compression.type (producer = keep the producer's)
}

// ResolveTopic returns the effective configuration of a topic from its overrides
// (topic-level names) and broker configs (broker-level names such as log.retention.ms,
// merged static + dynamic). Values that fail to parse fall back to the default.
func ResolveTopic(overrides, broker map[string]string) Topic {
	get := func(topicName, brokerName string, def int64) int64 {
		if v, ok := overrides[topicName]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
		if brokerName != "" {
			if v, ok := broker[brokerName]; ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					return n
				}
			}
		}
		return def
	}
	t := Topic{
		LogConfig: kernel.LogConfig{
			SegmentBytes:       get("segment.bytes", "log.segment.bytes", 1<<30),
			SegmentMs:          get("segment.ms", "log.roll.ms", 7*24*3600*1000),
			IndexIntervalBytes: get("index.interval.bytes", "log.index.interval.bytes", 4096),
			SegmentIndexBytes:  get("segment.index.bytes", "log.index.size.max.bytes", 10<<20),
			RetentionMs:        get("retention.ms", "log.retention.ms", 7*24*3600*1000),
			RetentionBytes:     get("retention.bytes", "log.retention.bytes", -1),
			FlushMessages:      get("flush.messages", "log.flush.interval.messages", math.MaxInt64),
			FlushMs:            get("flush.ms", "log.flush.interval.ms", math.MaxInt64),
			FileDeleteDelayMs:  get("file.delete.delay.ms", "log.segment.delete.delay.ms", 60000),
			CleanupPolicy:      "delete",
		},
		MaxMessageBytes:             get("max.message.bytes", "message.max.bytes", 1048588),
		MessageTimestampType:        "CreateTime",
		MessageTimestampBeforeMaxMs: get("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", math.MaxInt64),
		MessageTimestampAfterMaxMs:  get("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", math.MaxInt64),
		MinInsyncReplicas:           int32(get("min.insync.replicas", "min.insync.replicas", 1)),
		CompressionType:             "producer",
	}
	if v, ok := overrides["message.timestamp.type"]; ok {
		t.MessageTimestampType = v
	} else if v, ok := broker["log.message.timestamp.type"]; ok {
		t.MessageTimestampType = v
	}
	return t
}
