package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// Feature levels (KIP-584; kernel/seam_features.go). This module stores the cluster's
// finalized levels (FeatureLevel entries), sets a new cluster's defaults, serves
// UpdateFeatures, and refuses the registration of a broker that does not support a
// finalized level, so that broker does not start. It implements metadata.version
// itself: Kafka's numbering, from 3.3-IV3 (7, the oldest a Kafka 4 client expects) to
// 4.1-IV1 (27). Sluice's own log does not depend on it yet; it is there so clients and
// tools see the levels they expect, and to gate future record versions.

// MetadataVersionFeature is metadata.version's name.
const MetadataVersionFeature = "metadata.version"

// metadataVersion is one level of metadata.version: its release name and whether it
// changed the metadata (Kafka's didMetadataChange), which makes a downgrade past it
// lose information. Kafka's values, from MetadataVersion.
type metadataVersion struct {
	name    string
	changed bool
}

// metadataVersions are the levels from minMetadataVersion on, index = level - min.
var metadataVersions = [...]metadataVersion{
	{"3.3-IV3", true}, {"3.4-IV0", true}, {"3.5-IV0", false}, {"3.5-IV1", false},
	{"3.5-IV2", true}, {"3.6-IV0", false}, {"3.6-IV1", true}, {"3.6-IV2", true},
	{"3.7-IV0", true}, {"3.7-IV1", false}, {"3.7-IV2", true}, {"3.7-IV3", false},
	{"3.7-IV4", false}, {"3.8-IV0", false}, {"3.9-IV0", false}, {"4.0-IV0", false},
	{"4.0-IV1", true}, {"4.0-IV2", false}, {"4.0-IV3", false}, {"4.1-IV0", false},
	{"4.1-IV1", false},
}

const (
	minMetadataVersion    = 7
	latestMetadataVersion = minMetadataVersion + int16(len(metadataVersions)) - 1
)

// MetadataVersionName is a metadata.version level's release name ("4.1-IV1"), "" for a
// level this code does not know.
func MetadataVersionName(level int16) string {
	if level < minMetadataVersion || level > latestMetadataVersion {
		return ""
	}
	return metadataVersions[level-minMetadataVersion].name
}

// SupportedFeatures implements kernel.FeatureSupporter: metadata.version.
func (m *Module) SupportedFeatures() []kernel.SupportedFeature {
	return []kernel.SupportedFeature{{Name: MetadataVersionFeature, Min: minMetadataVersion, Max: latestMetadataVersion, Default: latestMetadataVersion}}
}

// SetSupportedFeatures implements kernel.FeatureHost: the broker's features, which it
// registers with and the controller bootstraps a new cluster from.
func (m *Module) SetSupportedFeatures(fs []kernel.SupportedFeature) { m.node.features = fs }

// featureRanges is this broker's supported features as a registration lists them.
func (nd *node) featureRanges() []kmsg.BrokerRegistrationRequestFeature {
	out := make([]kmsg.BrokerRegistrationRequestFeature, 0, len(nd.features))
	for _, f := range nd.features {
		rf := kmsg.NewBrokerRegistrationRequestFeature()
		rf.Name, rf.MinSupportedVersion, rf.MaxSupportedVersion = f.Name, f.Min, f.Max
		out = append(out, rf)
	}
	return out
}

// registrationFeatures turns a registration's feature list into the record's map (nil
// for a broker that listed none, as older code does), and checks that the broker
// supports every finalized level of im: "" when it does, else why not.
func registrationFeatures(im *kernel.Image, fs []kmsg.BrokerRegistrationRequestFeature) (map[string][2]int16, string) {
	if len(fs) == 0 {
		return nil, ""
	}
	ranges := make(map[string][2]int16, len(fs))
	for _, f := range fs {
		ranges[f.Name] = [2]int16{f.MinSupportedVersion, f.MaxSupportedVersion}
	}
	for _, name := range slices.Sorted(maps.Keys(im.Features)) {
		level := im.Features[name]
		r, ok := ranges[name]
		if !ok {
			return nil, fmt.Sprintf("the cluster finalized %s at level %d and the broker does not support it", name, level)
		}
		if level < r[0] || level > r[1] {
			return nil, fmt.Sprintf("the cluster finalized %s at level %d and the broker supports levels %d to %d", name, level, r[0], r[1])
		}
	}
	return ranges, ""
}

