package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/plugins/assignor"
	"github.com/sluicehq/sluice/plugins/assignor/assignortest"
)

// The example built and run as a plugin process, the way the broker runs it.
func TestExamplePluginProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin binary")
	}
	bin := filepath.Join(t.TempDir(), "rack-aware")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c, _ := assignortest.Launch(t, exec.Command(bin))
	if c.Name() != "rack-aware" {
		t.Fatalf("Name() = %q", c.Name())
	}

	topics := assignortest.Topics("orders", 6, "events", 0)
	orders := topics[assignortest.ID("orders")]
	for p := range orders.Partitions {
		orders.PartitionRacks = append(orders.PartitionRacks, []string{[]string{"east", "west"}[p%2]})
	}
	topics[orders.ID] = orders
	in := assignortest.Group(2, topics)
	in.Members[0].Rack, in.Members[1].Rack = "east", "west"
	out := assignortest.Check(t, c, in) // over gRPC, checked as the host does
	for _, m := range in.Members {
		ps := out[m.ID][orders.ID]
		if len(ps) != 3 {
			t.Errorf("%s: %v", m.ID, ps)
		}
		for _, p := range ps {
			if orders.PartitionRacks[p][0] != m.Rack {
				t.Errorf("%s in %s got partition %d in %s", m.ID, m.Rack, p, orders.PartitionRacks[p][0])
			}
		}
	}

	// The plugin's own validation comes back as ErrInvalidInput.
	_, err := c.Assign(context.Background(), assignor.Input{Members: []assignor.Member{{ID: "x"}, {ID: "x"}}})
	if !errors.Is(err, assignor.ErrInvalidInput) {
		t.Errorf("duplicate members: %v, want ErrInvalidInput", err)
	}

	// The whole suite, through the process boundary.
	assignortest.Suite(t, c)
}
