package metadata

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// PutExtension sets namespace/key to value (nil deletes it) through the metadata log
// and returns once this broker's image has the change (kernel.ExtensionStore). Only
// the controller (the raft leader) writes: elsewhere it returns ErrNotController, like
// every metadata write. Invalid input returns an error wrapping ErrInvalidExtension.
// The value is copied into the log entry; the caller may reuse it afterwards. Deleting
// an absent key succeeds.
func (m *Module) PutExtension(ctx context.Context, namespace, key string, value []byte) error {
	if err := image.ValidExtensionName("namespace", namespace); err != nil {
		return err
	}
	if err := image.ValidExtensionName("key", key); err != nil {
		return err
	}
	if len(value) > kernel.MaxExtensionValueBytes {
		return fmt.Errorf("extension %s/%s: value of %d bytes, at most %d: %w",
			namespace, key, len(value), kernel.MaxExtensionValueBytes, image.ErrInvalidExtension)
	}
	rec := &image.ExtensionRecord{Namespace: namespace, Key: key, Value: value, Delete: value == nil}
	if _, err := m.node.propose(ctx, rec); err != nil {
		verb := "put"
		if rec.Delete {
			verb = "delete"
		}
		return fmt.Errorf("%s extension %s/%s: %w", verb, namespace, key, err)
	}
	return nil
}

var _ kernel.ExtensionStore = (*Module)(nil)
