package assignor_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/sluicehq/sluice/plugins/assignor"
	"github.com/sluicehq/sluice/plugins/assignor/assignortest"
)

// When the test binary is started with this variable set, it is a plugin
// (see TestMain): a round-robin assignor that panics for a member named "panic"
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
	return roundRobin{}.Assign(ctx, in)
}

// start launches cmd with assignortest.Launch, which kills the plugin when the
// test ends; then the test checks that its process is gone (reaped).
func start(t *testing.T, cmd *exec.Cmd) (*plugin.Client, *assignor.Client) {
	t.Helper()
	pid := 0
	t.Cleanup(func() { // runs after Launch's cleanup has killed the plugin
		if pid == 0 || runtime.GOOS == "windows" {
			return
		}
		// go-plugin waits for the process, so it is reaped: no such process.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("plugin process %d still there after Kill: %v", pid, err)
		}
	})
	c, client := assignortest.Launch(t, cmd)
	if rc := client.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	return client, c
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