// bootstrapFeatures finalizes this broker's default levels on a cluster that has no
// metadata.version yet: a new cluster, or one created before feature levels. A default
// some registered broker does not support is left off (Apply refuses it) and logged.
func (c *controller) bootstrapFeatures(ctx context.Context) error {
	if c.hub.image().Feature(MetadataVersionFeature) != 0 {
		return nil
	}
	var recs []image.Record
	for _, f := range c.features {
		if f.Default > 0 {
			recs = append(recs, &image.FeatureLevelRecord{Name: f.Name, Level: f.Default})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	_, _, errs := c.proposeLocal(ctx, recs)
	for i, err := range errs {
		r := recs[i].(*image.FeatureLevelRecord)
		switch {
		case err == nil:
			c.log.Info("finalized feature level", "feature", r.Name, "level", r.Level)
		case errors.Is(err, image.ErrUnsupportedFeature):
			c.log.Warn("feature left off: a registered broker does not support its default level", "feature", r.Name, "level", r.Level, "err", err)
		default:
			return fmt.Errorf("finalize feature levels: %w", err)
		}
	}
	return nil
}

// Kafka's UpdateFeatures upgrade types (v1+).
const (
	upgradeTypeUpgrade         = 1
	upgradeTypeSafeDowngrade   = 2
	upgradeTypeUnsafeDowngrade = 3
)

// featureUpdate is one checked change.
type featureUpdate struct {
	name  string
	level int16
	typ   int8
}

// checkFeatureUpdate applies Kafka's rules to one update against im and this broker's
// supported features: "" when it may proceed, else why not (INVALID_UPDATE_VERSION).
func checkFeatureUpdate(im *kernel.Image, local []kernel.SupportedFeature, nodeID int32, u featureUpdate) string {
	bad := func(format string, args ...any) string {
		return fmt.Sprintf("Invalid update version %d for feature %s. ", u.level, u.name) + fmt.Sprintf(format, args...)
	}
	if u.typ < upgradeTypeUpgrade || u.typ > upgradeTypeUnsafeDowngrade {
		return bad("The controller does not support the given upgrade type.")
	}
	if u.level < 0 {
		return bad("A feature version cannot be less than 0.")
	}
	i := slices.IndexFunc(local, func(f kernel.SupportedFeature) bool { return f.Name == u.name })
	if i < 0 {
		if u.level == 0 && im.Feature(u.name) == 0 {
			return bad("Feature %s not found.", u.name)
		}
		if u.level > 0 {
			return bad("Local controller %d does not support this feature.", nodeID)
		}
	} else if u.level > 0 && (u.level < local[i].Min || u.level > local[i].Max) {
		return bad("Local controller %d only supports versions %d-%d", nodeID, local[i].Min, local[i].Max)
	}
	if u.level > 0 {
		for _, id := range slices.Sorted(maps.Keys(im.Brokers)) {
			b := im.Brokers[id]
			if b.Features == nil {
				return bad("Broker %d has not registered its supported features.", id)
			}
			r, ok := b.Features[u.name]
			if !ok {
				return bad("Broker %d does not support this feature.", id)
			}
			if u.level < r[0] || u.level > r[1] {
				return bad("Broker %d only supports versions %d-%d", id, r[0], r[1])
			}
		}
	}
	cur := im.Feature(u.name)
	switch {
	case u.level < cur && u.typ == upgradeTypeUpgrade:
		return bad("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	case u.level > cur && u.typ != upgradeTypeUpgrade:
		return bad("Can't downgrade to a newer version.")
	}
	if u.name == MetadataVersionFeature {
		if u.level < minMetadataVersion {
			return bad("Unable to set a metadata.version less than %s", MetadataVersionName(minMetadataVersion))
		}
		if MetadataVersionName(u.level) == "" {
			return bad("Unknown metadata.version.")
		}
		if u.level < cur {
			for l := u.level + 1; l <= cur && l <= latestMetadataVersion; l++ {
				if !metadataVersions[l-minMetadataVersion].changed {
					continue
				}
				if u.typ == upgradeTypeUnsafeDowngrade {
					return bad("Unsafe metadata downgrade is not supported in this version.")
				}
				return bad("Refusing to perform the requested downgrade because it might delete metadata information.")
			}
		}
	}
	return ""
}

// errUpdateFeature is an UpdateFeatures refusal: INVALID_UPDATE_VERSION with why.
func errUpdateFeature(why string) error {
	return opErr(kerr.InvalidUpdateVersion, "The update failed for all features since the following feature had an error: %s", why)
}
