package metadata

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeConfigs(t *testing.T, fc *fakeContext, typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms, req.IncludeDocumentation = 4, true, true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = typ, name, names
	req.Resources = append(req.Resources, res)
	return call[*kmsg.DescribeConfigsResponse](t, fc, nil, req).Resources[0]
}

func configValue(res kmsg.DescribeConfigsResponseResource, name string) (string, kmsg.ConfigSource, bool) {
	for _, c := range res.Configs {
		if c.Name == name {
			return derefOr(c.Value, "<nil>"), c.Source, true
		}
	}
	return "", 0, false
}

func incremental(t *testing.T, fc *fakeContext, typ kmsg.ConfigResourceType, name string, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.Configs = typ, name, ops
	req.Resources = append(req.Resources, res)
	return call[*kmsg.IncrementalAlterConfigsResponse](t, fc, nil, req).Resources[0]
}

func op(name string, o kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, o, value
	return c
}

func TestDescribeConfigsHandler(t *testing.T) {
	_, fc := startModule(t, t.TempDir(), func(_ *Module, fc *fakeContext) {
		fc.info.StaticConfigs = map[string]string{"log.retention.ms": "7000"}
	})
	createTopic(t, fc, "t", 1, map[string]string{"segment.ms": "60000"})

	res := describeConfigs(t, fc, kmsg.ConfigResourceTypeTopic, "t")
	if res.ErrorCode != 0 || len(res.Configs) < 10 {
		t.Fatalf("topic: code %d, %d configs", res.ErrorCode, len(res.Configs))
	}
	if v, src, _ := configValue(res, "segment.ms"); v != "60000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("segment.ms = %s from %v", v, src)
	}
	if v, src, _ := configValue(res, "retention.ms"); v != "7000" || src != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("retention.ms = %s from %v", v, src)
	}
	only := describeConfigs(t, fc, kmsg.ConfigResourceTypeTopic, "t", "segment.ms")
	if len(only.Configs) != 1 || len(only.Configs[0].ConfigSynonyms) == 0 || only.Configs[0].Documentation == nil {
		t.Errorf("filtered: %+v", only.Configs)
	}

	broker := describeConfigs(t, fc, kmsg.ConfigResourceTypeBroker, "1", "log.retention.ms")
	if v, src, _ := configValue(broker, "log.retention.ms"); broker.ErrorCode != 0 || v != "7000" || src != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("broker: %d %s %v", broker.ErrorCode, v, src)
	}
	if def := describeConfigs(t, fc, kmsg.ConfigResourceTypeBroker, ""); def.ErrorCode != 0 || len(def.Configs) != 0 {
		t.Errorf("cluster default before any change: %+v", def)
	}
	for _, tc := range []struct {
		name string
		typ  kmsg.ConfigResourceType
		res  string
		want *kerr.Error
	}{
		{"missing topic", kmsg.ConfigResourceTypeTopic, "nope", kerr.UnknownTopicOrPartition},
		{"invalid topic", kmsg.ConfigResourceTypeTopic, "no/pe", kerr.InvalidTopicException},
		{"other broker", kmsg.ConfigResourceTypeBroker, "2", kerr.InvalidRequest},
		{"not a number", kmsg.ConfigResourceTypeBroker, "one", kerr.InvalidRequest},
		{"empty group", kmsg.ConfigResourceTypeGroupConfig, "", kerr.InvalidRequest},
		{"empty client metrics name", kmsg.ConfigResourceTypeClientMetrics, "", kerr.InvalidRequest},
	} {
		if got := describeConfigs(t, fc, tc.typ, tc.res); got.ErrorCode != tc.want.Code {
			t.Errorf("%s: code %d, want %v", tc.name, got.ErrorCode, tc.want)
		}
	}
	if got := describeConfigs(t, fc, kmsg.ConfigResourceTypeBrokerLogger, "1"); got.ErrorCode != 0 || len(got.Configs) != 0 {
		t.Errorf("broker logger: %+v", got)
	}
}

