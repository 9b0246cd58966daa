package segmentlog

import (
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

func openTestStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := OpenStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t,
		func(t *testing.T) kernel.Storage { return openTestStore(t, t.TempDir()) },
		storagetest.WithReopen(func(t *testing.T, old kernel.Storage) kernel.Storage {
			s := old.(*Store)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openTestStore(t, s.dir)
		}))
}
