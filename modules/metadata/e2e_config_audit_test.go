package metadata_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

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
