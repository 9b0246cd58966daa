package kconfig

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// syn renders synonyms as "name=value@SOURCE" for compact comparisons.
func syn(ss []Synonym) []string {
	out := []string{}
	for _, s := range ss {
		v := "<nil>"
		if s.Value != nil {
			v = *s.Value
		}
		out = append(out, fmt.Sprintf("%s=%s@%s", s.Name, v, s.Source))
	}
	return out
}

func entry(t *testing.T, entries []Entry, name string) Entry {
	t.Helper()
	for _, e := range entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no entry %s", name)
	return Entry{}
}

func val(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestDescribeTopic(t *testing.T) {
	tests := []struct {
		name                                   string
		overrides, static, dynDefault, dynNode map[string]string
		config                                 string
		value                                  string
		source                                 Source
		synonyms                               []string
	}{
		{name: "default via hours", config: "retention.ms", value: "604800000", source: SourceDefault,
			synonyms: []string{"log.retention.hours=168@DEFAULT_CONFIG"}},
		{name: "override", overrides: map[string]string{"retention.ms": "1000"}, config: "retention.ms",
			value: "1000", source: SourceDynamicTopic,
			synonyms: []string{"retention.ms=1000@DYNAMIC_TOPIC_CONFIG", "log.retention.hours=168@DEFAULT_CONFIG"}},
		{name: "override canonical form", overrides: map[string]string{"retention.ms": " +1000 "}, config: "retention.ms",
			value: "1000", source: SourceDynamicTopic,
			synonyms: []string{"retention.ms=1000@DYNAMIC_TOPIC_CONFIG", "log.retention.hours=168@DEFAULT_CONFIG"}},
		{name: "static minutes", static: map[string]string{"log.retention.minutes": "3"}, config: "retention.ms",
			value: "180000", source: SourceStaticBroker,
			synonyms: []string{"log.retention.minutes=3@STATIC_BROKER_CONFIG", "log.retention.hours=168@DEFAULT_CONFIG"}},
		{name: "every layer, in precedence order",
			overrides:  map[string]string{"retention.ms": "1"},
			static:     map[string]string{"log.retention.ms": "4", "log.retention.hours": "5"},
			dynDefault: map[string]string{"log.retention.ms": "3"},
			dynNode:    map[string]string{"log.retention.ms": "2"},
			config:     "retention.ms", value: "1", source: SourceDynamicTopic,
			synonyms: []string{
				"retention.ms=1@DYNAMIC_TOPIC_CONFIG",
				"log.retention.ms=2@DYNAMIC_BROKER_CONFIG",
				"log.retention.ms=3@DYNAMIC_DEFAULT_BROKER_CONFIG",
				"log.retention.ms=4@STATIC_BROKER_CONFIG",
				"log.retention.hours=5@STATIC_BROKER_CONFIG",
				"log.retention.hours=168@DEFAULT_CONFIG",
			}},
		{name: "dynamic node decides",
			static:  map[string]string{"log.retention.ms": "4"},
			dynNode: map[string]string{"log.retention.ms": "2"},
			config:  "retention.ms", value: "2", source: SourceDynamicBroker,
			synonyms: []string{
				"log.retention.ms=2@DYNAMIC_BROKER_CONFIG",
				"log.retention.ms=4@STATIC_BROKER_CONFIG",
				"log.retention.hours=168@DEFAULT_CONFIG",
			}},
		{name: "dynamic default decides",
			dynDefault: map[string]string{"log.segment.bytes": "1048576"},
			config:     "segment.bytes", value: "1048576", source: SourceDynamicDefaultBroker,
			synonyms: []string{"log.segment.bytes=1048576@DYNAMIC_DEFAULT_BROKER_CONFIG", "log.segment.bytes=1073741824@DEFAULT_CONFIG"}},
		{name: "static log.retention.ms beats dynamic hours (read-only, ignored)",
			static:  map[string]string{"log.retention.ms": "7"},
			dynNode: map[string]string{"log.retention.hours": "1"},
			config:  "retention.ms", value: "7", source: SourceStaticBroker,
			synonyms: []string{"log.retention.ms=7@STATIC_BROKER_CONFIG", "log.retention.hours=168@DEFAULT_CONFIG"}},
		{name: "invalid override skipped",
			overrides: map[string]string{"segment.ms": "0"},
			config:    "segment.ms", value: "604800000", source: SourceDefault,
			synonyms: []string{"log.roll.hours=168@DEFAULT_CONFIG"}},
		{name: "roll hours static", static: map[string]string{"log.roll.hours": "1"},
			config: "segment.ms", value: "3600000", source: SourceStaticBroker,
			synonyms: []string{"log.roll.hours=1@STATIC_BROKER_CONFIG", "log.roll.hours=168@DEFAULT_CONFIG"}},
		{name: "same-name synonym", static: map[string]string{"min.insync.replicas": "2"},
			config: "min.insync.replicas", value: "2", source: SourceStaticBroker,
			synonyms: []string{"min.insync.replicas=2@STATIC_BROKER_CONFIG", "min.insync.replicas=1@DEFAULT_CONFIG"}},
		{name: "flush.ms default from scheduler", config: "flush.ms", value: maxLong, source: SourceDefault,
			synonyms: []string{"log.flush.scheduler.interval.ms=" + maxLong + "@DEFAULT_CONFIG"}},
		{name: "no synonyms", config: "remote.storage.enable", value: "false", source: SourceDefault, synonyms: []string{}},
		{name: "no synonyms, override", overrides: map[string]string{"leader.replication.throttled.replicas": "0:1 , 1:2"},
			config: "leader.replication.throttled.replicas", value: "0:1,1:2", source: SourceDynamicTopic,
			synonyms: []string{"leader.replication.throttled.replicas=0:1,1:2@DYNAMIC_TOPIC_CONFIG"}},
		{name: "list shown as set", overrides: map[string]string{"cleanup.policy": "delete, compact"},
			config: "cleanup.policy", value: "delete,compact", source: SourceDynamicTopic,
			synonyms: []string{"cleanup.policy=delete,compact@DYNAMIC_TOPIC_CONFIG", "log.cleanup.policy=delete@DEFAULT_CONFIG"}},
		{name: "boolean canonical", overrides: map[string]string{"preallocate": "TRUE"},
			config: "preallocate", value: "true", source: SourceDynamicTopic,
			synonyms: []string{"preallocate=true@DYNAMIC_TOPIC_CONFIG", "log.preallocate=false@DEFAULT_CONFIG"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := entry(t, DescribeTopic(tc.overrides, tc.static, tc.dynDefault, tc.dynNode), tc.config)
			if val(e.Value) != tc.value || e.Source != tc.source {
				t.Errorf("value %s source %s, want %s %s", val(e.Value), e.Source, tc.value, tc.source)
			}
			if got := syn(e.Synonyms); !slices.Equal(got, tc.synonyms) {
				t.Errorf("synonyms\n got %q\nwant %q", got, tc.synonyms)
			}
		})
	}
}

func TestDescribeTopicShape(t *testing.T) {
	entries := DescribeTopic(nil, nil, nil, nil)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
		if e.ReadOnly || e.Sensitive {
			t.Errorf("%s: read-only %v sensitive %v", e.Name, e.ReadOnly, e.Sensitive)
		}
		if e.Value == nil || e.Source != SourceDefault {
			t.Errorf("%s: value %v source %s", e.Name, e.Value, e.Source)
		}
		if typ, _ := TopicConfigType(e.Name); e.Type != typ || e.Type == TypeUnknown {
			t.Errorf("%s: type %s", e.Name, e.Type)
		}
		if e.Doc == "" {
			t.Errorf("%s: no doc", e.Name)
		}
	}
	if !slices.Equal(names, TopicConfigNames()) || !slices.IsSorted(names) {
		t.Errorf("entries not one per topic config in name order: %q", names)
	}
}

