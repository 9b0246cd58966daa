package metadata_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/modules/metadata"
)

// pinned returns a client of b that sends key at version v at most.
func pinned(t *testing.T, b *testbroker.Broker, key int16, v int16) *kgo.Client {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key, v)
	return b.Client(t, kgo.MaxVersions(vs))
}

// apiVersions sends ApiVersions at version v through a new client and returns the
// answer.
func apiVersions(t *testing.T, b *testbroker.Broker, v int16) *kmsg.ApiVersionsResponse {
	t.Helper()
	return apiVersionsWith(t, pinned(t, b, 18, v), v)
}

// apiVersionsWith is apiVersions through cl, which must send ApiVersions at v.
func apiVersionsWith(t *testing.T, cl *kgo.Client, v int16) *kmsg.ApiVersionsResponse {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice-test", "1"
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v%d: %v", v, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

func supported(resp *kmsg.ApiVersionsResponse) map[string][2]int16 {
	m := map[string][2]int16{}
	for _, f := range resp.SupportedFeatures {
		m[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
	}
	return m
}

func finalized(t *testing.T, resp *kmsg.ApiVersionsResponse) map[string]int16 {
	t.Helper()
	m := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		if f.MinVersionLevel != f.MaxVersionLevel {
			t.Errorf("finalized %s: min %d max %d, want equal", f.Name, f.MinVersionLevel, f.MaxVersionLevel)
		}
		m[f.Name] = f.MaxVersionLevel
	}
	return m
}

// waitDefaults waits until b's cluster has its default levels: the controller
// finalizes them just after it starts leading, which may be after b is ready.
func waitDefaults(t *testing.T, b *testbroker.Broker) {
	t.Helper()
	cl := pinned(t, b, 18, 4) // one client for every poll
	testbroker.WaitFor(t, 10*time.Second, "the default feature levels", func() string {
		if f := finalized(t, apiVersionsWith(t, cl, 4)); f["share.version"] != 1 || f["metadata.version"] == 0 {
			return fmt.Sprint(f)
		}
		return ""
	})
}

// TestFeatureLevels: a new cluster finalizes its default levels, ApiVersions shows
// them with the supported ranges, and UpdateFeatures (through kadm) changes them with
// Kafka's checks and errors; group.version 0 turns the consumer group protocol off.
func TestFeatureLevels(t *testing.T) {
	b := testbroker.Start(t)
	cl := b.Client(t)
	adm := b.Admin(t)
	ctx := testCtx(t)

	waitDefaults(t, b)
	v4 := apiVersions(t, b, 4)
	wantSupported := map[string][2]int16{
		"metadata.version": {7, 27}, "group.version": {0, 1}, "share.version": {0, 1}, "transaction.version": {0, 2},
	}
	if got := supported(v4); !maps.Equal(got, wantSupported) {
		t.Errorf("supported features %v, want %v", got, wantSupported)
	}
	wantFinal := map[string]int16{"metadata.version": 27, "group.version": 1, "share.version": 1, "transaction.version": 2}
	if got := finalized(t, v4); !maps.Equal(got, wantFinal) {
		t.Errorf("finalized features %v, want %v", got, wantFinal)
	}
	if v4.FinalizedFeaturesEpoch < 0 {
		t.Errorf("finalized features epoch %d", v4.FinalizedFeaturesEpoch)
	}
	// Before v4, features whose minimum level is 0 are left out (KAFKA-17011).
	if got := supported(apiVersions(t, b, 3)); !maps.Equal(got, map[string][2]int16{"metadata.version": {7, 27}}) {
		t.Errorf("v3 supported features %v, want metadata.version alone", got)
	}

	update := func(validate bool, us ...kadm.FeatureUpdate) error {
		t.Helper()
		res, err := adm.UpdateFeatures(ctx, validate, us...)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	// refuse sends one update at v2 and checks it is refused with Kafka's message.
	refuse := func(what, feature string, level int16, typ int8, why string) {
		t.Helper()
		req := kmsg.NewPtrUpdateFeaturesRequest()
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = feature, level, typ
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
		resp, err := req.RequestWith(ctx, cl)
		switch {
		case err != nil:
			t.Fatal(err)
		case resp.ErrorCode != kerr.InvalidUpdateVersion.Code:
			t.Errorf("%s: %v, want INVALID_UPDATE_VERSION", what, kerr.ErrorForCode(resp.ErrorCode))
		case resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, why):
			t.Errorf("%s: message %v, want it to say %q", what, resp.ErrorMessage, why)
		}
	}
	refuse("above the supported level", "group.version", 2, 1, "only supports versions 0-1")
	refuse("a downgrade typed as an upgrade", "group.version", 0, 1, "without setting the upgrade type")
	refuse("no upgrade type", "group.version", 1, 0, "does not support the given upgrade type")
	refuse("an unknown feature", "no.such.version", 1, 1, "does not support this feature")
	refuse("an unknown feature off", "no.such.version", 0, 2, "Feature no.such.version not found")
	refuse("a negative level", "group.version", -1, 2, "cannot be less than 0")
	refuse("metadata.version past a level that changed metadata", "metadata.version", 22, 2, "might delete metadata")
	refuse("an unsafe metadata.version downgrade", "metadata.version", 22, 3, "Unsafe metadata downgrade")
	refuse("metadata.version below 3.3-IV3", "metadata.version", 6, 2, "only supports versions 7-27")
	// kadm reports the refusal as the feature's error.
	if err := update(false, kadm.FeatureUpdate{Feature: "group.version", MaxVersionLevel: 2, UpgradeType: 1}); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Errorf("kadm, above the supported level: %v", err)
	}
	// One refused update fails them all.
	if err := update(false, kadm.FeatureUpdate{Feature: "group.version", MaxVersionLevel: 0, UpgradeType: 2},
		kadm.FeatureUpdate{Feature: "group.version", MaxVersionLevel: 5, UpgradeType: 1}); err == nil {
		t.Error("a request with a refused update succeeded")
	}
	// Validate only: accepted, nothing written.
	if err := update(true, kadm.FeatureUpdate{Feature: "group.version", MaxVersionLevel: 0, UpgradeType: 2}); err != nil {
		t.Fatal(err)
	}
	if got := finalized(t, apiVersions(t, b, 4)); !maps.Equal(got, wantFinal) {
		t.Fatalf("after refusals and a validate-only update: %v, want %v", got, wantFinal)
	}

	// A safe metadata.version downgrade that loses nothing (27 to 24), and back.
	if err := update(false, kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 24, UpgradeType: 2}); err != nil {
		t.Fatalf("metadata.version 24: %v", err)
	}
	refuse("an upgrade typed as a downgrade", "metadata.version", 27, 2, "Can't downgrade to a newer version")
	if err := update(false, kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 27, UpgradeType: 1}); err != nil {
		t.Fatalf("metadata.version 27: %v", err)
	}

	// group.version 0: ConsumerGroupHeartbeat is refused, the epoch moves on.
	if err := update(false, kadm.FeatureUpdate{Feature: "group.version", MaxVersionLevel: 0, UpgradeType: 2}); err != nil {
		t.Fatalf("group.version 0: %v", err)
	}
	off := apiVersions(t, b, 4)
	if _, ok := finalized(t, off)["group.version"]; ok || off.FinalizedFeaturesEpoch <= v4.FinalizedFeaturesEpoch {
		t.Errorf("after group.version 0: finalized %v epoch %d (was %d)", finalized(t, off), off.FinalizedFeaturesEpoch, v4.FinalizedFeaturesEpoch)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "g", "m-1234567890123456789012", 30000
	hb.SubscribedTopicNames = []string{"t"}
	hbResp, err := hb.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if hbResp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("ConsumerGroupHeartbeat with group.version 0: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(hbResp.ErrorCode))
	}
	if err := update(false, kadm.FeatureUpdate{Feature: "group.version", MaxVersionLevel: 1, UpgradeType: 1}); err != nil {
		t.Fatalf("group.version 1: %v", err)
	}
	if hbResp, err = hb.RequestWith(ctx, cl); err != nil || hbResp.ErrorCode == kerr.UnsupportedVersion.Code {
		t.Errorf("ConsumerGroupHeartbeat with group.version 1: %v %v", err, hbResp)
	}

	// v0 and v1 answer per feature; v2 does not.
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.Version = v
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = "transaction.version", 2, 1
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
		resp, err := req.RequestWith(ctx, pinned(t, b, 57, v))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetVersion() != v {
			t.Fatalf("answer at v%d, want v%d", resp.GetVersion(), v)
		}
		if resp.ErrorCode != 0 || (v <= 1) != (len(resp.Results) == 1) {
			t.Errorf("v%d: error %d, %d results", v, resp.ErrorCode, len(resp.Results))
		}
	}

	// The levels survive a restart.
	b.Restart(t)
	if got := finalized(t, apiVersions(t, b, 4)); !maps.Equal(got, wantFinal) {
		t.Errorf("after a restart: %v, want %v", got, wantFinal)
	}
}

