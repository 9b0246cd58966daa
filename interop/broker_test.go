package interop

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gometrics "github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testcheck"
)

// Environment knobs.
const (
	envRequired   = "SLUICE_INTEROP_REQUIRED"   // "1": a missing client fails instead of skipping
	envBuildFlags = "SLUICE_INTEROP_BUILDFLAGS" // extra `go build` flags for the broker, e.g. -race
	envLog        = "SLUICE_INTEROP_LOG"        // "1": broker stderr in the log of passing tests too
)

// Set by TestMain.
var (
	repoRoot  string // directory holding go.mod
	brokerBin string // path of the built broker binary, "" if the build failed
	buildErr  error  // why the build failed
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse() // so testing.Short works here; m.Run parsing again is fine
	if testing.Short() {
		fmt.Println("interop: skipped under -short (these tests start real broker processes)")
		return m.Run()
	}
	root, err := findRepoRoot()
	if err != nil {
		buildErr = err
		return m.Run()
	}
	repoRoot = root
	tmp, err := os.MkdirTemp("", "sluice-interop-bin-")
	if err != nil {
		buildErr = err
		return m.Run()
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "sluice")
	args := []string{"build", "-o", bin}
	args = append(args, strings.Fields(os.Getenv(envBuildFlags))...)
	args = append(args, "./cmd/sluice")
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		buildErr = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	} else {
		brokerBin = bin
		fmt.Printf("interop: built broker (go %s) in %s\n", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	}
	// sarama's metrics (go-metrics) start a process-wide ticker goroutine at the first
	// meter, which would count as a leak; the tests read no sarama metrics.
	gometrics.UseNilMetrics = true
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 && !goroutinesSettle(before, 10*time.Second) {
		return 1
	}
	return code
}

// goroutinesSettle waits for the goroutine count to fall back to n (what it was before the
// tests) and prints the stacks of what is left over if it does not.
func goroutinesSettle(n int, timeout time.Duration) bool {
	if pollUntil(timeout, func() bool { return runtime.NumGoroutine() <= n }) {
		return true
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	fmt.Printf("interop: FAIL: %d goroutines still running %s after the tests (%d before): leaked?\n%s\n",
		runtime.NumGoroutine(), timeout, n, buf)
	return false
}

// findRepoRoot returns the directory of the main module's go.mod.
func findRepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		gomod := strings.TrimSpace(string(out))
		if gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	// The package directory is <root>/interop.
	wd, werr := os.Getwd()
	if werr != nil {
		return "", werr
	}
	root := filepath.Dir(wd)
	if _, serr := os.Stat(filepath.Join(root, "go.mod")); serr != nil {
		return "", fmt.Errorf("cannot find the repository root (go env GOMOD: %v; %s has no go.mod)", err, root)
	}
	return root, nil
}

func required() bool { return os.Getenv(envRequired) == "1" }

// need skips the test (or fails it when SLUICE_INTEROP_REQUIRED=1) because a client it
// drives is missing.
func need(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("%s (%s=1, so a missing client is a failure; scripts/test.sh installs it)", msg, envRequired)
	}
	t.Skipf("%s; skipping (set %s=1 to make this a failure)", msg, envRequired)
}

// needBroker skips under -short and fails when the broker binary did not build.
func needBroker(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("interop tests start broker processes; skipped under -short")
	}
	if brokerBin == "" {
		t.Fatalf("the broker did not build, nothing to test: %v", buildErr)
	}
}

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen on 127.0.0.1:0: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// The kernel may hand a port out again once it is closed: never give the same
		// one twice in this process (a cluster's ports are all picked before any
		// broker binds them).
		givenPorts.Lock()
		dup := givenPorts.m[port]
		givenPorts.m[port] = true
		givenPorts.Unlock()
		if !dup {
			return port
		}
	}
	t.Fatal("no unused free port in 100 tries")
	return 0
}

// givenPorts are the ports freePort handed out.
var givenPorts = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

// syncBuffer holds the broker's stderr.
type syncBuffer = testcheck.SyncBuffer

