package metadata_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestConfigAuditRefusesTieredStorage: remote.storage.enable=true promises a remote
// tier Sluice does not have, so creating or altering a topic with it is INVALID_CONFIG
// (as Kafka on a broker without remote storage), and false is still accepted.
func TestConfigAuditRefusesTieredStorage(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Admin(t)
	ctx := testCtx(t)
	on, off := "true", "false"
	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &on}, "tiered")
	if err == nil {
		err = res.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("create with remote.storage.enable=true: %v, want INVALID_CONFIG", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &off}, "local"); err != nil {
		t.Fatalf("create with remote.storage.enable=false: %v", err)
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: &on}}, "local")
	if err == nil {
		err = rs[0].Err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("alter to remote.storage.enable=true: %v, want INVALID_CONFIG", err)
	}
}

// TestConfigAuditNoEffectIsVisible: a config Sluice accepts without acting on it
// (Kafka clients and tools set them) is taken, and DescribeConfigs' documentation
// says so, with the reason, to the client that asks.
func TestConfigAuditNoEffectIsVisible(t *testing.T) {
	b := testbroker.Start(t)
	ctx := testCtx(t)
	on := "true"
	res, err := b.Admin(t).CreateTopic(ctx, 1, 1, map[string]*string{"preallocate": &on}, "prealloc")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create with preallocate=true: %v", err)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "prealloc", []string{"preallocate"}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	cs := resp.Resources[0].Configs
	if len(cs) != 1 || cs[0].Value == nil || *cs[0].Value != "true" || cs[0].Documentation == nil ||
		!strings.Contains(*cs[0].Documentation, "No effect in Sluice") {
		t.Fatalf("preallocate described as %+v", cs)
	}
}
