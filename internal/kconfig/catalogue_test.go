package kconfig

import (
	"slices"
	"testing"
)

// TestTopicCatalogue pins Kafka's facts for every topic config: type, default and the
// broker synonyms in precedence order.
func TestTopicCatalogue(t *testing.T) {
	tests := []struct {
		name     string
		typ      Type
		dflt     string
		synonyms []string
	}{
		{"cleanup.policy", TypeList, "delete", []string{"log.cleanup.policy"}},
		{"compression.gzip.level", TypeInt, "-1", []string{"compression.gzip.level"}},
		{"compression.lz4.level", TypeInt, "9", []string{"compression.lz4.level"}},
		{"compression.type", TypeString, "producer", []string{"compression.type"}},
		{"compression.zstd.level", TypeInt, "3", []string{"compression.zstd.level"}},
		{"delete.retention.ms", TypeLong, "86400000", []string{"log.cleaner.delete.retention.ms"}},
		{"file.delete.delay.ms", TypeLong, "60000", []string{"log.segment.delete.delay.ms"}},
		{"flush.messages", TypeLong, maxLong, []string{"log.flush.interval.messages"}},
		{"flush.ms", TypeLong, maxLong, []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}},
		{"follower.replication.throttled.replicas", TypeList, "", nil},
		{"index.interval.bytes", TypeInt, "4096", []string{"log.index.interval.bytes"}},
		{"leader.replication.throttled.replicas", TypeList, "", nil},
		{"local.retention.bytes", TypeLong, "-2", []string{"log.local.retention.bytes"}},
		{"local.retention.ms", TypeLong, "-2", []string{"log.local.retention.ms"}},
		{"max.compaction.lag.ms", TypeLong, maxLong, []string{"log.cleaner.max.compaction.lag.ms"}},
		{"max.message.bytes", TypeInt, "1048588", []string{"message.max.bytes"}},
		{"message.downconversion.enable", TypeBoolean, "true", []string{"log.message.downconversion.enable"}},
		{"message.timestamp.after.max.ms", TypeLong, maxLong, []string{"log.message.timestamp.after.max.ms"}},
		{"message.timestamp.before.max.ms", TypeLong, maxLong, []string{"log.message.timestamp.before.max.ms"}},
		{"message.timestamp.difference.max.ms", TypeLong, maxLong, []string{"log.message.timestamp.difference.max.ms"}},
		{"message.timestamp.type", TypeString, "CreateTime", []string{"log.message.timestamp.type"}},
		{"min.cleanable.dirty.ratio", TypeDouble, "0.5", []string{"log.cleaner.min.cleanable.ratio"}},
		{"min.compaction.lag.ms", TypeLong, "0", []string{"log.cleaner.min.compaction.lag.ms"}},
		{"min.insync.replicas", TypeInt, "1", []string{"min.insync.replicas"}},
		{"preallocate", TypeBoolean, "false", []string{"log.preallocate"}},
		{"remote.storage.enable", TypeBoolean, "false", nil},
		{"retention.bytes", TypeLong, "-1", []string{"log.retention.bytes"}},
		{"retention.ms", TypeLong, "604800000", []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}},
		{"segment.bytes", TypeInt, "1073741824", []string{"log.segment.bytes"}},
		{"segment.index.bytes", TypeInt, "10485760", []string{"log.index.size.max.bytes"}},
		{"segment.jitter.ms", TypeLong, "0", []string{"log.roll.jitter.ms", "log.roll.jitter.hours"}},
		{"segment.ms", TypeLong, "604800000", []string{"log.roll.ms", "log.roll.hours"}},
		{"unclean.leader.election.enable", TypeBoolean, "false", []string{"unclean.leader.election.enable"}},
	}
	var names []string
	for _, tc := range tests {
		names = append(names, tc.name)
		t.Run(tc.name, func(t *testing.T) {
			d := cat.topicByName[tc.name]
			if d == nil {
				t.Fatal("not in the catalogue")
			}
			if d.typ != tc.typ {
				t.Errorf("type = %v, want %v", d.typ, tc.typ)
			}
			if d.dflt == nil || *d.dflt != tc.dflt {
				t.Errorf("default = %v, want %q", d.dflt, tc.dflt)
			}
			var syn []string
			for _, s := range d.synonyms {
				syn = append(syn, s.name)
			}
			if !slices.Equal(syn, tc.synonyms) {
				t.Errorf("synonyms = %q, want %q", syn, tc.synonyms)
			}
			if typ, ok := TopicConfigType(tc.name); !ok || typ != tc.typ {
				t.Errorf("TopicConfigType = %v, %v", typ, ok)
			}
			if !IsTopicConfig(tc.name) {
				t.Error("IsTopicConfig = false")
			}
		})
	}
	if got := TopicConfigNames(); !slices.Equal(got, names) {
		t.Errorf("TopicConfigNames() =\n%q\nwant\n%q", got, names)
	}
}

