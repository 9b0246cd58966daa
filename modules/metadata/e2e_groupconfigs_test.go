package metadata_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestE2EGroupConfigs sets, describes and deletes group configs over the wire (kadm
// has no group config helpers: raw requests), across a restart.
func TestE2EGroupConfigs(t *testing.T) {
	b := testbroker.Start(t)
	ctx := testCtx(t)
	cl := b.Client(t)

	incr := func(cl *kgo.Client, group string, validateOnly bool, cfgs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.Configs = kmsg.ConfigResourceTypeGroupConfig, group, cfgs
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 {
			t.Fatalf("incremental alter: %v %+v", err, resp)
		}
		return resp.Resources[0]
	}
	cfg := func(name string, op kmsg.IncrementalAlterConfigOp, v *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, op, v
		return c
	}
	describe := func(cl *kgo.Client, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms, req.IncludeDocumentation = true, true
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe: %v %+v", err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	str := func(s string) *string { return &s }

	r := incr(cl, "payments", false,
		cfg("consumer.session.timeout.ms", kmsg.IncrementalAlterConfigOpSet, str("55000")),
		cfg("sluice.consumer.assignor", kmsg.IncrementalAlterConfigOpSet, str("uniform")))
	if r.ErrorCode != 0 {
		t.Fatalf("set: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := incr(cl, "payments", false, cfg("consumer.session.timeout.ms", kmsg.IncrementalAlterConfigOpSet, str("5"))); r.ErrorCode != kerr.InvalidConfig.Code {
		t.Errorf("bad value: %d", r.ErrorCode)
	}
	if r := incr(cl, "payments", true, cfg("sluice.consumer.assignor", kmsg.IncrementalAlterConfigOpDelete, nil)); r.ErrorCode != 0 {
		t.Errorf("validate only delete: %d", r.ErrorCode)
	}

	b.Restart(t)
	cl = b.Client(t)
	got := describe(cl, "payments")
	if c := got["consumer.session.timeout.ms"]; len(got) != 12 || c.Value == nil || *c.Value != "55000" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Errorf("session after restart: %+v", got)
	}
	if c := got["sluice.consumer.assignor"]; c.Value == nil || *c.Value != "uniform" {
		t.Errorf("assignor after restart: %+v", c)
	}
	if c := got["consumer.heartbeat.interval.ms"]; c.Value == nil || *c.Value != "5000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("heartbeat default: %+v", c)
	}

	if r := incr(cl, "payments", false,
		cfg("consumer.session.timeout.ms", kmsg.IncrementalAlterConfigOpDelete, nil),
		cfg("sluice.consumer.assignor", kmsg.IncrementalAlterConfigOpDelete, nil)); r.ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	for name, c := range describe(cl, "payments") {
		if c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s after delete: %+v", name, c)
		}
	}
}
