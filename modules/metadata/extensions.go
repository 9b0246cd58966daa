package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/sluicehq/sluice/kernel"
)

// maxExtensionNameLen bounds an extension namespace and key, in bytes. Frozen: Apply
// checks it, so raising it needs a record version bump (see doc.go).
const maxExtensionNameLen = 255

// ErrInvalidExtension: PutExtension was given an empty or too long namespace or key, or
// a value larger than kernel.MaxExtensionValueBytes.
var ErrInvalidExtension = errors.New("metadata: invalid extension record")

// extensionRecord sets namespace/key to Value, or deletes it when Delete is set. Value
// is base64 in JSON. An empty, non-deleting Value stores an empty value.
type extensionRecord struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Value     []byte `json:"value,omitempty"`
	Delete    bool   `json:"delete,omitempty"`
}

func (*extensionRecord) recordType() recordType { return recExtension }

// validExtensionName checks a namespace or key; what is the word used in errors.
func validExtensionName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty extension %s: %w", what, ErrInvalidExtension)
	case len(s) > maxExtensionNameLen:
		return fmt.Errorf("extension %s of %d bytes, at most %d: %w", what, len(s), maxExtensionNameLen, ErrInvalidExtension)
	}
	return nil
}

// PutExtension sets namespace/key to value (nil deletes it) through the metadata log
// and returns once this broker's image has the change (kernel.ExtensionStore). Only
// the controller (the raft leader) writes: elsewhere it returns ErrNotController, like
// every metadata write. Invalid input returns an error wrapping ErrInvalidExtension.
// The value is copied into the log entry; the caller may reuse it afterwards. Deleting
// an absent key succeeds.
func (m *Module) PutExtension(ctx context.Context, namespace, key string, value []byte) error {
	if err := validExtensionName("namespace", namespace); err != nil {
		return err
	}
	if err := validExtensionName("key", key); err != nil {
		return err
	}
	if len(value) > kernel.MaxExtensionValueBytes {
		return fmt.Errorf("extension %s/%s: value of %d bytes, at most %d: %w",
			namespace, key, len(value), kernel.MaxExtensionValueBytes, ErrInvalidExtension)
	}
	rec := &extensionRecord{Namespace: namespace, Key: key, Value: value, Delete: value == nil}
	if _, err := m.propose(ctx, rec); err != nil {
		verb := "put"
		if rec.Delete {
			verb = "delete"
		}
		return fmt.Errorf("%s extension %s/%s: %w", verb, namespace, key, err)
	}
	return nil
}

// putExtension applies r: it copies the outer map and the changed namespace's map and
// shares every other namespace map and every value with the previous image.
func (s *state) putExtension(r *extensionRecord) error {
	if err := validExtensionName("namespace", r.Namespace); err != nil {
		return fmt.Errorf("%v: %w", err, errInvalidEntry)
	}
	if err := validExtensionName("key", r.Key); err != nil {
		return fmt.Errorf("%v: %w", err, errInvalidEntry)
	}
	// The value size is the proposer's check only: the bound lives in kernel and may
	// move, and every broker must reach the same verdict on the same entry.
	old := s.img.Extensions[r.Namespace]
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
	s.img.Extensions = maps.Clone(s.img.Extensions)
	if s.img.Extensions == nil {
		s.img.Extensions = map[string]map[string][]byte{}
	}
	if len(ns) == 0 {
		delete(s.img.Extensions, r.Namespace)
	} else {
		s.img.Extensions[r.Namespace] = ns
	}
	return nil
}

var _ kernel.ExtensionStore = (*Module)(nil)
