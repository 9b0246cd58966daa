package assignor_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	groupsassignor "github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/plugins/assignor"
	"github.com/sluicehq/sluice/plugins/assignor/assignortest"
)

// When the test binary is started with this variable set, it is a plugin
// (see TestMain): a uniform assignor that panics for a member named "panic"
// and sleeps for one named "slow".
const selfPluginEnv = "SLUICE_ASSIGNOR_TEST_SELF_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(selfPluginEnv) == "1" {
		assignor.Serve(panicky{})
	}
	os.Exit(m.Run())
}

type panicky struct{}

func (panicky) Name() string { return "panicky" }
func (panicky) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	for _, m := range in.Members {
		switch m.ID {
		case "panic":
			var ids []string
			_ = ids[len(in.Members)] // a real runtime panic: index out of range
		case "slow":
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Minute):
			}
		}
	}
	return groupsassignor.Uniform{}.Assign(ctx, in)
}

// start launches cmd as an assignor plugin, the way the broker does, and
// returns the client and the dispensed assignor. The plugin is killed when
// the test ends, and the test checks its process is gone.
func start(t *testing.T, cmd *exec.Cmd) (*plugin.Client, *assignor.Client) {
	t.Helper()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  assignor.Handshake,
		Plugins:          map[string]plugin.Plugin{assignor.PluginName: &assignor.Plugin{}},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Cmd:              cmd,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "host", Output: hclog.DefaultOutput, Level: hclog.Warn}),
	})
	t.Cleanup(func() { stop(t, client) })
	rpc, err := client.Client()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rpc.Dispense(assignor.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := raw.(*assignor.Client)
	if !ok {
		t.Fatalf("dispensed %T, want *assignor.Client", raw)
	}
	return client, c
}

func stop(t *testing.T, client *plugin.Client) {
	rc := client.ReattachConfig()
	client.Kill()
	if !client.Exited() {
		t.Error("plugin not exited after Kill")
	}
	if rc == nil || runtime.GOOS == "windows" {
		return
	}
	// go-plugin waits for the process, so it is reaped: no such process.
	if err := syscall.Kill(rc.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("plugin process %d still there after Kill: %v", rc.Pid, err)
	}
}

func TestExamplePluginProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin binary")
	}
	bin := filepath.Join(t.TempDir(), "rack-aware")
	build := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice/examples/assignors/rack-aware")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, c := start(t, exec.Command(bin))
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

func TestPanicInAssign(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), selfPluginEnv+"=1")
	client, c := start(t, cmd)
	if c.Name() != "panicky" {
		t.Fatalf("Name() = %q", c.Name())
	}
	in := assignortest.Group(3, assignortest.Topics("a", 5))
	in.Members[1].ID = "panic"
	if _, err := c.Assign(context.Background(), in); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("Assign with a panic: %v, want a panic error", err)
	}
	if client.Exited() {
		t.Fatal("plugin exited after a panic")
	}
	// Still serving.
	in.Members[1].ID = "fine"
	assignortest.Check(t, c, in)

	// Assign honours the context's deadline.
	in.Members[1].ID = "slow"
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Assign(ctx, in); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow Assign: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("slow Assign returned after %v", d)
	}
	if client.Exited() {
		t.Fatal("plugin exited")
	}
}
