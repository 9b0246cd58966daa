//go:build linux

// Package brokerproc runs real `sluice serve` processes for tests that need what an
// in-process broker cannot give: a resident-set size to assert, a file-descriptor limit
// of its own, a small filesystem for its data dir, a SIGKILL.
//
//	p := brokerproc.Start(t, brokerproc.Options{NoFile: 1024, Config: "configs: {...}"})
//	cl := p.Client(t)
//	... produce, fetch ...
//	if p.PeakRSS() > 512<<20 { t.Fatal(...) }
//
// The broker binary is built once per test binary (Binary). Each process runs in its own
// process group: Kill signals only the broker (so a test can check what outlives it),
// the test's cleanup kills the whole group, so nothing a broker started is left behind.
//
// Long forms of scale tests run when SLUICE_SCALE=full (Full); CI runs the short forms.
package brokerproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testcheck"
)

// Environment knobs.
const (
	EnvBuildFlags = "SLUICE_BROKERPROC_BUILDFLAGS" // extra `go build` flags, e.g. -race
	EnvScale      = "SLUICE_SCALE"                 // "full": run the long forms of scale tests
	EnvLog        = "SLUICE_BROKERPROC_LOG"        // "1": broker output in passing tests' logs too
)

// Full reports whether the long forms of scale tests were asked for (SLUICE_SCALE=full).
func Full() bool { return os.Getenv(EnvScale) == "full" }

// build is the one build of the broker per test binary.
var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Binary returns the path of a sluice binary built from this repository, once per test
// binary, into <tmp>/sluice-brokerproc/<pid>; directories of test processes that no
// longer run are removed first, so builds do not pile up. It skips under -short and
// fails t when the build fails.
func Binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts broker processes; skipped under -short")
	}
	build.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			build.err = err
			return
		}
		base := filepath.Join(os.TempDir(), "sluice-brokerproc")
		removeStale(base)
		build.dir = filepath.Join(base, strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(build.dir, 0o755); err != nil {
			build.err = err
			return
		}
		bin := filepath.Join(build.dir, "sluice")
		args := append([]string{"build", "-o", bin}, strings.Fields(os.Getenv(EnvBuildFlags))...)
		args = append(args, "./cmd/sluice")
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
			return
		}
		build.bin = bin
	})
	if build.err != nil {
		t.Fatalf("build the broker: %v", build.err)
	}
	return build.bin
}

// removeStale removes the build directories under base of processes that are gone.
func removeStale(base string) {
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			_ = os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}

// repoRoot is the directory of the main module's go.mod.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the sluice module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// Options describe one broker process.
type Options struct {
	// Config is the broker's YAML config without data_dir, the first listener and
	// admin_listen: those come from flags (DataDir and fresh ports). Empty: defaults.
	Config string
	// DataDir defaults to a fresh directory under t.TempDir().
	DataDir string
	// NoFile, when non-zero, is the process's RLIMIT_NOFILE (soft and hard), set with
	// prlimit(1) before the broker starts.
	NoFile uint64
	// Env is added to the test's environment.
	Env []string
	// Args are extra `serve` arguments.
	Args []string
	// ReadyTimeout bounds the wait for /readyz (default 60 s).
	ReadyTimeout time.Duration
	// StopTimeout bounds Stop's wait for the exit after SIGTERM (default 30 s).
	StopTimeout time.Duration
}

// Proc is one broker process and its restarts on the same data dir and ports.
type Proc struct {
	Addr      string // Kafka listener, 127.0.0.1:PORT
	AdminAddr string // admin HTTP listener
	DataDir   string

	t      testing.TB
	opts   Options
	config string // path of the config file, "" for none
	out    *testcheck.SyncBuffer
	starts int

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd was waited for
	waitErr error
}

// Start starts a broker and waits until it answers /readyz. The test's cleanup stops it
// (SIGTERM, then SIGKILL of its process group) and fails the test on a panic or a data
// race in its output.
func Start(t testing.TB, opts Options) *Proc {
	t.Helper()
	p := StartNoWait(t, opts)
	p.waitReady()
	return p
}