// TestFeatureLevelRefusesBroker: a broker that does not support a finalized level
// (here share.version, once group.share.enable is off) does not start on the log.
func TestFeatureLevelRefusesBroker(t *testing.T) {
	b := testbroker.Start(t)
	waitDefaults(t, b)
	dir := b.DataDir
	b.Stop()
	err := testbroker.StartErrorIn(t, "configs: {group.share.enable: \"false\"}\n", dir)
	if !errors.Is(err, metadata.ErrUnsupportedFeatures) || !strings.Contains(err.Error(), "share.version") {
		t.Fatalf("start without share groups on a log with share.version 1: %v, want ErrUnsupportedFeatures naming share.version", err)
	}
	// Turned off first, the same broker starts.
	b2 := testbroker.Start(t, testbroker.WithDataDir(dir))
	res, err := b2.Admin(t).UpdateFeatures(testCtx(t), false, kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 0, UpgradeType: 2})
	if err == nil {
		err = res["share.version"].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	b2.Stop()
	if err := testbroker.StartErrorIn(t, "configs: {group.share.enable: \"false\"}\n", dir); err != nil {
		t.Fatalf("start without share groups once share.version is 0: %v", err)
	}
}

// TestUpdateFeaturesSerialised: updates of one feature are checked and committed one
// request at a time by the controller, so a concurrent lower upgrade cannot undo a
// higher one it was never checked against: from transaction.version 0, "upgrade to
// 1" and "upgrade to 2" sent at once end at 2, the first refused when it comes
// second (INVALID_UPDATE_VERSION: it would be a downgrade).
func TestUpdateFeaturesSerialised(t *testing.T) {
	b := testbroker.Start(t)
	waitDefaults(t, b)
	ctx := testCtx(t)
	admins := [2]*kadm.Client{b.Admin(t), b.Admin(t)}
	update := func(adm *kadm.Client, level int16, typ int8) error {
		res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: typ})
		if err == nil {
			err = res["transaction.version"].Err
		}
		return err
	}
	for round := range 30 {
		if err := update(admins[0], 0, 2); err != nil {
			t.Fatalf("round %d: safe downgrade to 0: %v", round, err)
		}
		errs := make(chan error, 2)
		start := make(chan struct{})
		for i, level := range []int16{1, 2} {
			go func() {
				<-start
				err := update(admins[i], level, 1)
				errs <- fmt.Errorf("upgrade to %d: %w", level, err)
			}()
		}
		close(start)
		for range 2 {
			err := <-errs
			switch {
			case errors.Unwrap(err) == nil:
			case strings.HasPrefix(err.Error(), "upgrade to 1") && errors.Is(err, kerr.InvalidUpdateVersion):
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if got := finalized(t, apiVersions(t, b, 4))["transaction.version"]; got != 2 {
			t.Fatalf("round %d: transaction.version %d after upgrades to 1 and 2, want 2", round, got)
		}
	}
}