func TestAlterConfigsHandler(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	createTopic(t, fc, "t", 1, map[string]string{"segment.ms": "60000"})
	alter := func(validateOnly bool, typ kmsg.ConfigResourceType, name string, kv ...string) kmsg.AlterConfigsResponseResource {
		return alterConfigs(t, fc, nil, validateOnly, typ, name, kv...)
	}
	topicConfigs := func() map[string]string { return m.Image().Topic("t").Configs }

	if r := alter(false, kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "100"); r.ErrorCode != 0 {
		t.Fatalf("alter: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if got := topicConfigs(); !maps.Equal(got, map[string]string{"retention.ms": "100"}) {
		t.Errorf("full replace: %v", got)
	}
	if r := alter(true, kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "200"); r.ErrorCode != 0 || topicConfigs()["retention.ms"] != "100" {
		t.Errorf("validate only: %d %v", r.ErrorCode, topicConfigs())
	}
	for _, tc := range []struct {
		name string
		typ  kmsg.ConfigResourceType
		res  string
		kv   []string
		want *kerr.Error
	}{
		{"bad value", kmsg.ConfigResourceTypeTopic, "t", []string{"retention.ms", "x"}, kerr.InvalidConfig},
		{"unknown", kmsg.ConfigResourceTypeTopic, "t", []string{"nope", "1"}, kerr.InvalidConfig},
		{"duplicate", kmsg.ConfigResourceTypeTopic, "t", []string{"retention.ms", "1", "retention.ms", "2"}, kerr.InvalidRequest},
		{"missing topic", kmsg.ConfigResourceTypeTopic, "u", []string{"retention.ms", "1"}, kerr.UnknownTopicOrPartition},
		{"read-only broker config", kmsg.ConfigResourceTypeBroker, "", []string{"auto.create.topics.enable", "false"}, kerr.InvalidRequest},
		{"other broker", kmsg.ConfigResourceTypeBroker, "3", []string{"log.retention.ms", "1"}, kerr.InvalidRequest},
		{"broker logger", kmsg.ConfigResourceTypeBrokerLogger, "1", []string{"root", "DEBUG"}, kerr.InvalidRequest},
	} {
		if r := alter(false, tc.typ, tc.res, tc.kv...); r.ErrorCode != tc.want.Code || r.ErrorMessage == nil {
			t.Errorf("%s: code %d (%s), want %v", tc.name, r.ErrorCode, derefOr(r.ErrorMessage, ""), tc.want)
		}
	}
	if got := topicConfigs(); !maps.Equal(got, map[string]string{"retention.ms": "100"}) {
		t.Errorf("failed alters changed configs: %v", got)
	}
	if r := alter(false, kmsg.ConfigResourceTypeBroker, "1", "log.retention.ms", "5000"); r.ErrorCode != 0 {
		t.Fatalf("broker alter: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if got := m.Image().BrokerConfigs["1"]; !maps.Equal(got, map[string]string{"log.retention.ms": "5000"}) {
		t.Errorf("broker configs: %v", got)
	}
	res := describeConfigs(t, fc, kmsg.ConfigResourceTypeTopic, "t", "segment.ms", "retention.ms", "log.retention.ms")
	if v, src, _ := configValue(res, "retention.ms"); v != "100" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms after alters: %s %v", v, src)
	}
	if v, src, _ := configValue(res, "segment.ms"); v == "60000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.ms should be back to its default: %s %v", v, src)
	}
}