// StartNoWait starts a broker without waiting for it to be ready (for tests of a start
// that must fail: see Wait).
func StartNoWait(t testing.TB, opts Options) *Proc {
	t.Helper()
	bin := Binary(t)
	p := &Proc{
		t:         t,
		opts:      opts,
		Addr:      freeAddr(t),
		AdminAddr: freeAddr(t),
		DataDir:   opts.DataDir,
		out:       &testcheck.SyncBuffer{},
	}
	if p.DataDir == "" {
		p.DataDir = filepath.Join(t.TempDir(), "data")
	}
	if opts.Config != "" {
		p.config = filepath.Join(t.TempDir(), "sluice.yaml")
		if err := os.WriteFile(p.config, []byte(opts.Config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if p.Running() {
			if err := p.Stop(); err != nil {
				t.Errorf("broker did not stop cleanly: %v", err)
			}
		}
		p.killGroup()
		out := p.out.String()
		for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
			if strings.Contains(out, bad) {
				t.Errorf("broker output contains %q", bad)
			}
		}
		if t.Failed() || os.Getenv(EnvLog) == "1" {
			t.Logf("broker output (%s, %d start(s)):\n%s", p.Addr, p.starts, tail(out, 300))
		}
	})
	p.launch(bin)
	return p
}

func (p *Proc) launch(bin string) {
	p.t.Helper()
	p.starts++
	args := []string{"serve", "--data-dir", p.DataDir, "--listen", p.Addr, "--admin-listen", p.AdminAddr}
	if p.config != "" {
		args = append(args, "--config", p.config)
	}
	args = append(args, p.opts.Args...)
	name := bin
	if p.opts.NoFile > 0 {
		lim := strconv.FormatUint(p.opts.NoFile, 10)
		args = append([]string{"--nofile=" + lim + ":" + lim, "--", bin}, args...)
		name = "prlimit"
	}
	fmt.Fprintf(p.out, "----- brokerproc: start #%d: %s %s\n", p.starts, name, strings.Join(args, " "))
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), p.opts.Env...)
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	// Its own process group, so cleanup can kill what it started; SIGKILL if the test
	// process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start broker: %v", err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
}

// Running reports whether the process runs.
func (p *Proc) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// PID is the broker's process id (prlimit execs the broker, so the pid is the broker's).
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stderr is everything the broker wrote so far (stdout and stderr, all starts).
func (p *Proc) Stderr() string { return p.out.String() }

// Wait waits up to timeout for the process to exit; exited is false on the timeout, err
// is the process's exit error (nil for status 0).
func (p *Proc) Wait(timeout time.Duration) (exited bool, err error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true, nil
	}
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.waitErr
	case <-time.After(timeout):
		return false, nil
	}
}

// Kill SIGKILLs the broker process (only it: children it started are left to the
// test's checks and to cleanup) and waits for it.
func (p *Proc) Kill() {
	p.t.Helper()
	if !p.Running() {
		p.t.Fatalf("kill: broker is not running")
	}
	_ = syscall.Kill(p.PID(), syscall.SIGKILL)
	if exited, _ := p.Wait(10 * time.Second); !exited {
		p.t.Fatalf("broker still running 10 s after SIGKILL")
	}
	fmt.Fprintf(p.out, "----- brokerproc: SIGKILLed\n")
}

// Stop sends SIGTERM and waits up to Options.StopTimeout for the exit (then SIGKILLs);
// it returns the exit error, or an error saying it had to kill.
func (p *Proc) Stop() error {
	if !p.Running() {
		return nil
	}
	_ = syscall.Kill(p.PID(), syscall.SIGTERM)
	limit := p.opts.StopTimeout
	if limit <= 0 {
		limit = 30 * time.Second
	}
	exited, err := p.Wait(limit)
	if !exited {
		p.killGroup()
		p.Wait(10 * time.Second)
		err = fmt.Errorf("no exit within %v of SIGTERM; killed", limit)
	}
	fmt.Fprintf(p.out, "----- brokerproc: stopped (%v)\n", err)
	return err
}

// Restart stops a running broker (SIGTERM) and starts it again on the same ports and data
// dir, waiting for /readyz.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	if err := p.Stop(); err != nil {
		t.Fatalf("restart: stop: %v", err)
	}
	p.launch(Binary(t))
	p.waitReady()
}

