// UpdateFeatures: v0-2. Finalizes feature levels (features.go) with Kafka's checks
// and errors: ALTER on CLUSTER; all or nothing, the first refused update failing the
// request with INVALID_UPDATE_VERSION and Kafka's message; per-feature results only
// for v0-1. Two names in one request: the last wins, as in Kafka. v0's AllowDowngrade
// is read as a safe downgrade (Kafka's controller ignores it and refuses every v0
// downgrade). Not implemented: nothing known; the checks are planned on the receiving
// broker's image, so two concurrent updates of one feature are not serialised (Apply
// still re-checks that every broker supports the level).

package metadata

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// claimUpdateFeatures is UpdateFeatures's claim: the versions above and the thin
// handler; the work is in the function it calls.
func claimUpdateFeatures(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.UpdateFeatures, Min: 0, Max: 2, Handler: kernel.Replying(m.ctl.updateFeaturesResp)}
}

func (c *controller) updateFeaturesResp(ctx context.Context, req *kernel.Request, r *kmsg.UpdateFeaturesRequest) *kmsg.UpdateFeaturesResponse {
	resp := kmsg.NewPtrUpdateFeaturesResponse()
	resp.Version = r.Version
	err := c.updateFeatures(ctx, req, r)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err)
		return resp
	}
	if r.Version <= 1 {
		for _, u := range r.FeatureUpdates {
			res := kmsg.NewUpdateFeaturesResponseResult()
			res.Feature = u.Feature
			resp.Results = append(resp.Results, res)
		}
	}
	return resp
}

func (c *controller) updateFeatures(ctx context.Context, req *kernel.Request, r *kmsg.UpdateFeaturesRequest) error {
	if !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName) {
		return opErr(kerr.ClusterAuthorizationFailed, "")
	}
	// The last update of a name wins; the order of first appearance is kept.
	var updates []featureUpdate
	at := map[string]int{}
	for _, fu := range r.FeatureUpdates {
		u := featureUpdate{name: fu.Feature, level: fu.MaxVersionLevel, typ: fu.UpgradeType}
		if r.Version == 0 {
			u.typ = upgradeTypeUpgrade
			if fu.AllowDowngrade {
				u.typ = upgradeTypeSafeDowngrade
			}
		}
		if i, ok := at[u.name]; ok {
			updates[i] = u
			continue
		}
		at[u.name] = len(updates)
		updates = append(updates, u)
	}
	im := c.hub.image()
	for _, u := range updates {
		if why := checkFeatureUpdate(im, c.features, c.nodeID, u); why != "" {
			return errUpdateFeature(why)
		}
	}
	if r.ValidateOnly || len(updates) == 0 {
		return nil
	}
	recs := make([]image.Record, len(updates))
	for i, u := range updates {
		recs[i] = &image.FeatureLevelRecord{Name: u.name, Level: u.level}
	}
	_, errs := c.proposeAll(ctx, recs)
	for i, err := range errs {
		if err == nil {
			c.log.Info("finalized feature level", "feature", updates[i].name, "level", updates[i].level)
			continue
		}
		if errors.Is(err, image.ErrUnsupportedFeature) {
			return errUpdateFeature(err.Error())
		}
		return err
	}
	return nil
}
