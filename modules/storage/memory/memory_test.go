package memory

import (
	"context"
	"testing"
	"time"

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

func TestModuleRetentionLoop(t *testing.T) {
	m := New()
	m.RetentionCheckIntervalMs = 5
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		if err := m.Cleanup(); err != nil {
			t.Error(err)
		}
	}()
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 1
	cfg.RetentionBytes = 0
	l, err := m.Open(kernel.TopicPartition{Topic: "t", Partition: 0}, [16]byte{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := l.AppendLeader(storagetest.Batch(0, time.Now().UnixMilli(), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.LogStartOffset() != 4 { // retention.bytes 0 takes the active segment too
		if time.Now().After(deadline) {
			t.Fatalf("retention loop did not run: log start %d", l.LogStartOffset())
		}
		time.Sleep(time.Millisecond)
	}
}