func (p *Proc) killGroup() {
	if pid := p.PID(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// WaitReady waits until a broker started with StartNoWait answers /readyz (brokers of
// one raft quorum become ready only together), failing the test as Start does.
func (p *Proc) WaitReady() {
	p.t.Helper()
	p.waitReady()
}

// waitReady polls /readyz until it answers 200; it fails early if the process exits.
func (p *Proc) waitReady() {
	p.t.Helper()
	timeout := p.opts.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	// No keep-alive: no idle connection outlives the poll.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + p.AdminAddr + "/readyz"
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		if !p.Running() {
			_, err := p.Wait(0)
			p.t.Fatalf("broker exited before it was ready (%v; last /readyz: %s)\n%s", err, last, tail(p.Stderr(), 40))
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
			p.t.Fatalf("broker not ready after %s: GET %s: %s", timeout, url, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RSS is the process's resident set size in bytes (VmRSS), 0 if it is not running.
func (p *Proc) RSS() int64 { return p.statusBytes("VmRSS:") }

// PeakRSS is the process's peak resident set size in bytes (VmHWM), 0 if it is not
// running.
func (p *Proc) PeakRSS() int64 { return p.statusBytes("VmHWM:") }

func (p *Proc) statusBytes(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest) // "123456 kB"
			if len(f) == 2 && f[1] == "kB" {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// FDs is the number of open file descriptors of the process, -1 if it is not running.
func (p *Proc) FDs() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.PID()))
	if err != nil {
		return -1
	}
	return len(ents)
}

// Client returns a franz-go client of this broker, closed at the test's end.
func (p *Proc) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.Addr), kgo.ClientID("brokerproc")}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client of this broker.
func (p *Proc) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(p.Client(t))
}

// Tmpfs mounts a tmpfs of size bytes on a fresh directory and returns it; it is unmounted
// at the test's end (after the brokers using it stopped, when Tmpfs is called before
// Start). Mounting needs root: elsewhere the test is skipped with a message.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Free is the space left for an unprivileged writer on the file system of dir.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * st.Bsize
}

// FillTo writes the ballast file path (new) until the file system holding it has
// about left bytes free, as a volume filling up would; removing the file gives the
// space back.
func FillTo(t testing.TB, path string, left int64) {
	t.Helper()
	dir := filepath.Dir(path)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for free := Free(t, dir); free > left; free = Free(t, dir) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), free-left)]); err != nil {
			t.Fatalf("ballast %s: %v", path, err)
		}
	}
}

// given holds the ports freeAddr handed out: the kernel may hand a closed port out again,
// and a test picks all its ports before any broker binds them.
var given = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// RaftVoters returns n free raft listen addresses for brokers 1..n and the voter
// list naming them, as a YAML flow sequence for a metadata section:
//
//	raft, voters := brokerproc.RaftVoters(t, 3)
//	cfg := fmt.Sprintf("node_id: %d\nmodules:\n  metadata: {use: raft, raft_listen: %q, voters: %s}\n", i+1, raft[i], voters)
func RaftVoters(t testing.TB, n int) (raft []string, voters string) {
	t.Helper()
	raft = make([]string, n)
	quoted := make([]string, n)
	for i := range raft {
		raft[i] = freeAddr(t)
		quoted[i] = strconv.Quote(strconv.Itoa(i+1) + "@" + raft[i])
	}
	return raft, "[" + strings.Join(quoted, ", ") + "]"
}

// FreeAddr is a 127.0.0.1 address with a port free now and not given out before by
// this process (a raft listener, a proxy).
func FreeAddr(t testing.TB) string {
	t.Helper()
	return freeAddr(t)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen on 127.0.0.1:0: %v", err)
		}
		addr := l.Addr().String()
		l.Close()
		given.Lock()
		dup := given.m[addr]
		given.m[addr] = true
		given.Unlock()
		if !dup {
			return addr
		}
	}
	t.Fatal("no unused free port in 100 tries")
	return ""
}

// DialContext is a plain TCP dial to the broker's Kafka listener, for tests that speak
// raw bytes (partial requests, floods).
func (p *Proc) DialContext(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", p.Addr)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("[... %d lines cut ...]\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}
