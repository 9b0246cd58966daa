package kernel

import (
	"fmt"
	"slices"
	"strings"
)

// Feature levels (KIP-584): named integer levels a cluster finalizes once every broker
// supports them, so that clients and brokers switch behaviour together (a Kafka 4
// producer uses KIP-890's transactions only once transaction.version is 2, say).
//
//   - Each module declares the features it implements and the levels it supports
//     (FeatureSupporter): the transactions module transaction.version, the groups
//     module group.version, the metadata module metadata.version. So a broker composed
//     without a module supports none of its features.
//   - The kernel gathers them (a feature declared twice is a composition error) and
//     advertises them in ApiVersions (SupportedFeatures), with the cluster's finalized
//     levels from the metadata image (Image.Features) and its version as their epoch.
//   - The metadata module stores the finalized levels in its log: a new cluster starts
//     at each feature's Default, UpdateFeatures changes them, and a broker that does not
//     support a finalized level is refused registration, so it does not start.
//
// A feature's level 0 means "off" and is never listed as finalized.

// SupportedFeature is one feature a module implements: the levels it can run at and
// the level a new cluster starts at.
type SupportedFeature struct {
	Name     string
	Min, Max int16 // 0 <= Min <= Max
	Default  int16 // Min <= Default <= Max, or 0 for off
}

// FeatureSupporter is implemented by modules that implement feature levels. It is asked
// once, after every module is provisioned.
type FeatureSupporter interface {
	SupportedFeatures() []SupportedFeature
}

// FeatureHost is implemented by the module that stores the finalized levels (the
// metadata module). The kernel hands it the broker's supported features, sorted by
// name, after provisioning and before Start.
type FeatureHost interface {
	SetSupportedFeatures(fs []SupportedFeature)
}

// gatherFeatures collects the modules' features, sorted by name; a feature declared by
// two modules, or with an impossible range, is an error.
func (k *Kernel) gatherFeatures() error {
	var fs []SupportedFeature
	by := map[string]string{}
	for _, r := range k.order {
		s, ok := k.modules[r].mod.(FeatureSupporter)
		if !ok {
			continue
		}
		id := k.modules[r].info.ID
		for _, f := range s.SupportedFeatures() {
			if f.Name == "" || f.Min < 0 || f.Min > f.Max || (f.Default != 0 && (f.Default < f.Min || f.Default > f.Max)) {
				return fmt.Errorf("module %s: feature %q: levels %d-%d, default %d", id, f.Name, f.Min, f.Max, f.Default)
			}
			if other, dup := by[f.Name]; dup {
				return fmt.Errorf("feature %s is declared by both %s and %s", f.Name, other, id)
			}
			by[f.Name] = id
			fs = append(fs, f)
		}
	}
	slices.SortFunc(fs, func(a, b SupportedFeature) int { return strings.Compare(a.Name, b.Name) })
	k.features = fs
	for _, r := range k.order {
		if h, ok := k.modules[r].mod.(FeatureHost); ok {
			h.SetSupportedFeatures(slices.Clone(fs))
		}
	}
	return nil
}

// SupportedFeatures returns the broker's supported features, sorted by name.
func (k *Kernel) SupportedFeatures() []SupportedFeature { return slices.Clone(k.features) }