func TestIncrementalAlterConfigsHandler(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	createTopic(t, fc, "t", 1, map[string]string{"segment.ms": "60000", "retention.ms": "5"})
	topic := kmsg.ConfigResourceTypeTopic
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	app, sub := kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract

	if r := incremental(t, fc, topic, "t", false, op("retention.ms", set, strPtr("99")), op("segment.ms", del, nil)); r.ErrorCode != 0 {
		t.Fatalf("set/delete: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if got := m.Image().Topic("t").Configs; !maps.Equal(got, map[string]string{"retention.ms": "99"}) {
		t.Errorf("after set/delete: %v", got)
	}
	if r := incremental(t, fc, topic, "t", false, op("cleanup.policy", app, strPtr("compact"))); r.ErrorCode != 0 {
		t.Fatalf("append: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if got := m.Image().Topic("t").Configs["cleanup.policy"]; got != "delete,compact" {
		t.Errorf("append to the default list: %q", got)
	}
	if r := incremental(t, fc, topic, "t", false, op("cleanup.policy", sub, strPtr("delete"))); r.ErrorCode != 0 {
		t.Fatalf("subtract: %d", r.ErrorCode)
	}
	if got := m.Image().Topic("t").Configs["cleanup.policy"]; got != "compact" {
		t.Errorf("subtract: %q", got)
	}
	if r := incremental(t, fc, topic, "t", true, op("retention.ms", set, strPtr("1"))); r.ErrorCode != 0 || m.Image().Topic("t").Configs["retention.ms"] != "99" {
		t.Errorf("validate only applied: %d", r.ErrorCode)
	}
	for _, tc := range []struct {
		name string
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want *kerr.Error
	}{
		{"append to non-list", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", app, strPtr("1"))}, kerr.InvalidConfig},
		{"set null", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", set, nil)}, kerr.InvalidRequest},
		{"bad value", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", set, strPtr("-5"))}, kerr.InvalidConfig},
		{"bad list value", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", app, strPtr("shred"))}, kerr.InvalidConfig},
		{"duplicate", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", set, strPtr("1")), op("retention.ms", del, nil)}, kerr.InvalidRequest},
		{"delete unknown", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.mss", del, nil)}, kerr.InvalidConfig},
		{"unknown op", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", 9, strPtr("1"))}, kerr.InvalidRequest},
	} {
		if r := incremental(t, fc, topic, "t", false, tc.ops...); r.ErrorCode != tc.want.Code {
			t.Errorf("%s: code %d (%s), want %v", tc.name, r.ErrorCode, derefOr(r.ErrorMessage, ""), tc.want)
		}
	}

	// Broker: cluster default and per node; DELETE removes the key.
	broker := kmsg.ConfigResourceTypeBroker
	if r := incremental(t, fc, broker, "", false, op("log.retention.ms", set, strPtr("1000"))); r.ErrorCode != 0 {
		t.Fatalf("cluster default: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if r := incremental(t, fc, broker, "1", false, op("log.retention.ms", set, strPtr("2000"))); r.ErrorCode != 0 {
		t.Fatalf("node: %d", r.ErrorCode)
	}
	res := describeConfigs(t, fc, broker, "1", "log.retention.ms")
	if v, src, _ := configValue(res, "log.retention.ms"); v != "2000" || src != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("node value: %s %v", v, src)
	}
	def := describeConfigs(t, fc, broker, "")
	if v, src, ok := configValue(def, "log.retention.ms"); !ok || v != "1000" || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(def.Configs) != 1 {
		t.Errorf("cluster default: %+v", def.Configs)
	}
	if r := incremental(t, fc, broker, "1", false, op("log.retention.ms", del, nil)); r.ErrorCode != 0 {
		t.Fatalf("delete: %d", r.ErrorCode)
	}
	if _, ok := m.Image().BrokerConfigs["1"]; ok {
		t.Errorf("node configs after delete: %v", m.Image().BrokerConfigs)
	}
	if r := incremental(t, fc, broker, "", false, op("node.id", set, strPtr("5"))); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("read-only: %d", r.ErrorCode)
	}
}

func TestEditList(t *testing.T) {
	for _, tc := range []struct {
		list, v string
		add     bool
		want    string
	}{
		{"", "a", true, "a"},
		{"a,b", "b,c", true, "a,b,c"},
		{"a, b ,c", "b", false, "a,c"},
		{"a", "a", false, ""},
		{"a", "z", false, "a"},
		{"a,b,a,c", "a", false, "b,a,c"},
		{"a,b,a,c", "a,a,c", false, "b"},
		{"a", "b,b", true, "a,b"},
	} {
		if got := editList(tc.list, tc.v, tc.add); got != tc.want {
			t.Errorf("editList(%q, %q, %v) = %q, want %q", tc.list, tc.v, tc.add, got, tc.want)
		}
	}
}

// TestDescribeConfigsLogCleaner: the log cleaner's broker configs and the internal
// topics' segment sizes are described with Kafka's defaults, sources and read-only
// flags, and the dynamic ones can be changed cluster-wide.
func TestDescribeConfigsLogCleaner(t *testing.T) {
	_, fc := startModule(t, t.TempDir(), func(_ *Module, fc *fakeContext) {
		fc.info.StaticConfigs = map[string]string{"offsets.topic.segment.bytes": "1048576"}
	})
	broker := kmsg.ConfigResourceTypeBroker
	want := []struct {
		name, value string
		src         kmsg.ConfigSource
		readOnly    bool
	}{
		{"log.cleaner.enable", "true", kmsg.ConfigSourceDefaultConfig, true},
		{"log.cleaner.threads", "1", kmsg.ConfigSourceDefaultConfig, false},
		{"log.cleaner.backoff.ms", "15000", kmsg.ConfigSourceDefaultConfig, false},
		{"log.cleaner.dedupe.buffer.size", "134217728", kmsg.ConfigSourceDefaultConfig, false},
		{"log.cleaner.io.buffer.size", "524288", kmsg.ConfigSourceDefaultConfig, false},
		{"log.cleaner.io.buffer.load.factor", "0.9", kmsg.ConfigSourceDefaultConfig, false},
		{"log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", kmsg.ConfigSourceDefaultConfig, false},
		{"offsets.topic.segment.bytes", "1048576", kmsg.ConfigSourceStaticBrokerConfig, true},
		{"transaction.state.log.segment.bytes", "104857600", kmsg.ConfigSourceDefaultConfig, true},
	}
	var names []string
	for _, w := range want {
		names = append(names, w.name)
	}
	res := describeConfigs(t, fc, broker, "1", names...)
	if res.ErrorCode != 0 || len(res.Configs) != len(want) {
		t.Fatalf("code %d, %d configs", res.ErrorCode, len(res.Configs))
	}
	byName := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range res.Configs {
		byName[c.Name] = c
	}
	for _, w := range want {
		c := byName[w.name]
		if c.Name != w.name || derefOr(c.Value, "<nil>") != w.value || c.Source != w.src || c.ReadOnly != w.readOnly {
			t.Errorf("%s = %s from %v read-only %v, want %s from %v read-only %v",
				c.Name, derefOr(c.Value, "<nil>"), c.Source, c.ReadOnly, w.value, w.src, w.readOnly)
		}
	}

	set := kmsg.IncrementalAlterConfigOpSet
	if r := incremental(t, fc, broker, "", false, op("log.cleaner.threads", set, strPtr("2"))); r.ErrorCode != 0 {
		t.Fatalf("log.cleaner.threads: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	res = describeConfigs(t, fc, broker, "1", "log.cleaner.threads")
	if v, src, _ := configValue(res, "log.cleaner.threads"); v != "2" || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("log.cleaner.threads after set: %s %v", v, src)
	}
	for _, tc := range []struct{ name, value string }{
		{"log.cleaner.enable", "false"},
		{"offsets.topic.segment.bytes", "1024"},
		{"transaction.state.log.segment.bytes", "1024"},
	} {
		if r := incremental(t, fc, broker, "", false, op(tc.name, set, strPtr(tc.value))); r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("%s is read-only: code %d", tc.name, r.ErrorCode)
		}
	}
	if r := incremental(t, fc, broker, "", false, op("log.cleaner.threads", set, strPtr("-1"))); r.ErrorCode != kerr.InvalidConfig.Code {
		t.Errorf("log.cleaner.threads=-1: code %d", r.ErrorCode)
	}
}