// TestBrokerCatalogue pins type, default and dynamic-ness of the broker configs.
func TestBrokerCatalogue(t *testing.T) {
	const null = "<null>"
	tests := []struct {
		name    string
		typ     Type
		dflt    string
		dynamic bool
	}{
		{"advertised.listeners", TypeString, null, false},
		{"allow.everyone.if.no.acl.found", TypeBoolean, "false", false},
		{"auto.create.topics.enable", TypeBoolean, "true", false},
		{"auto.leader.rebalance.enable", TypeBoolean, "true", false},
		{"broker.heartbeat.interval.ms", TypeInt, "2000", false},
		{"broker.id", TypeInt, "-1", false},
		{"broker.session.timeout.ms", TypeInt, "9000", false},
		{"compression.gzip.level", TypeInt, "-1", true},
		{"compression.lz4.level", TypeInt, "9", true},
		{"compression.type", TypeString, "producer", true},
		{"compression.zstd.level", TypeInt, "3", true},
		{"connection.failed.authentication.delay.ms", TypeInt, "100", false},
		{"connections.max.idle.ms", TypeLong, "600000", false},
		{"connections.max.reauth.ms", TypeLong, "0", false},
		{"default.replication.factor", TypeInt, "1", false},
		{"delete.topic.enable", TypeBoolean, "true", false},
		{"follower.replication.throttled.rate", TypeLong, "9223372036854775807", true},
		{"group.consumer.heartbeat.interval.ms", TypeInt, "5000", false},
		{"group.consumer.max.size", TypeInt, "2147483647", false},
		{"group.consumer.migration.policy", TypeString, "bidirectional", false},
		{"group.consumer.session.timeout.ms", TypeInt, "45000", false},
		{"group.initial.rebalance.delay.ms", TypeInt, "3000", false},
		{"group.max.session.timeout.ms", TypeInt, "1800000", false},
		{"group.max.size", TypeInt, "2147483647", false},
		{"group.min.session.timeout.ms", TypeInt, "6000", false},
		{"group.share.delivery.count.limit", TypeInt, "5", false},
		{"group.share.enable", TypeBoolean, "true", false},
		{"group.share.heartbeat.interval.ms", TypeInt, "5000", false},
		{"group.share.max.size", TypeInt, "200", false},
		{"group.share.partition.max.record.locks", TypeInt, "2000", false},
		{"group.share.record.lock.duration.ms", TypeInt, "30000", false},
		{"group.share.session.timeout.ms", TypeInt, "45000", false},
		{"inter.broker.listener.name", TypeString, null, false},
		{"leader.imbalance.check.interval.seconds", TypeLong, "300", false},
		{"leader.imbalance.per.broker.percentage", TypeInt, "10", false},
		{"leader.replication.throttled.rate", TypeLong, "9223372036854775807", true},
		{"listener.security.protocol.map", TypeString, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", false},
		{"listeners", TypeString, "PLAINTEXT://:9092", false},
		{"log.cleaner.backoff.ms", TypeLong, "15000", true},
		{"log.cleaner.dedupe.buffer.size", TypeLong, "134217728", true},
		{"log.cleaner.delete.retention.ms", TypeLong, "86400000", true},
		{"log.cleaner.enable", TypeBoolean, "true", false},
		{"log.cleaner.io.buffer.load.factor", TypeDouble, "0.9", true},
		{"log.cleaner.io.buffer.size", TypeInt, "524288", true},
		{"log.cleaner.io.max.bytes.per.second", TypeDouble, "1.7976931348623157E308", true},
		{"log.cleaner.max.compaction.lag.ms", TypeLong, maxLong, true},
		{"log.cleaner.min.cleanable.ratio", TypeDouble, "0.5", true},
		{"log.cleaner.min.compaction.lag.ms", TypeLong, "0", true},
		{"log.cleaner.threads", TypeInt, "1", true},
		{"log.cleanup.policy", TypeList, "delete", true},
		{"log.dirs", TypeString, null, false},
		{"log.flush.interval.messages", TypeLong, maxLong, true},
		{"log.flush.interval.ms", TypeLong, null, true},
		{"log.flush.offset.checkpoint.interval.ms", TypeInt, "60000", false},
		{"log.flush.scheduler.interval.ms", TypeLong, maxLong, false},
		{"log.index.interval.bytes", TypeInt, "4096", true},
		{"log.index.size.max.bytes", TypeInt, "10485760", true},
		{"log.local.retention.bytes", TypeLong, "-2", true},
		{"log.local.retention.ms", TypeLong, "-2", true},
		{"log.message.downconversion.enable", TypeBoolean, "true", true},
		{"log.message.timestamp.after.max.ms", TypeLong, maxLong, true},
		{"log.message.timestamp.before.max.ms", TypeLong, maxLong, true},
		{"log.message.timestamp.difference.max.ms", TypeLong, maxLong, true},
		{"log.message.timestamp.type", TypeString, "CreateTime", true},
		{"log.preallocate", TypeBoolean, "false", true},
		{"log.retention.bytes", TypeLong, "-1", true},
		{"log.retention.check.interval.ms", TypeLong, "300000", false},
		{"log.retention.hours", TypeInt, "168", false},
		{"log.retention.minutes", TypeInt, null, false},
		{"log.retention.ms", TypeLong, null, true},
		{"log.roll.hours", TypeInt, "168", false},
		{"log.roll.jitter.hours", TypeInt, "0", false},
		{"log.roll.jitter.ms", TypeLong, null, true},
		{"log.roll.ms", TypeLong, null, true},
		{"log.segment.bytes", TypeInt, "1073741824", true},
		{"log.segment.delete.delay.ms", TypeLong, "60000", true},
		{"max.connection.creation.rate", TypeInt, "2147483647", false},
		{"max.connections", TypeInt, "2147483647", false},
		{"max.connections.per.ip", TypeInt, "2147483647", false},
		{"max.connections.per.ip.overrides", TypeString, "", false},
		{"max.request.partition.size.limit", TypeInt, "2000", false},
		{"message.max.bytes", TypeInt, "1048588", true},
		{"min.insync.replicas", TypeInt, "1", true},
		{"node.id", TypeInt, "-1", false},
		{"num.partitions", TypeInt, "1", false},
		{"num.replica.fetchers", TypeInt, "1", false},
		{"offset.metadata.max.bytes", TypeInt, "4096", false},
		{"offsets.retention.check.interval.ms", TypeLong, "600000", false},
		{"offsets.retention.minutes", TypeInt, "10080", false},
		{"offsets.topic.num.partitions", TypeInt, "50", false},
		{"offsets.topic.replication.factor", TypeShort, "1", false},
		{"offsets.topic.segment.bytes", TypeInt, "104857600", false},
		{"producer.id.expiration.ms", TypeInt, "86400000", true},
		{"queued.max.decompressed.bytes", TypeLong, "268435456", false},
		{"queued.max.request.bytes", TypeLong, "268435456", false},
		{"quota.window.num", TypeInt, "11", false},
		{"quota.window.size.seconds", TypeInt, "1", false},
		{"replica.fetch.backoff.ms", TypeInt, "1000", false},
		{"replica.fetch.max.bytes", TypeInt, "1048576", false},
		{"replica.fetch.min.bytes", TypeInt, "1", false},
		{"replica.fetch.response.max.bytes", TypeInt, "10485760", false},
		{"replica.fetch.wait.max.ms", TypeInt, "500", false},
		{"replica.high.watermark.checkpoint.interval.ms", TypeLong, "5000", false},
		{"replica.lag.time.max.ms", TypeLong, "30000", false},
		{"replication.quota.window.num", TypeInt, "11", false},
		{"replication.quota.window.size.seconds", TypeInt, "1", false},
		{"sasl.enabled.mechanisms", TypeList, "SCRAM-SHA-256,SCRAM-SHA-512", false},
		{"sasl.mechanism.inter.broker.protocol", TypeString, "SCRAM-SHA-512", false},
		{"sasl.oauthbearer.clock.skew.seconds", TypeInt, "30", false},
		{"sasl.oauthbearer.expected.audience", TypeList, null, false},
		{"sasl.oauthbearer.expected.issuer", TypeString, null, false},
		{"sasl.oauthbearer.jwks.endpoint.url", TypeString, null, false},
		{"sasl.oauthbearer.scope.claim.name", TypeString, "scope", false},
		{"sasl.oauthbearer.sub.claim.name", TypeString, "sub", false},
		{"sasl.server.max.receive.size", TypeInt, "524288", false},
		{"security.inter.broker.protocol", TypeString, "PLAINTEXT", false},
		{"sluice.data.dir.reserve.bytes", TypeLong, "1073741824", false},
		{"sluice.log.open.files.max", TypeInt, "0", false},
		{"sluice.memory.limit.bytes", TypeLong, "0", false},
		{"sluice.metrics.partition.series", TypeBoolean, "true", false},
		{"sluice.quota.burst.ms", TypeLong, "1000", false},
		{"socket.request.max.bytes", TypeInt, "104857600", false},
		{"ssl.client.auth", TypeString, "none", false},
		{"ssl.enabled.protocols", TypeList, "TLSv1.2,TLSv1.3", false},
		{"ssl.endpoint.identification.algorithm", TypeString, "https", false},
		{"ssl.key.password", TypePassword, null, false},
		{"ssl.keystore.certificate.chain", TypePassword, null, false},
		{"ssl.keystore.key", TypePassword, null, false},
		{"ssl.keystore.location", TypeString, null, false},
		{"ssl.keystore.password", TypePassword, null, false},
		{"ssl.keystore.type", TypeString, "PEM", false},
		{"ssl.principal.mapping.rules", TypeString, "DEFAULT", false},
		{"ssl.truststore.certificates", TypePassword, null, false},
		{"ssl.truststore.location", TypeString, null, false},
		{"ssl.truststore.password", TypePassword, null, false},
		{"ssl.truststore.type", TypeString, "PEM", false},
		{"super.users", TypeString, null, false},
		{"telemetry.max.bytes", TypeInt, "1048576", false},
		{"transaction.max.timeout.ms", TypeInt, "900000", false},
		{"transaction.state.log.min.isr", TypeInt, "1", false},
		{"transaction.state.log.num.partitions", TypeInt, "50", false},
		{"transaction.state.log.replication.factor", TypeShort, "1", false},
		{"transaction.state.log.segment.bytes", TypeInt, "104857600", false},
		{"transactional.id.expiration.ms", TypeInt, "604800000", false},
		{"unclean.leader.election.enable", TypeBoolean, "false", true},
	}
	var names []string
	for _, tc := range tests {
		names = append(names, tc.name)
		t.Run(tc.name, func(t *testing.T) {
			d := cat.brokerBy[tc.name]
			if d == nil {
				t.Fatal("not in the catalogue")
			}
			if d.typ != tc.typ {
				t.Errorf("type = %v, want %v", d.typ, tc.typ)
			}
			got := null
			if d.dflt != nil {
				got = *d.dflt
			}
			if got != tc.dflt {
				t.Errorf("default = %q, want %q", got, tc.dflt)
			}
			if d.dynamic != tc.dynamic || IsDynamicBrokerConfig(tc.name) != tc.dynamic {
				t.Errorf("dynamic = %v, want %v", d.dynamic, tc.dynamic)
			}
			if typ, ok := BrokerConfigType(tc.name); !ok || typ != tc.typ {
				t.Errorf("BrokerConfigType = %v, %v", typ, ok)
			}
			if !IsBrokerConfig(tc.name) {
				t.Error("IsBrokerConfig = false")
			}
		})
	}
	if got := BrokerConfigNames(); !slices.Equal(got, names) {
		t.Errorf("BrokerConfigNames() =\n%q\nwant\n%q", got, names)
	}
}

func TestCatalogueInvariants(t *testing.T) {
	t.Run("defaults pass their own validation", func(t *testing.T) {
		for _, d := range cat.allDefs() {
			if d.dflt == nil {
				continue
			}
			if _, reason := d.parse(*d.dflt); reason != "" {
				t.Errorf("%s default %q: %s", d.name, *d.dflt, reason)
			}
		}
	})
	t.Run("every topic config has a default", func(t *testing.T) {
		for _, d := range cat.topics {
			if d.dflt == nil {
				t.Errorf("%s has no default", d.name)
			}
		}
	})
	t.Run("broker defaults resolve to the topic default", func(t *testing.T) {
		for _, d := range cat.topics {
			if len(d.synonyms) == 0 {
				continue
			}
			cands := slices.Collect(topicCandidates(d, nil, nil))
			if len(cands) == 0 {
				t.Errorf("%s: no synonym has a default", d.name)
				continue
			}
			if cands[0].tv.s != *d.dflt {
				t.Errorf("%s: synonym %s default gives %q, topic default %q", d.name, cands[0].name, cands[0].tv.s, *d.dflt)
			}
		}
	})
	t.Run("synonym types carry over", func(t *testing.T) {
		for _, d := range cat.topics {
			for _, s := range d.synonyms {
				b := cat.brokerBy[s.name]
				scaled := s.scale > 1
				if !scaled && b.typ != d.typ {
					t.Errorf("%s: synonym %s is %v, topic config is %v", d.name, s.name, b.typ, d.typ)
				}
				if scaled && b.typ != TypeInt {
					t.Errorf("%s: scaled synonym %s must be INT (no overflow), is %v", d.name, s.name, b.typ)
				}
			}
		}
	})
	t.Run("every config has a doc", func(t *testing.T) {
		for _, d := range cat.allDefs() {
			if len(d.doc) < 10 {
				t.Errorf("%s: doc %q", d.name, d.doc)
			}
		}
	})
	t.Run("unknown names", func(t *testing.T) {
		for _, name := range []string{"", "retention.hours", "log.retention.ms.x", "RETENTION.MS"} {
			if IsTopicConfig(name) {
				t.Errorf("IsTopicConfig(%q) = true", name)
			}
			if _, ok := TopicConfigType(name); ok {
				t.Errorf("TopicConfigType(%q) ok", name)
			}
		}
		for _, name := range []string{"", "retention.ms", "segment.bytes", "log.dir"} {
			if IsBrokerConfig(name) || IsDynamicBrokerConfig(name) {
				t.Errorf("IsBrokerConfig(%q) = true", name)
			}
			if _, ok := BrokerConfigType(name); ok {
				t.Errorf("BrokerConfigType(%q) ok", name)
			}
		}
	})
	t.Run("lower-precedence forms", func(t *testing.T) {
		want := map[string][]string{
			"log.retention.ms":      {"log.retention.minutes", "log.retention.hours"},
			"log.retention.minutes": {"log.retention.hours"},
			"log.roll.ms":           {"log.roll.hours"},
			"log.roll.jitter.ms":    {"log.roll.jitter.hours"},
			"log.flush.interval.ms": {"log.flush.scheduler.interval.ms"},
		}
		for _, b := range cat.brokers {
			if !slices.Equal(b.lower, want[b.name]) {
				t.Errorf("%s lower = %q, want %q", b.name, b.lower, want[b.name])
			}
		}
	})
}