func TestDescribeBroker(t *testing.T) {
	tests := []struct {
		name                        string
		static, dynDefault, dynNode map[string]string
		config                      string
		value                       string
		source                      Source
		readOnly, sensitive         bool
		synonyms                    []string
	}{
		{name: "read-only default", config: "num.partitions", value: "1", source: SourceDefault, readOnly: true,
			synonyms: []string{"num.partitions=1@DEFAULT_CONFIG"}},
		{name: "read-only static", static: map[string]string{"num.partitions": "3"}, config: "num.partitions",
			value: "3", source: SourceStaticBroker, readOnly: true,
			synonyms: []string{"num.partitions=3@STATIC_BROKER_CONFIG", "num.partitions=1@DEFAULT_CONFIG"}},
		{name: "read-only ignores dynamic", static: map[string]string{"num.partitions": "3"},
			dynDefault: map[string]string{"num.partitions": "4"}, dynNode: map[string]string{"num.partitions": "5"},
			config: "num.partitions", value: "3", source: SourceStaticBroker, readOnly: true,
			synonyms: []string{"num.partitions=3@STATIC_BROKER_CONFIG", "num.partitions=1@DEFAULT_CONFIG"}},
		{name: "unset without default", config: "log.dirs", value: "<nil>", source: SourceDefault, readOnly: true,
			synonyms: []string{}},
		{name: "static log.dirs", static: map[string]string{"log.dirs": "/data"}, config: "log.dirs", value: "/data",
			source: SourceStaticBroker, readOnly: true, synonyms: []string{"log.dirs=/data@STATIC_BROKER_CONFIG"}},
		{name: "dynamic, unset: lower forms listed", config: "log.retention.ms", value: "<nil>", source: SourceDefault,
			synonyms: []string{"log.retention.hours=168@DEFAULT_CONFIG"}},
		{name: "dynamic, all layers",
			static:     map[string]string{"log.retention.ms": "3", "log.retention.minutes": "9"},
			dynDefault: map[string]string{"log.retention.ms": "2"},
			dynNode:    map[string]string{"log.retention.ms": "1"},
			config:     "log.retention.ms", value: "1", source: SourceDynamicBroker,
			synonyms: []string{
				"log.retention.ms=1@DYNAMIC_BROKER_CONFIG",
				"log.retention.ms=2@DYNAMIC_DEFAULT_BROKER_CONFIG",
				"log.retention.ms=3@STATIC_BROKER_CONFIG",
				"log.retention.minutes=9@STATIC_BROKER_CONFIG",
				"log.retention.hours=168@DEFAULT_CONFIG",
			}},
		{name: "hours keep their own value", static: map[string]string{"log.retention.ms": "3"},
			config: "log.retention.hours", value: "168", source: SourceDefault, readOnly: true,
			synonyms: []string{"log.retention.hours=168@DEFAULT_CONFIG"}},
		{name: "dynamic default", dynDefault: map[string]string{"message.max.bytes": "2000000"},
			config: "message.max.bytes", value: "2000000", source: SourceDynamicDefaultBroker,
			synonyms: []string{"message.max.bytes=2000000@DYNAMIC_DEFAULT_BROKER_CONFIG", "message.max.bytes=1048588@DEFAULT_CONFIG"}},
		{name: "invalid dynamic skipped", dynNode: map[string]string{"min.insync.replicas": "0"},
			config: "min.insync.replicas", value: "1", source: SourceDefault,
			synonyms: []string{"min.insync.replicas=1@DEFAULT_CONFIG"}},
		{name: "log.cleaner.enable is read-only", dynNode: map[string]string{"log.cleaner.enable": "false"},
			config: "log.cleaner.enable", value: "true", source: SourceDefault, readOnly: true,
			synonyms: []string{"log.cleaner.enable=true@DEFAULT_CONFIG"}},
		{name: "log.cleaner.threads dynamic default", static: map[string]string{"log.cleaner.threads": "2"},
			dynDefault: map[string]string{"log.cleaner.threads": "3"},
			config:     "log.cleaner.threads", value: "3", source: SourceDynamicDefaultBroker,
			synonyms: []string{"log.cleaner.threads=3@DYNAMIC_DEFAULT_BROKER_CONFIG",
				"log.cleaner.threads=2@STATIC_BROKER_CONFIG", "log.cleaner.threads=1@DEFAULT_CONFIG"}},
		{name: "log.cleaner.io.max.bytes.per.second default", config: "log.cleaner.io.max.bytes.per.second",
			value: "1.7976931348623157E308", source: SourceDefault,
			synonyms: []string{"log.cleaner.io.max.bytes.per.second=1.7976931348623157E308@DEFAULT_CONFIG"}},
		{name: "offsets.topic.segment.bytes static", static: map[string]string{"offsets.topic.segment.bytes": "1048576"},
			config: "offsets.topic.segment.bytes", value: "1048576", source: SourceStaticBroker, readOnly: true,
			synonyms: []string{"offsets.topic.segment.bytes=1048576@STATIC_BROKER_CONFIG", "offsets.topic.segment.bytes=104857600@DEFAULT_CONFIG"}},
		{name: "transaction.state.log.segment.bytes default", config: "transaction.state.log.segment.bytes",
			value: "104857600", source: SourceDefault, readOnly: true,
			synonyms: []string{"transaction.state.log.segment.bytes=104857600@DEFAULT_CONFIG"}},
		{name: "sensitive unset", config: "ssl.keystore.password", value: "<nil>", source: SourceDefault,
			readOnly: true, sensitive: true, synonyms: []string{}},
		{name: "sensitive set", static: map[string]string{"ssl.keystore.password": "hunter2"}, config: "ssl.keystore.password",
			value: "<nil>", source: SourceStaticBroker, readOnly: true, sensitive: true,
			synonyms: []string{"ssl.keystore.password=<nil>@STATIC_BROKER_CONFIG"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := entry(t, DescribeBroker(tc.static, tc.dynDefault, tc.dynNode), tc.config)
			if val(e.Value) != tc.value || e.Source != tc.source {
				t.Errorf("value %s source %s, want %s %s", val(e.Value), e.Source, tc.value, tc.source)
			}
			if e.ReadOnly != tc.readOnly || e.Sensitive != tc.sensitive {
				t.Errorf("read-only %v sensitive %v, want %v %v", e.ReadOnly, e.Sensitive, tc.readOnly, tc.sensitive)
			}
			if got := syn(e.Synonyms); !slices.Equal(got, tc.synonyms) {
				t.Errorf("synonyms\n got %q\nwant %q", got, tc.synonyms)
			}
		})
	}
}

