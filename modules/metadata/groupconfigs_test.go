package metadata

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// groupConfigsOf decodes the group's extension record (nil when there is none).
func groupConfigsOf(t *testing.T, m *Module, group string) map[string]string {
	t.Helper()
	v := m.Image().Extension(GroupConfigsNamespace, group)
	if v == nil {
		return nil
	}
	var out map[string]string
	if err := json.Unmarshal(v, &out); err != nil {
		t.Fatalf("group %s: extension %q is not a JSON object of strings: %v", group, v, err)
	}
	return out
}

func alterGroup(t *testing.T, fc *fakeContext, authz kernel.Authorizer, validateOnly bool, group string, kv ...string) kmsg.AlterConfigsResponseResource {
	t.Helper()
	return alterConfigs(t, fc, authz, validateOnly, kmsg.ConfigResourceTypeGroupConfig, group, kv...)
}

// alterConfigs sends an AlterConfigs of one resource, setting the name/value pairs kv,
// and returns the resource's result.
func alterConfigs(t *testing.T, fc *fakeContext, authz kernel.Authorizer, validateOnly bool, typ kmsg.ConfigResourceType, name string, kv ...string) kmsg.AlterConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], strPtr(kv[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	return call[*kmsg.AlterConfigsResponse](t, fc, authz, req).Resources[0]
}

func TestGroupConfigsIncremental(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	const g = kmsg.ConfigResourceTypeGroupConfig
	set := func(n, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return op(n, kmsg.IncrementalAlterConfigOpSet, strPtr(v))
	}
	del := func(n string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return op(n, kmsg.IncrementalAlterConfigOpDelete, nil)
	}
	mustOK := func(r kmsg.IncrementalAlterConfigsResponseResource) {
		t.Helper()
		if r.ErrorCode != 0 {
			t.Fatalf("alter: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
		}
	}

	// A group that does not exist yet can be configured.
	mustOK(incremental(t, fc, g, "orders", false, set(GroupConfigSessionTimeoutMs, " 50000 "), set(GroupConfigAssignor, "range")))
	if got := groupConfigsOf(t, m, "orders"); !maps.Equal(got, map[string]string{GroupConfigSessionTimeoutMs: "50000", GroupConfigAssignor: "range"}) {
		t.Fatalf("stored %v", got)
	}
	if v := string(m.Image().Extension(GroupConfigsNamespace, "orders")); v != `{"consumer.session.timeout.ms":"50000","sluice.consumer.assignor":"range"}` {
		t.Errorf("record value %s", v)
	}

	res := describeConfigs(t, fc, g, "orders")
	if res.ErrorCode != 0 || len(res.Configs) != len(groupConfigDefs) {
		t.Fatalf("describe: %d %+v", res.ErrorCode, res.Configs)
	}
	for _, c := range res.Configs {
		if c.ReadOnly || c.Documentation == nil {
			t.Errorf("%s: read-only %v, doc %v", c.Name, c.ReadOnly, c.Documentation)
		}
		switch c.Name {
		case GroupConfigSessionTimeoutMs:
			if derefOr(c.Value, "") != "50000" || c.Source != kmsg.ConfigSourceGroupConfig || c.IsDefault || c.ConfigType != kmsg.ConfigTypeInt ||
				len(c.ConfigSynonyms) != 2 || c.ConfigSynonyms[0].Source != kmsg.ConfigSourceGroupConfig ||
				c.ConfigSynonyms[1].Name != "group.consumer.session.timeout.ms" || derefOr(c.ConfigSynonyms[1].Value, "") != "45000" {
				t.Errorf("session: %+v", c)
			}
		case GroupConfigHeartbeatIntervalMs:
			if derefOr(c.Value, "") != "5000" || c.Source != kmsg.ConfigSourceDefaultConfig || !c.IsDefault ||
				len(c.ConfigSynonyms) != 1 || c.ConfigSynonyms[0].Name != "group.consumer.heartbeat.interval.ms" {
				t.Errorf("heartbeat: %+v", c)
			}
		case GroupConfigAssignor:
			if derefOr(c.Value, "") != "range" || c.Source != kmsg.ConfigSourceGroupConfig || c.ConfigType != kmsg.ConfigTypeString {
				t.Errorf("assignor: %+v", c)
			}
		default:
			if groupConfigDefOf(c.Name) == nil || c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("unexpected config %+v", c)
			}
		}
	}
	if only := describeConfigs(t, fc, g, "orders", GroupConfigAssignor); len(only.Configs) != 1 || only.Configs[0].Name != GroupConfigAssignor {
		t.Errorf("filtered: %+v", only.Configs)
	}

	// validate_only changes nothing.
	mustOK(incremental(t, fc, g, "orders", true, set(GroupConfigHeartbeatIntervalMs, "6000"), del(GroupConfigAssignor)))
	if got := groupConfigsOf(t, m, "orders"); len(got) != 2 || got[GroupConfigHeartbeatIntervalMs] != "" {
		t.Errorf("validate only changed %v", got)
	}

	for _, tc := range []struct {
		name string
		grp  string
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want *kerr.Error
	}{
		{"unknown", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("consumer.max.size", "1")}, kerr.InvalidConfig},
		{"unknown delete", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{del("nope")}, kerr.InvalidConfig},
		{"not a number", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigSessionTimeoutMs, "soon")}, kerr.InvalidConfig},
		{"session too small", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigSessionTimeoutMs, "44999")}, kerr.InvalidConfig},
		{"session too large", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigSessionTimeoutMs, "60001")}, kerr.InvalidConfig},
		{"heartbeat too small", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigHeartbeatIntervalMs, "4999")}, kerr.InvalidConfig},
		{"heartbeat too large", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigHeartbeatIntervalMs, "15001")}, kerr.InvalidConfig},
		{"empty assignor", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigAssignor, " ")}, kerr.InvalidConfig},
		{"long assignor", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigAssignor, strings.Repeat("a", 256))}, kerr.InvalidConfig},
		{"append", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(GroupConfigAssignor, kmsg.IncrementalAlterConfigOpAppend, strPtr("x"))}, kerr.InvalidConfig},
		{"subtract", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(GroupConfigAssignor, kmsg.IncrementalAlterConfigOpSubtract, strPtr("x"))}, kerr.InvalidConfig},
		{"duplicate", "orders", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigAssignor, "a"), del(GroupConfigAssignor)}, kerr.InvalidRequest},
		{"empty group", "", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigAssignor, "a")}, kerr.InvalidRequest},
		{"long group", strings.Repeat("g", 256), []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(GroupConfigAssignor, "a")}, kerr.InvalidRequest},
	} {
		if r := incremental(t, fc, g, tc.grp, false, tc.ops...); r.ErrorCode != tc.want.Code || r.ErrorMessage == nil {
			t.Errorf("%s: code %d (%s), want %v", tc.name, r.ErrorCode, derefOr(r.ErrorMessage, ""), tc.want)
		}
	}
	if got := groupConfigsOf(t, m, "orders"); len(got) != 2 {
		t.Errorf("failed alters changed %v", got)
	}

	// The heartbeat interval must stay below the session timeout; the broker's default
	// counts for an unset one.
	_, fc2 := startModule(t, t.TempDir(), func(_ *Module, fc *fakeContext) {
		fc.info.StaticConfigs = map[string]string{"group.consumer.session.timeout.ms": "6000"}
	})
	if r := incremental(t, fc2, g, "x", false, set(GroupConfigHeartbeatIntervalMs, "6000")); r.ErrorCode != kerr.InvalidConfig.Code {
		t.Errorf("heartbeat >= default session: %d", r.ErrorCode)
	}
	if r := incremental(t, fc2, g, "x", false, set(GroupConfigHeartbeatIntervalMs, "5999")); r.ErrorCode != 0 {
		t.Errorf("heartbeat < default session: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if r := incremental(t, fc2, g, "x", false, set(GroupConfigAssignor, "uniform")); r.ErrorCode != 0 {
		t.Errorf("assignor: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if v, src, _ := configValue(describeConfigs(t, fc2, g, "y", GroupConfigSessionTimeoutMs), GroupConfigSessionTimeoutMs); v != "6000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("default from the static broker config: %s %v", v, src)
	}

	// Deleting every config removes the key.
	mustOK(incremental(t, fc, g, "orders", false, del(GroupConfigSessionTimeoutMs)))
	if got := groupConfigsOf(t, m, "orders"); !maps.Equal(got, map[string]string{GroupConfigAssignor: "range"}) {
		t.Errorf("after delete %v", got)
	}
	mustOK(incremental(t, fc, g, "orders", false, del(GroupConfigAssignor), del(GroupConfigHeartbeatIntervalMs)))
	if _, ok := m.Image().Extensions[GroupConfigsNamespace]["orders"]; ok {
		t.Errorf("key still present: %v", m.Image().Extensions)
	}
	res = describeConfigs(t, fc, g, "orders")
	for _, c := range res.Configs {
		if c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s after delete: %+v", c.Name, c)
		}
		if c.Name == GroupConfigAssignor && derefOr(c.Value, "<nil>") != "" {
			t.Errorf("assignor default %q", derefOr(c.Value, "<nil>"))
		}
	}
}

