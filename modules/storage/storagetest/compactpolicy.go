package storagetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// testRetentionCompactOnly: time and size retention delete nothing from a log whose
// cleanup.policy is compact only (Kafka's rule); the log start offset still removes
// segments below it; with compact,delete retention applies again.
func testRetentionCompactOnly(t *testing.T, s kernel.Storage) {
	cfg := DefaultConfig()
	l := mustOpen(t, s, tp0, cfg)
	re := enforcer(t, l)
	size := appendN(t, l, 1, 2, 1000)
	cfg.SegmentBytes = size // one batch per segment
	cfg.CleanupPolicy = "compact"
	cfg.RetentionMs, cfg.RetentionBytes = 1, 0 // everything is past both limits
	l.SetConfig(cfg)
	appendN(t, l, 4, 2, 1002) // bases 0 2 4 6 8, LEO 10, all old
	before := l.Size()
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 0 || l.Size() != before {
		t.Fatalf("compact-only retention deleted data: log start %d size %d, want 0 %d", l.LogStartOffset(), l.Size(), before)
	}
	if err := l.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 4 {
		t.Fatalf("log start %d after DeleteRecordsBefore(4)", l.LogStartOffset())
	}
	eqBases(t, "compact-only after the log start moved", read(t, l, 4, 1<<20, 100, false), 4, 6, 8)
	cfg.CleanupPolicy = "compact,delete"
	l.SetConfig(cfg)
	if err := re.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	checkEmptyAt(t, l, 10)
}
