package groups_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestMemoryOffsetsRebuiltAtRestart: with the in-memory offset store nothing of the
// offsets is on disk but __consumer_offsets, and a restarted broker serves every
// committed offset (and deletion) again, rebuilt from the log.
func TestMemoryOffsetsRebuiltAtRestart(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(fastGroupConfig+"modules:\n  groups: {use: coordinator, offsets: memory}\n"))
	want := restartFixture(t, b)
	b.Restart(t)
	adm := b.Admin(t)
	// A broker that restarted at once (nothing to open) can be ready before its
	// partitions' leadership settles again: coordinators answer
	// COORDINATOR_NOT_AVAILABLE until then.
	waitFor(t, 15*time.Second, "every group's coordinator", func() string {
		for g := range want {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			offs, err := adm.FetchOffsets(ctx, g)
			cancel()
			if err == nil {
				err = offs.Error()
			}
			if err != nil {
				return g + ": " + err.Error()
			}
		}
		return ""
	})
	checkOffsets(t, adm, want, "after the restart")
	if _, err := os.Stat(filepath.Join(b.DataDir, "groups", "offsets")); !os.IsNotExist(err) {
		t.Errorf("the memory store left a badger directory: %v", err)
	}
}

// Unknown guests are config errors, found before anything is bound or written, that
// list the known ones.
func TestUnknownGuests(t *testing.T) {
	for _, tc := range []struct{ name, groups, want string }{
		{"offsets by name", "{offsets: bogus}", `unknown guest "bogus" for groups.offsets (known: badger, memory)`},
		{"offsets by use", "{offsets: {use: bogus}}", `unknown guest "bogus" for groups.offsets (known: badger, memory)`},
		{"offsets setting", "{offsets: {use: memory, dir: /x}}", "line 1: groups.offsets.memory.dir: unknown key (this section takes no keys)"},
		{"assignor", "{assignors: [uniform, sticky]}", `unknown assignor "sticky" (known: range, uniform;`},
		{"assignor plugin by name", "{assignors: [plugin]}", `unknown assignor "plugin" (known: range, uniform;`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := testbroker.StartError(t, "modules: {groups: "+tc.groups+"}\n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