func TestGroupConfigsAlterReplace(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	if r := alterGroup(t, fc, nil, false, "g", GroupConfigSessionTimeoutMs, "60000", GroupConfigHeartbeatIntervalMs, "15000"); r.ErrorCode != 0 {
		t.Fatalf("alter: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if r := alterGroup(t, fc, nil, false, "g", GroupConfigAssignor, "range"); r.ErrorCode != 0 {
		t.Fatalf("alter: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if got := groupConfigsOf(t, m, "g"); !maps.Equal(got, map[string]string{GroupConfigAssignor: "range"}) {
		t.Errorf("full replace: %v", got)
	}
	if r := alterGroup(t, fc, nil, true, "g"); r.ErrorCode != 0 || groupConfigsOf(t, m, "g") == nil {
		t.Errorf("validate only: %d %v", r.ErrorCode, groupConfigsOf(t, m, "g"))
	}
	if r := alterGroup(t, fc, nil, false, "g", GroupConfigSessionTimeoutMs, "1"); r.ErrorCode != kerr.InvalidConfig.Code {
		t.Errorf("bad value: %d", r.ErrorCode)
	}
	if r := alterGroup(t, fc, nil, false, "g", "consumer.assignor", "x"); r.ErrorCode != kerr.InvalidConfig.Code || !strings.Contains(derefOr(r.ErrorMessage, ""), "consumer.assignor") {
		t.Errorf("unknown: %d %s", r.ErrorCode, derefOr(r.ErrorMessage, ""))
	}
	if r := alterGroup(t, fc, nil, false, "g"); r.ErrorCode != 0 || m.Image().Extension(GroupConfigsNamespace, "g") != nil {
		t.Errorf("empty replace: %d %v", r.ErrorCode, m.Image().Extensions)
	}
}

// groupDeny denies ops on groups.
type groupDeny map[kernel.Operation]bool

func (d groupDeny) Authorize(_ context.Context, _ kernel.Principal, _ string, op kernel.Operation, r kernel.Resource) bool {
	return r.Type != kernel.ResGroup || !d[op]
}

func TestGroupConfigsAuthorization(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	deny := groupDeny{kernel.OpAlterConfigs: true, kernel.OpDescribeConfigs: true}
	if r := alterGroup(t, fc, deny, false, "g", GroupConfigAssignor, "range"); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("alter: %d", r.ErrorCode)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	res.Configs = append(res.Configs, op(GroupConfigAssignor, kmsg.IncrementalAlterConfigOpSet, strPtr("range")))
	req.Resources = append(req.Resources, res)
	if r := call[*kmsg.IncrementalAlterConfigsResponse](t, fc, deny, req).Resources[0]; r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("incremental: %d", r.ErrorCode)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	dreq.Resources = append(dreq.Resources, dres)
	if r := call[*kmsg.DescribeConfigsResponse](t, fc, deny, dreq).Resources[0]; r.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(r.Configs) != 0 {
		t.Errorf("describe: %d %+v", r.ErrorCode, r.Configs)
	}
	// Describe is allowed with DESCRIBE_CONFIGS alone.
	if r := call[*kmsg.DescribeConfigsResponse](t, fc, groupDeny{kernel.OpAlterConfigs: true}, dreq).Resources[0]; r.ErrorCode != 0 || len(r.Configs) != len(groupConfigDefs) {
		t.Errorf("describe allowed: %d %+v", r.ErrorCode, r.Configs)
	}
	if m.Image().Extensions[GroupConfigsNamespace] != nil {
		t.Errorf("denied alters stored %v", m.Image().Extensions)
	}
}

func TestGroupConfigsRestart(t *testing.T) {
	dir := t.TempDir()
	m, fc := startModule(t, dir, func(m *Module, _ *fakeContext) { m.SnapshotThreshold = 1 })
	if r := alterGroup(t, fc, nil, false, "a", GroupConfigHeartbeatIntervalMs, "7000"); r.ErrorCode != 0 {
		t.Fatalf("alter: %d", r.ErrorCode)
	}
	takeSnapshot(t, m)
	if r := alterGroup(t, fc, nil, false, "b", GroupConfigAssignor, "uniform"); r.ErrorCode != 0 { // from the log
		t.Fatalf("alter: %d", r.ErrorCode)
	}
	stopModule(t, m)

	m2, fc2 := startModule(t, dir)
	if got := groupConfigsOf(t, m2, "a"); !maps.Equal(got, map[string]string{GroupConfigHeartbeatIntervalMs: "7000"}) {
		t.Errorf("a after restart: %v", got)
	}
	if v, src, _ := configValue(describeConfigs(t, fc2, kmsg.ConfigResourceTypeGroupConfig, "b", GroupConfigAssignor), GroupConfigAssignor); v != "uniform" || src != kmsg.ConfigSourceGroupConfig {
		t.Errorf("b after restart: %s %v", v, src)
	}
}

// TestGroupConfigsConcurrent: concurrent edits of different configs of one group are
// not lost (each rewrites the whole value, so they are serialised).
func TestGroupConfigsConcurrent(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	h := fc.handlers[kmsg.IncrementalAlterConfigs.Int16()]
	vals := map[string][]string{
		GroupConfigSessionTimeoutMs:    {"50000", "51000"},
		GroupConfigHeartbeatIntervalMs: {"6000", "7000"},
		GroupConfigAssignor:            {"range", "uniform"},
	}
	var wg sync.WaitGroup
	for name, vs := range vals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				res := kmsg.NewIncrementalAlterConfigsRequestResource()
				res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
				res.Configs = append(res.Configs, op(name, kmsg.IncrementalAlterConfigOpSet, strPtr(vs[i%2])))
				req.Resources = append(req.Resources, res)
				resp, err := h(context.Background(), &kernel.Request{
					Key: req.Key(), Version: req.Version, Body: req, Authorizer: kernel.AllowAll{},
					Conn: &kernel.ConnInfo{Listener: "PLAINTEXT", Principal: kernel.Anonymous},
				})
				if err != nil || resp.Msg.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode != 0 {
					t.Errorf("%s: %v %+v", name, err, resp.Msg)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := map[string]string{}
	for name, vs := range vals {
		want[name] = vs[1]
	}
	if got := groupConfigsOf(t, m, "g"); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestShareGroupConfigValues(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
		ok                bool
	}{
		{GroupConfigShareAutoOffsetReset, "earliest", "earliest", true},
		{GroupConfigShareAutoOffsetReset, "by_duration:PT1H30M", "by_duration:PT1H30M", true},
		{GroupConfigShareAutoOffsetReset, "by_duration:P1DT0.5S", "by_duration:P1DT0.5S", true},
		{GroupConfigShareAutoOffsetReset, "by_duration:PT", "", false},
		{GroupConfigShareAutoOffsetReset, "by_duration:-PT1H", "", false},
		{GroupConfigShareAutoOffsetReset, "none", "", false},
		{GroupConfigShareIsolationLevel, "read_committed", "read_committed", true},
		{GroupConfigShareIsolationLevel, "serializable", "", false},
		{GroupConfigShareLockDurationMs, " 15000 ", "15000", true},
		{GroupConfigShareLockDurationMs, "999", "", false},
		{GroupConfigShareDeliveryLimit, "11", "", false},
		{GroupConfigShareMaxRecordLocks, "100", "100", true},
		{GroupConfigDeadLetterCopy, "TRUE", "true", true},
		{GroupConfigDeadLetterTopic, "orders-dlq", "orders-dlq", true},
	} {
		got, err := validateGroupConfig(tc.name, tc.value)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s=%q: %q, %v", tc.name, tc.value, got, err)
		}
	}
}