func TestDescribeBrokerShape(t *testing.T) {
	entries := DescribeBroker(map[string]string{"ssl.key.password": "x", "ssl.truststore.password": "y"}, nil, nil)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
		if e.ReadOnly == IsDynamicBrokerConfig(e.Name) {
			t.Errorf("%s: read-only %v", e.Name, e.ReadOnly)
		}
		if e.Sensitive != (e.Type == TypePassword) {
			t.Errorf("%s: sensitive %v type %s", e.Name, e.Sensitive, e.Type)
		}
		if e.Sensitive && e.Value != nil {
			t.Errorf("%s: sensitive value shown", e.Name)
		}
		if e.Doc == "" {
			t.Errorf("%s: no doc", e.Name)
		}
		for _, s := range e.Synonyms {
			if e.Sensitive && s.Value != nil {
				t.Errorf("%s: sensitive synonym value shown", e.Name)
			}
		}
	}
	if !slices.Equal(names, BrokerConfigNames()) || !slices.IsSorted(names) {
		t.Errorf("entries not one per broker config in name order: %q", names)
	}
}

// TestDescribeAgreesWithResolve checks the invariant that DescribeTopic/DescribeBroker
// report exactly the values ResolveTopic/ResolveBroker use on MergeBroker's result, on
// random layers mixing valid, invalid, read-only and unknown values.
func TestDescribeAgreesWithResolve(t *testing.T) {
	pool := []string{"-3", "-1", "0", "1", "2", "13", "100", "0.3", "true", "false", "compact", "delete,compact",
		"zstd", "LogAppendTime", "*", "x", ""}
	rng := rand.New(rand.NewPCG(1, 2))
	randomMap := func(names []string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			if rng.IntN(4) == 0 {
				m[n] = pool[rng.IntN(len(pool))]
			}
		}
		if rng.IntN(3) == 0 {
			m["unknown.config"] = "1"
		}
		return m
	}
	topicNames, brokerNames := TopicConfigNames(), BrokerConfigNames()
	for i := range 500 {
		overrides := randomMap(topicNames)
		static, dynDefault, dynNode := randomMap(brokerNames), randomMap(brokerNames), randomMap(brokerNames)
		merged := MergeBroker(static, dynDefault, dynNode)

		eff := effectiveTopic(overrides, []layer{{SourceStaticBroker, merged}})
		for _, e := range DescribeTopic(overrides, static, dynDefault, dynNode) {
			if val(e.Value) != eff[e.Name].s {
				t.Fatalf("round %d: %s described %q, resolved %q\noverrides %v\nstatic %v\ndefault %v\nnode %v",
					i, e.Name, val(e.Value), eff[e.Name].s, overrides, static, dynDefault, dynNode)
			}
			if len(e.Synonyms) > 0 && e.Synonyms[0].Source != e.Source {
				t.Fatalf("round %d: %s source %s but first synonym %s", i, e.Name, e.Source, e.Synonyms[0].Source)
			}
		}
		if got, want := ResolveTopic(overrides, merged), topicFrom(eff); got != want {
			t.Fatalf("round %d: ResolveTopic differs from the effective values", i)
		}

		beff := effectiveBroker([]layer{{SourceStaticBroker, merged}})
		for _, e := range DescribeBroker(static, dynDefault, dynNode) {
			want := "<nil>"
			if v, ok := beff[e.Name]; ok && !e.Sensitive {
				want = v.s
			}
			if val(e.Value) != want {
				t.Fatalf("round %d: broker %s described %q, resolved %q", i, e.Name, val(e.Value), want)
			}
			if strings.HasPrefix(e.Source.String(), "DYNAMIC") && e.ReadOnly {
				t.Fatalf("round %d: read-only %s from %s", i, e.Name, e.Source)
			}
		}
	}
}

// TestConcurrentUse runs the API from several goroutines on shared inputs; under -race
// it shows that nothing shared (the catalogue, the inputs) is written.
func TestConcurrentUse(t *testing.T) {
	overrides := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"}
	static := map[string]string{"log.retention.hours": "24", "ssl.keystore.password": "x"}
	dyn := map[string]string{"log.segment.bytes": "1048576"}
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				merged := MergeBroker(static, dyn, nil)
				_ = ResolveTopic(overrides, merged)
				_ = ResolveBroker(merged)
				_ = DescribeTopic(overrides, static, dyn, nil)
				_ = DescribeBroker(static, dyn, nil)
				_ = ValidateTopicConfigs(overrides, merged)
			}
		}()
	}
	for range 4 {
		<-done
	}
}
