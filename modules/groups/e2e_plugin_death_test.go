package groups_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// children returns the pids of the processes whose parent is ppid (from /proc).
func children(t *testing.T, ppid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.ppid == ppid {
			out = append(out, pid)
		}
	}
	return out
}

type stat struct {
	state byte
	ppid  int
}

// procStat reads /proc/pid/stat: "pid (comm) S ppid ...".
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return stat{state: f[0][0], ppid: ppid}, true
}

// An assignor plugin process dies with its broker: SIGKILL the broker (no shutdown)
// and the plugin is gone (or a zombie nobody reaped yet) instead of living on under
// init.
func TestPluginDiesWithKilledBroker(t *testing.T) {
	bin := buildExampleAssignor(t, "rack-aware")
	b := brokerproc.Start(t, brokerproc.Options{Config: fmt.Sprintf(`
modules:
  groups:
    assignors:
      - uniform
      - {name: rack-aware, plugin: %s}
`, bin)})
	var plugin int
	deadline := time.Now().Add(30 * time.Second)
	for plugin == 0 {
		for _, pid := range children(t, b.PID()) {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe == bin {
				plugin = pid
			}
		}
		if plugin == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no plugin process under the broker (pid %d)", b.PID())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.Kill()
	deadline = time.Now().Add(10 * time.Second)
	for {
		st, ok := procStat(plugin)
		if !ok || st.state == 'Z' || st.state == 'X' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin pid %d still running (state %c, parent %d) 10 s after the broker was SIGKILLed", plugin, st.state, st.ppid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