// broker is one broker process (and its restarts on the same data dir and ports).
type broker struct {
	t         testing.TB
	dataDir   string
	addr      string // Kafka listener, 127.0.0.1:PORT
	adminAddr string // admin HTTP listener
	config    string // path of a config file passed with --config, "" for none
	stderr    *syncBuffer

	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has been waited for
	waitErr error
	starts  int
}

// startBroker starts a broker on fresh ports with a fresh data dir and waits for /readyz.
// t.Cleanup stops it with SIGTERM and checks that it exits cleanly.
func startBroker(t *testing.T) *broker {
	t.Helper()
	return startBrokerConfig(t, "")
}

// startBrokerConfig is startBroker with a config file holding configYAML (none if empty);
// the flags still set the data dir and both listeners.
func startBrokerConfig(t *testing.T, configYAML string) *broker {
	t.Helper()
	return startBrokerAt(t, fmt.Sprintf("127.0.0.1:%d", freePort(t)), configYAML)
}

// startBrokerAt is startBrokerConfig with the client listener on addr.
func startBrokerAt(t *testing.T, addr, configYAML string) *broker {
	t.Helper()
	needBroker(t)
	b := &broker{
		t:         t,
		dataDir:   filepath.Join(t.TempDir(), "data"),
		addr:      addr,
		adminAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		stderr:    &syncBuffer{},
	}
	if configYAML != "" {
		b.config = filepath.Join(t.TempDir(), "sluice.yaml")
		if err := os.WriteFile(b.config, []byte(configYAML), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if b.running() {
			b.stop()
		}
		b.checkLog()
		if t.Failed() || os.Getenv(envLog) == "1" {
			t.Logf("broker stderr (%s, %d start(s)):\n%s", b.addr, b.starts, tail(b.stderr.String(), 300))
		}
	})
	b.start()
	return b
}

