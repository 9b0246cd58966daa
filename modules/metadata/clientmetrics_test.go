package metadata

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/clientmetrics"
)

// CLIENT_METRICS config resources (KIP-714): set, appended to, described with their
// sources, refused when invalid, listed, and gone once their last config is deleted.
func TestClientMetricsConfigs(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	const cm = kmsg.ConfigResourceTypeClientMetrics
	set := func(n, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return op(n, kmsg.IncrementalAlterConfigOpSet, strPtr(v))
	}
	stored := func(name string) map[string]string {
		cfg, err := clientmetrics.Decode(m.Image().Extension(clientmetrics.Namespace, name))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if r := incremental(t, fc, cm, "lag", false, set("metrics", " org.apache.kafka.consumer. , org.apache.kafka.producer.record"),
		set("interval.ms", "1000"), set("match", "client_id=app-.*")); r.ErrorCode != 0 {
		t.Fatalf("set: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	want := map[string]string{"metrics": "org.apache.kafka.consumer.,org.apache.kafka.producer.record", "interval.ms": "1000", "match": "client_id=app-.*"}
	if got := stored("lag"); !maps.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	if r := incremental(t, fc, cm, "lag", false, op("match", kmsg.IncrementalAlterConfigOpAppend, strPtr("client_software_name=apache-kafka-java"))); r.ErrorCode != 0 {
		t.Fatalf("append: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	res := describeConfigs(t, fc, cm, "lag")
	if v, src, _ := configValue(res, "match"); res.ErrorCode != 0 || v != "client_id=app-.*,client_software_name=apache-kafka-java" || src != kmsg.ConfigSourceClientMetricsConfig {
		t.Errorf("described match %q from %v (%d)", v, src, res.ErrorCode)
	}
	if v, src, _ := configValue(describeConfigs(t, fc, cm, "other"), "interval.ms"); v != "300000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("an unset subscription's interval.ms: %q from %v", v, src)
	}
	s, err := clientmetrics.Parse("lag", stored("lag"))
	if err != nil || s.IntervalMs != 1000 || len(s.Metrics) != 2 {
		t.Fatalf("parsed %+v %v", s, err)
	}
	if !s.Matches(clientmetrics.Client{ClientID: "app-1", SoftwareName: "apache-kafka-java"}) ||
		s.Matches(clientmetrics.Client{ClientID: "app-1", SoftwareName: "librdkafka"}) ||
		s.Matches(clientmetrics.Client{ClientID: "xapp-1", SoftwareName: "apache-kafka-java"}) {
		t.Error("selectors: whole-value matches of every key expected")
	}

	for _, tc := range []struct {
		name string
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want *kerr.Error
	}{
		{"unknown config", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("metric", "a")}, kerr.InvalidConfig},
		{"interval too small", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("interval.ms", "99")}, kerr.InvalidConfig},
		{"interval too large", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("interval.ms", "3600001")}, kerr.InvalidConfig},
		{"interval not a number", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("interval.ms", "soon")}, kerr.InvalidConfig},
		{"match key", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("match", "client_name=x")}, kerr.InvalidConfig},
		{"match without =", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("match", "client_id")}, kerr.InvalidConfig},
		{"match twice", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("match", "client_id=a,client_id=b")}, kerr.InvalidConfig},
		{"bad regex", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("match", "client_id=(")}, kerr.InvalidConfig},
		{"append to the interval", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("interval.ms", kmsg.IncrementalAlterConfigOpAppend, strPtr("1"))}, kerr.InvalidConfig},
	} {
		if r := incremental(t, fc, cm, "lag", false, tc.ops...); r.ErrorCode != tc.want.Code || r.ErrorMessage == nil {
			t.Errorf("%s: code %d (%s), want %v", tc.name, r.ErrorCode, derefOr(r.ErrorMessage, ""), tc.want)
		}
	}

	list := kmsg.NewPtrListConfigResourcesRequest()
	list.Version = 0 // KIP-1000's ListClientMetricsResources
	lr := call[*kmsg.ListConfigResourcesResponse](t, fc, nil, list)
	if lr.ErrorCode != 0 || len(lr.ConfigResources) != 1 || lr.ConfigResources[0].Name != "lag" {
		t.Errorf("ListConfigResources v0: %+v", lr)
	}
	del := func(n string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return op(n, kmsg.IncrementalAlterConfigOpDelete, nil)
	}
	if r := incremental(t, fc, cm, "lag", false, del("metrics"), del("interval.ms"), del("match")); r.ErrorCode != 0 {
		t.Fatalf("delete: %d", r.ErrorCode)
	}
	if v := m.Image().Extension(clientmetrics.Namespace, "lag"); v != nil {
		t.Errorf("a subscription without configs is still stored: %s", v)
	}
}
