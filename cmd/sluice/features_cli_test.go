package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// The feature-level commands and unregister against a real broker: describe (table and
// JSON), a refused upgrade with Kafka's reason and exit 1, a dry run that changes
// nothing, a downgrade that turns a feature off and an upgrade back, and the refusals
// of unregistering a live or an unknown broker.
func TestClusterFeatureCommands(t *testing.T) {
	b := testbroker.Start(t)
	addr := b.Addr
	levels := func() map[string]int16 {
		t.Helper()
		var out struct {
			Epoch    int64 `json:"epoch"`
			Features []struct {
				Name      string `json:"name"`
				Finalized int16  `json:"finalized"`
			} `json:"features"`
		}
		if err := json.Unmarshal([]byte(mustCLI(t, addr, "cluster", "features", "--json")), &out); err != nil {
			t.Fatal(err)
		}
		m := map[string]int16{}
		for _, f := range out.Features {
			m[f.Name] = f.Finalized
		}
		return m
	}
	poll(t, 10*time.Second, "the default levels", func() string {
		if l := levels(); l["group.version"] != 1 || l["metadata.version"] != 27 {
			return "not yet"
		}
		return ""
	})
	wantLines(t, mustCLI(t, addr, "cluster", "features"),
		"FEATURE", "group.version        0-1        1", "metadata.version     7-27       27")

	rc, out, _ := cli(t, addr, "cluster", "upgrade", "group.version=2")
	if rc != 1 || !strings.Contains(out, "only supports versions 0-1") {
		t.Errorf("upgrade past the supported level: exit %d\n%s", rc, out)
	}
	wantLines(t, mustCLI(t, addr, "cluster", "downgrade", "--dry-run", "group.version=0"), "group.version  valid")
	if l := levels(); l["group.version"] != 1 {
		t.Fatalf("a dry run changed group.version to %d", l["group.version"])
	}
	wantLines(t, mustCLI(t, addr, "cluster", "downgrade", "group.version=0"), "group.version  set")
	if l := levels(); l["group.version"] != 0 {
		t.Fatalf("after the downgrade: group.version %d", l["group.version"])
	}
	mustCLI(t, addr, "cluster", "upgrade", "group.version=1")
	if l := levels(); l["group.version"] != 1 {
		t.Fatalf("after the upgrade: group.version %d", l["group.version"])
	}
	if rc, out, _ := cli(t, addr, "cluster", "downgrade", "--unsafe", "metadata.version=20"); rc != 1 || !strings.Contains(out, "Unsafe metadata downgrade") {
		t.Errorf("unsafe metadata.version downgrade: exit %d\n%s", rc, out)
	}
	if rc, _, errs := cli(t, addr, "cluster", "upgrade", "group.version"); rc != 2 || !strings.Contains(errs, "FEATURE=LEVEL") {
		t.Errorf("a malformed pair: exit %d %s", rc, errs)
	}

	rc, out, _ = cli(t, addr, "cluster", "unregister", "1", "9")
	if rc != 1 || !strings.Contains(out, "is live") || !strings.Contains(out, "BROKER_ID_NOT_REGISTERED") {
		t.Errorf("unregister a live and an unknown broker: exit %d\n%s", rc, out)
	}
}
