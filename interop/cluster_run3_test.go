package interop

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// run3Ports are the offsets from BASEPORT that examples/cluster/run-3.sh uses for
// brokers 1-3: client, raft and admin ports.
var run3Ports = []int{0, 1, 2, 10, 11, 12, 20, 21, 22}

// freeBasePort returns a base port whose run-3.sh ports were all free a moment ago.
func freeBasePort(t *testing.T) int {
	t.Helper()
	for range 50 {
		base := freePort(t)
		if base+22 > 65500 {
			continue
		}
		ok := true
		for _, off := range run3Ports {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no free range of run-3.sh ports found")
	return 0
}

// pidAlive reports whether pid runs (a zombie left by an init that does not reap
// counts as gone).
func pidAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// TestClusterRun3Script runs examples/cluster/run-3.sh: it starts three brokers that
// form one cluster and answer on BASEPORT..BASEPORT+2, restarts broker 2 alone on its
// data with `run-3.sh DIR BASEPORT 2`, and stops them all with `run-3.sh DIR BASEPORT stop`.
func TestClusterRun3Script(t *testing.T) {
	needBroker(t)
	script := filepath.Join(repoRoot, "examples", "cluster", "run-3.sh")
	dir := t.TempDir()
	base := freeBasePort(t)
	opts := runOpts{timeout: 120 * time.Second, env: []string{"SLUICE_BIN=" + brokerBin, "RUN3_TIMEOUT=90"}}
	pidIn := func(dir string, n int) int {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.pid", n)))
		if err != nil {
			return 0
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	pidOf := func(n int) int { return pidIn(dir, n) }
	var pids []int // every broker pid the script started
	t.Cleanup(func() {
		for _, pid := range pids {
			if pid > 0 && pidAlive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		for n := 1; n <= 3; n++ {
			log, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.log", n)))
			for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
				if strings.Contains(string(log), bad) {
					t.Errorf("broker %d log contains %q", n, bad)
				}
			}
			if t.Failed() || os.Getenv(envLog) == "1" {
				t.Logf("broker %d log:\n%s", n, tail(string(log), 100))
			}
		}
	})
	// checkCluster asks broker n (client port base+n-1) for the cluster's brokers and
	// creates a topic through it.
	checkCluster := func(n int, topic string) {
		t.Helper()
		addr := fmt.Sprintf("127.0.0.1:%d", base+n-1)
		adm := kadm.NewClient(newClient(t, addr))
		var last string
		ok := pollUntil(30*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			m, err := adm.Metadata(ctx)
			if err != nil {
				last = err.Error()
				return false
			}
			ids := m.Brokers.NodeIDs()
			slices.Sort(ids)
			last = fmt.Sprintf("brokers %v, controller %d", ids, m.Controller)
			return slices.Equal(ids, allThree) && m.Controller > 0
		})
		if !ok {
			t.Fatalf("broker %d (%s) does not list brokers 1-3: %s", n, addr, last)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("create %q through broker %d: %v", topic, n, err)
		}
	}

	out := runCmd(t, opts, "bash", script, dir, strconv.Itoa(base))
	for n := 1; n <= 3; n++ {
		pid := pidOf(n)
		if pid == 0 || !pidAlive(pid) {
			t.Fatalf("after run-3.sh: %d.pid holds %d, not a running broker; output:\n%s", n, pid, out)
		}
		pids = append(pids, pid)
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(n), "metadata")); err != nil {
			t.Errorf("broker %d data is not under DIR/%d: %v", n, n, err)
		}
	}
	for n := 1; n <= 3; n++ {
		checkCluster(n, fmt.Sprintf("run3-%d", n))
	}

	// Broker 2 dies; run-3.sh DIR BASEPORT 2 brings it back on its old data.
	old := pidOf(2)
	_ = syscall.Kill(old, syscall.SIGKILL)
	if !pollUntil(10*time.Second, func() bool { return !pidAlive(old) }) {
		t.Fatalf("broker 2 (pid %d) still alive 10s after SIGKILL", old)
	}
	// A topic created while broker 2 is down (through broker 1, which forwards it to
	// whichever broker is the controller now).
	b1 := &clusterNode{broker: &broker{t: t}, id: 1, cl: newClient(t, fmt.Sprintf("127.0.0.1:%d", base))}
	b1.mustCreateTopic(30*time.Second, "run3-while-down", 3, 1, nil)
	runCmd(t, opts, "bash", script, dir, strconv.Itoa(base), "2")
	pid := pidOf(2)
	if pid == 0 || pid == old || !pidAlive(pid) {
		t.Fatalf("after run-3.sh ... 2: 2.pid holds %d (old %d)", pid, old)
	}
	pids = append(pids, pid)
	checkCluster(2, "run3-after-restart")
	// Broker 2 itself (asked directly) lists every topic, the one created while it was
	// down included, once it has applied the log.
	b2 := &clusterNode{broker: &broker{t: t}, id: 2, cl: newClient(t, fmt.Sprintf("127.0.0.1:%d", base+1))}
	want := []string{"run3-1", "run3-2", "run3-3", "run3-while-down", "run3-after-restart"}
	b2.waitView(20*time.Second, fmt.Sprintf("topics %v", want), func(v *view) bool {
		for _, topic := range want {
			if len(v.leaders[topic]) != 3 {
				return false
			}
		}
		return true
	})

	status := runCmd(t, opts, "bash", script, dir, strconv.Itoa(base), "status")
	for n := 1; n <= 3; n++ {
		if want := fmt.Sprintf("broker %d: pid %d, ready,", n, pidOf(n)); !strings.Contains(status, want) {
			t.Errorf("run-3.sh status lacks %q:\n%s", want, status)
		}
	}

	// A second cluster beside the first: its own directory and a base port at least 30
	// away. It is a cluster of its own three brokers and knows none of the first's topics.
	dir2 := t.TempDir()
	base2 := freeBasePort(t)
	for i := 0; base2 > base-30 && base2 < base+30; i++ {
		if i == 20 {
			t.Fatalf("no second port range away from %d", base)
		}
		base2 = freeBasePort(t)
	}
	runCmd(t, opts, "bash", script, dir2, strconv.Itoa(base2))
	for n := 1; n <= 3; n++ {
		pids = append(pids, pidIn(dir2, n))
	}
	adm2 := kadm.NewClient(newClient(t, fmt.Sprintf("127.0.0.1:%d", base2)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m2, err := adm2.Metadata(ctx)
	if err != nil {
		t.Fatalf("Metadata from the second cluster: %v", err)
	}
	var ports []int
	for _, b := range m2.Brokers {
		ports = append(ports, int(b.Port))
	}
	slices.Sort(ports)
	if !slices.Equal(ports, []int{base2, base2 + 1, base2 + 2}) || len(m2.Topics) != 0 {
		t.Errorf("second cluster (base %d): broker ports %v, topics %v; want its own three brokers and no topics",
			base2, ports, m2.Topics.Names())
	}
	for n := 1; n <= 3; n++ { // SIGKILL: quicker than a stop, which the first cluster tests
		_ = syscall.Kill(pidIn(dir2, n), syscall.SIGKILL)
	}

	// Starting a running broker again is refused.
	if err := runScript(script, dir, strconv.Itoa(base), "1"); err == nil {
		t.Errorf("run-3.sh ... 1 while broker 1 runs: exit 0, want a refusal")
	}

	runCmd(t, opts, "bash", script, dir, strconv.Itoa(base), "stop")
	for n := 1; n <= 3; n++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%d.pid", n))); err == nil {
			t.Errorf("%d.pid left after stop", n)
		}
	}
	for _, p := range pids {
		if pidAlive(p) {
			t.Errorf("broker pid %d still running after run-3.sh stop", p)
		}
	}
}

// runScript runs bash script args with a timeout and returns its error (nil: exit 0).
func runScript(script string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.SysProcAttr = procAttr()
	cmd.Env = append(os.Environ(), "SLUICE_BIN="+brokerBin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}
