package groups

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// Feature levels (kernel/seam_features.go) this module implements, with Kafka's names
// and meanings:
//
//	group.version  1: the consumer group protocol (KIP-848): ConsumerGroupHeartbeat
//	share.version  1: share groups (KIP-932), when group.share.enable is true
//
// A new cluster starts with both at 1 (Sluice serves both by default); finalized at 0
// (UpdateFeatures downgrade), their heartbeats answer UNSUPPORTED_VERSION, as Kafka's
// do, so clients fall back (kgo to the classic protocol) or report it. Groups that
// exist stay as they are; their members are refused at their next heartbeat.
const (
	groupVersionFeature = "group.version"
	shareVersionFeature = "share.version"
)

// SupportedFeatures implements kernel.FeatureSupporter.
func (m *Module) SupportedFeatures() []kernel.SupportedFeature {
	fs := []kernel.SupportedFeature{{Name: groupVersionFeature, Min: 0, Max: 1, Default: 1}}
	if m.shares != nil {
		fs = append(fs, kernel.SupportedFeature{Name: shareVersionFeature, Min: 0, Max: 1, Default: 1})
	}
	return fs
}

// featureOff returns UNSUPPORTED_VERSION and why when the cluster has feature below
// level 1, nil otherwise.
func (m *Module) featureOff(feature string) (*kerr.Error, string) {
	if m.meta.Image().Feature(feature) >= 1 {
		return nil, ""
	}
	return kerr.UnsupportedVersion, "the cluster's " + feature + " is 0: an administrator turned this protocol off (UpdateFeatures)"
}
