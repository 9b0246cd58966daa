package memory

import (
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) kernel.Storage { return NewStore() })
}

func TestInfo(t *testing.T) {
	mi := Info()
	if mi.ID != "storage.memory" || mi.Role() != "storage" {
		t.Fatalf("Info = %+v", mi)
	}
	if _, ok := mi.New().(kernel.Storage); !ok {
		t.Fatal("module is not a kernel.Storage")
	}
}