func (b *broker) running() bool {
	if b.cmd == nil {
		return false
	}
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

// start runs the broker binary and waits until it answers /readyz.
func (b *broker) start() {
	b.t.Helper()
	if b.running() {
		b.t.Fatalf("broker already running")
	}
	b.launch()
	waitReady(b.t, b.adminAddr, b.done, 60*time.Second)
}

// waitReady polls GET http://admin/readyz until it answers 200. It fails early when the
// process exits (done is closed).
func waitReady(t testing.TB, adminAddr string, done <-chan struct{}, timeout time.Duration) {
	t.Helper()
	// No keep-alive: no idle connection (and its goroutines) outlives the poll.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + adminAddr + "/readyz"
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		select {
		case <-done:
			t.Fatalf("broker exited before it was ready (last /readyz: %s)", last)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not ready after %s: GET %s: %s", timeout, url, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill SIGKILLs the broker (and its process group) and waits for it.
func (b *broker) kill() {
	b.t.Helper()
	if !b.running() {
		b.t.Fatalf("kill: broker is not running (exit: %v)", b.waitErr)
	}
	_ = b.cmd.Process.Kill()
	killGroup(b.cmd.Process.Pid)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		b.t.Fatalf("broker still running 10s after SIGKILL")
	}
	fmt.Fprintf(b.stderr, "----- interop: SIGKILLed\n")
}

// stop sends SIGTERM and expects a clean exit (status 0) within 20s; past that it kills.
func (b *broker) stop() {
	b.t.Helper()
	if !b.running() {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		killGroup(b.cmd.Process.Pid) // children left behind, if any
		if b.waitErr != nil {
			b.t.Errorf("broker did not exit cleanly after SIGTERM: %v", b.waitErr)
		}
	case <-time.After(20 * time.Second):
		_ = b.cmd.Process.Kill()
		killGroup(b.cmd.Process.Pid)
		<-b.done
		b.t.Errorf("broker did not exit within 20s of SIGTERM; killed it")
	}
	fmt.Fprintf(b.stderr, "----- interop: stopped (%v)\n", b.waitErr)
}

// checkLog fails the test on panics and data races in the broker's output.
func (b *broker) checkLog() {
	b.t.Helper()
	log := b.stderr.String()
	for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
		if strings.Contains(log, bad) {
			b.t.Errorf("broker stderr contains %q", bad)
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("[... %d lines cut ...]\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}

// newClient returns a franz-go client for addr, closed in t.Cleanup.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("sluice-interop")}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with the given partition count and replication factor 1.
func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	createTopicConfigs(t, addr, topic, partitions, nil)
}

// createTopicConfigs is createTopic with topic configs (name → value).
func createTopicConfigs(t *testing.T, addr, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	var cfg map[string]*string
	for k, v := range configs {
		if cfg == nil {
			cfg = map[string]*string{}
		}
		cfg[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("kadm CreateTopic %q (%d partitions, configs %v): %v", topic, partitions, configs, err)
	}
}

// fetchAll reads every record of the given partitions from offset 0 up to the end offsets
// that ListOffsets reports at the time of the call, with franz-go direct partition
// consumption (no group). It fails on a deadline or a fetch error.
func fetchAll(t *testing.T, addr, topic string, partitions []int32, timeout time.Duration) map[int32][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	adm := kadm.NewClient(newClient(t, addr))
	// Retried while a partition has no leader: a broker that just restarted answers
	// /readyz before its partitions' leadership is re-established (as clients do, on
	// LEADER_NOT_AVAILABLE and NOT_LEADER_OR_FOLLOWER).
	var ends kadm.ListedOffsets
	var err error
	for {
		ends, err = answerErr(adm.ListEndOffsets(ctx, topic))
		if err == nil || ctx.Err() != nil || !(errors.Is(err, kerr.LeaderNotAvailable) || errors.Is(err, kerr.NotLeaderForPartition)) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("kadm ListEndOffsets %q: %v", topic, err)
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	for _, p := range partitions {
		o, ok := ends.Lookup(topic, p)
		if !ok {
			t.Fatalf("ListEndOffsets %q: no answer for partition %d", topic, p)
		}
		if o.Err != nil {
			t.Fatalf("ListEndOffsets %q partition %d: %v", topic, p, o.Err)
		}
		want[p] = o.Offset
		offsets[p] = kgo.NewOffset().AtStart()
	}

	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond))
	got := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	complete := func() bool {
		for _, p := range partitions {
			if next[p] < want[p] {
				return false
			}
		}
		return true
	}
	for !complete() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("fetch %q: deadline after %s; read up to %v, end offsets %v", topic, timeout, next, want)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %q partition %d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			next[r.Partition] = r.Offset + 1
		})
	}
	return got
}

// runOpts are the optional parts of a command run by runCmd.
type runOpts struct {
	timeout time.Duration
	stdin   string
	env     []string // added to the test process's environment
	dir     string   // default: this package's directory
}

// run runs a command with a timeout and returns its stdout; it fails the test with the
// command's stdout and stderr when it exits non-zero or times out.
func run(t *testing.T, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	return runCmd(t, runOpts{timeout: timeout, stdin: stdin}, name, args...)
}

func runCmd(t *testing.T, o runOpts, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { killGroup(cmd.Process.Pid); return cmd.Process.Kill() }
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = o.dir
	if len(o.env) > 0 {
		cmd.Env = append(os.Environ(), o.env...)
	}
	if o.stdin != "" {
		cmd.Stdin = strings.NewReader(o.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	line := strings.TrimSpace(name + " " + strings.Join(args, " "))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("%s: timed out after %s\nstdout:\n%s\nstderr:\n%s", line, o.timeout,
			tail(stdout.String(), 100), tail(stderr.String(), 100))
	}
	if err != nil {
		t.Fatalf("%s: %v (after %s)\nstdout:\n%s\nstderr:\n%s", line, err, time.Since(start).Round(time.Millisecond),
			tail(stdout.String(), 100), tail(stderr.String(), 100))
	}
	if s := stderr.String(); s != "" {
		t.Logf("%s: stderr:\n%s", line, tail(s, 50))
	}
	return stdout.String()
}

// pollUntil calls cond every 20ms until it returns true (true) or timeout passes (false).
func pollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
