// UpdateFeatures: v0-2. Finalizes feature levels (features.go) with Kafka's checks
// and errors: ALTER on CLUSTER; all or nothing, the first refused update failing the
// request with INVALID_UPDATE_VERSION and Kafka's message; per-feature results only
// for v0-1. Two names in one request: the last wins, as in Kafka. v0's AllowDowngrade
// is read as a safe downgrade (Kafka's controller ignores it and refuses every v0
// downgrade). As in Kafka the controller decides: the receiving broker checks the
// authorization and forwards the updates (as v2) to it, which checks and commits one
// request at a time (featuresMu), so two concurrent updates of a feature are checked
// against each other's outcome; Apply still re-checks that every broker supports the
// level. Not implemented: nothing known.

package metadata

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
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
	fwd := kmsg.NewPtrUpdateFeaturesRequest()
	fwd.TimeoutMillis, fwd.ValidateOnly = r.TimeoutMillis, r.ValidateOnly
	at := map[string]int{}
	for _, fu := range r.FeatureUpdates {
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = fu.Feature, fu.MaxVersionLevel, fu.UpgradeType
		if r.Version == 0 {
			u.UpgradeType = upgradeTypeUpgrade
			if fu.AllowDowngrade {
				u.UpgradeType = upgradeTypeSafeDowngrade
			}
		}
		if i, ok := at[u.Feature]; ok {
			fwd.FeatureUpdates[i] = u
			continue
		}
		at[u.Feature] = len(fwd.FeatureUpdates)
		fwd.FeatureUpdates = append(fwd.FeatureUpdates, u)
	}
	out, err := c.onControllerKmsg(ctx, fwd, rpc.VerUpdateFeatures,
		func(ctx context.Context) kmsg.Response { return c.updateFeaturesLocal(ctx, fwd) },
		func(r kmsg.Response) int16 { return r.(*kmsg.UpdateFeaturesResponse).ErrorCode })
	if err != nil {
		return err
	}
	resp := out.(*kmsg.UpdateFeaturesResponse)
	if resp.ErrorCode == 0 {
		return nil
	}
	ke, _ := kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error)
	if ke == nil {
		ke = kerr.UnknownServerError
	}
	e := &opError{code: ke}
	if resp.ErrorMessage != nil {
		e.msg = *resp.ErrorMessage
	}
	return e
}

// updateFeaturesLocal is UpdateFeatures (v2, names unique) on the controller: the
// checks and the commit of one request at a time, against the image the previous one
// left.
func (c *controller) updateFeaturesLocal(ctx context.Context, r *kmsg.UpdateFeaturesRequest) *kmsg.UpdateFeaturesResponse {
	resp := kmsg.NewPtrUpdateFeaturesResponse()
	resp.Version = rpc.VerUpdateFeatures
	if !c.isLeader() && c.networked() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	c.featuresMu.Lock()
	defer c.featuresMu.Unlock()
	if err := c.commitFeatures(ctx, r); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err)
	}
	return resp
}

// commitFeatures checks every update against the controller's image and, unless
// validate-only, commits them (featuresMu held).
func (c *controller) commitFeatures(ctx context.Context, r *kmsg.UpdateFeaturesRequest) error {
	updates := make([]featureUpdate, len(r.FeatureUpdates))
	for i, fu := range r.FeatureUpdates {
		updates[i] = featureUpdate{name: fu.Feature, level: fu.MaxVersionLevel, typ: fu.UpgradeType}
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
