// Package kconfig is the catalogue of Kafka topic and broker configs Sluice understands:
// Kafka's names, types, defaults and valid ranges, checked the way Kafka checks them and
// described the way Kafka's DescribeConfigs reports them. It also resolves a topic's
// effective values from its overrides and the broker's (static and dynamic) configs.
//
// Usage:
//
//	merged := kconfig.MergeBroker(info.StaticConfigs, img.BrokerConfigs[""], img.BrokerConfigs["1"])
//	topic := kconfig.ResolveTopic(img.Topic("orders").Configs, merged)
//	log, err := storage.Open(tp, id, topic.LogConfig)
//
//	if err := kconfig.ValidateTopic("retention.ms", "-5"); err != nil {
//		// errors.Is(err, kconfig.ErrInvalidValue); err.Error() is
//		// "Invalid value -5 for configuration retention.ms: Value must be at least -1"
//	}
//
//	entries := kconfig.DescribeTopic(overrides, static, dynDefault, dynNode)
//
// # Precedence
//
// A topic config takes the first usable value of: the topic's override, then each of its
// broker synonyms in order, e.g. for retention.ms: log.retention.ms, then
// log.retention.minutes, then log.retention.hours. For each broker config the layers are
// dynamic for this node, then dynamic cluster-wide default, then static (config file),
// then the built-in default. Values in minutes or hours are converted to milliseconds;
// for retention a negative value means "forever" (-1). DescribeTopic reports the topic
// entry's source as DYNAMIC_TOPIC_CONFIG for an override, otherwise the source of the
// synonym that decided it (DEFAULT_CONFIG when only defaults apply), and lists every
// usable value in that order as synonyms, as Kafka does with include_synonyms.
//
// Broker configs that are topic defaults can be changed at runtime, as in Kafka, but only
// the first synonym of each (log.retention.ms, not log.retention.hours), plus
// producer.id.expiration.ms. All other broker configs are read-only: ValidateBroker
// refuses them with ErrReadOnly and dynamic values for them are ignored.
//
// Deliberate differences from Kafka (3.9, the version whose catalogue this follows;
// segment.bytes keeps its minimum of 14, which Kafka 4 raised):
//   - offsets.topic.replication.factor and transaction.state.log.replication.factor
//     default to 1 (Kafka: 3) and transaction.state.log.min.isr to 1 (Kafka: 2), so a
//     single node works out of the box.
//   - cleanup.policy must not be empty.
//   - A broker synonym in the topic config's units accepts exactly what the topic config
//     accepts (Kafka leaves log.retention.ms, log.roll.ms and a few others unchecked).
//   - listeners and advertised.listeners are read-only.
//   - Of Kafka's listener-prefixed configs only a broker's own SASL credentials are
//     known: listener.name.<listener>.<mechanism>.sasl.jaas.config (ListenerJAASConfig;
//     PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), static only, a password that DescribeBroker
//     never lists, whose value is the one JAAS shape ParseJAAS reads.
//   - Every catalogued config takes effect, or its description says "No effect in
//     Sluice" and why (reported, validated, changing nothing: preallocate,
//     file.delete.delay.ms, local.retention.*, message.downconversion.enable,
//     log.cleaner.io.buffer.size and their broker defaults), or a value other than
//     its default is refused with INVALID_CONFIG (remote.storage.enable). The config
//     audit test (audit_test.go) walks the catalogue to keep it so.
//   - log.dir is not a config; log.dirs is (the kernel fills it from data_dir when `configs:` does not set it).
//   - sluice.data.dir.reserve.bytes is Sluice's own (static): the free space kept on
//     the data dir (kernel/diskguard); Kafka has no such config.
//   - A broker entry's value and source are those of the config itself, and its
//     synonyms are its own values followed by the lower-precedence forms
//     (log.retention.ms: log.retention.minutes, log.retention.hours); Kafka also lists
//     the higher-precedence forms there.
//
// # Invariants
//
//   - The catalogue is immutable: built once by a package variable initializer, never
//     modified after. Every built-in default passes its own validation, every synonym
//     names a broker config, and the broker synonyms' defaults resolve to the topic
//     default (tested).
//   - Describe and Resolve agree: the value DescribeTopic reports for a config is the
//     value ResolveTopic(overrides, MergeBroker(static, dynDefault, dynNode)) uses.
//   - Invalid stored values are never used and never reported: they are skipped in favour
//     of the next source, down to the default. Validation happens when configs are
//     written; resolution never fails.
//   - Sensitive (PASSWORD) values never leave the package: Describe reports nil and
//     errors print "[hidden]".
//   - Entries are sorted by name; synonyms are in precedence order, the effective
//     value's source first.
//
// # Concurrency
//
// All functions are pure and safe for concurrent use; they do not modify their inputs.
package kconfig
