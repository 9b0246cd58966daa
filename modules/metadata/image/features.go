package image

import (
	"errors"
	"fmt"
	"maps"

	"github.com/sluicehq/sluice/kernel"
)

// FeatureLevelRecord finalizes feature Name at Level (KIP-584); level 0 takes the
// feature out of the finalized map (off). The proposer (UpdateFeatures, or the
// controller setting a new cluster's defaults) checks Kafka's rules: upgrade or
// downgrade type, metadata.version's safe downgrades. Apply checks what every broker
// must agree on: the name, the level's range, and that every registered broker that
// listed its features supports the level. A broker registered without features
// (older code) is not asked: it cannot read this entry either.
type FeatureLevelRecord struct {
	Name  string `json:"name"`
	Level int16  `json:"level"`
}

func (*FeatureLevelRecord) recordType() recordType { return recFeatureLevel }

// ErrUnsupportedFeature marks a feature level some registered broker does not support.
var ErrUnsupportedFeature = errors.New("metadata: feature level not supported by every broker")

// MaxFeatureNameBytes bounds a feature's name (the extension namespaces' bound).
const MaxFeatureNameBytes = 255

func (s *State) setFeatureLevel(r *FeatureLevelRecord) error {
	if r.Name == "" || len(r.Name) > MaxFeatureNameBytes {
		return fmt.Errorf("feature name of %d bytes: %w", len(r.Name), ErrInvalidEntry)
	}
	if r.Level < 0 {
		return fmt.Errorf("feature %s level %d: %w", r.Name, r.Level, ErrInvalidEntry)
	}
	if r.Level > 0 {
		if id, ok := UnsupportingBroker(s.Image.Brokers, r.Name, r.Level); !ok {
			return fmt.Errorf("broker %d does not support %s level %d: %w", id, r.Name, r.Level, ErrUnsupportedFeature)
		}
	}
	f := maps.Clone(s.Image.Features)
	if r.Level == 0 {
		delete(f, r.Name)
	} else {
		if f == nil {
			f = map[string]int16{}
		}
		f[r.Name] = r.Level
	}
	if len(f) == 0 {
		f = nil
	}
	s.Image.Features = f
	return nil
}

// UnsupportingBroker returns the lowest id of a registered broker that listed its
// features without level of name in its range; ok is true when there is none. Brokers
// registered without features are skipped.
func UnsupportingBroker(brokers map[int32]*kernel.BrokerImage, name string, level int16) (id int32, ok bool) {
	ok = true
	for _, b := range brokers {
		if b.Features == nil {
			continue
		}
		if r, has := b.Features[name]; !has || level < r[0] || level > r[1] {
			if ok || b.ID < id {
				id, ok = b.ID, false
			}
		}
	}
	return id, ok
}
