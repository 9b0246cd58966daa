package image

import (
	"errors"
	"fmt"
	"maps"
)

// MaxExtensionNameLen bounds an extension namespace and key, in bytes. Frozen: Apply
// checks it, so raising it needs a record version bump (see metadata's doc.go).
const MaxExtensionNameLen = 255

// ErrInvalidExtension: PutExtension was given an empty or too long namespace or key, or
// a value larger than kernel.MaxExtensionValueBytes.
var ErrInvalidExtension = errors.New("metadata: invalid extension record")

// ExtensionRecord sets namespace/key to Value, or deletes it when Delete is set. Value
// is base64 in JSON. An empty, non-deleting Value stores an empty value.
type ExtensionRecord struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Value     []byte `json:"value,omitempty"`
	Delete    bool   `json:"delete,omitempty"`
}

func (*ExtensionRecord) recordType() recordType { return recExtension }

// ValidExtensionName checks a namespace or key; what is the word used in errors.
func ValidExtensionName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty extension %s: %w", what, ErrInvalidExtension)
	case len(s) > MaxExtensionNameLen:
		return fmt.Errorf("extension %s of %d bytes, at most %d: %w", what, len(s), MaxExtensionNameLen, ErrInvalidExtension)
	}
	return nil
}

// putExtension applies r: it copies the outer map and the changed namespace's map and
// shares every other namespace map and every value with the previous image.
func (s *State) putExtension(r *ExtensionRecord) error {
	if err := ValidExtensionName("namespace", r.Namespace); err != nil {
		return fmt.Errorf("%v: %w", err, ErrInvalidEntry)
	}
	if err := ValidExtensionName("key", r.Key); err != nil {
		return fmt.Errorf("%v: %w", err, ErrInvalidEntry)
	}
	// The value size is the proposer's check only: the bound lives in kernel and may
	// move, and every broker must reach the same verdict on the same entry.
	old := s.Image.Extensions[r.Namespace]
	if r.Delete {
		if _, ok := old[r.Key]; !ok {
			return nil // nothing to delete; the image stays as it is
		}
	}
	ns := maps.Clone(old)
	if ns == nil {
		ns = map[string][]byte{}
	}
	if r.Delete {
		delete(ns, r.Key)
	} else {
		v := r.Value
		if v == nil {
			v = []byte{}
		}
		ns[r.Key] = v
	}
	s.Image.Extensions = maps.Clone(s.Image.Extensions)
	if s.Image.Extensions == nil {
		s.Image.Extensions = map[string]map[string][]byte{}
	}
	if len(ns) == 0 {
		delete(s.Image.Extensions, r.Namespace)
	} else {
		s.Image.Extensions[r.Namespace] = ns
	}
	return nil
}
