package offsets_test

import (
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/modules/groups/offsets"
	"github.com/sluicehq/sluice/modules/groups/offsets/offsetstest"
)

func TestConformanceBadger(t *testing.T) {
	offsetstest.Run(t, func(t *testing.T) offsets.View {
		st, err := offsets.Open(t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestConformanceMemory(t *testing.T) {
	offsetstest.Run(t, func(t *testing.T) offsets.View { return offsets.NewMemory() })
}
