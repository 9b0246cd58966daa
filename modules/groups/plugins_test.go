package groups

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/modules/groups/assignor"
	pluginsdk "github.com/sluicehq/sluice/plugins/assignor"
	"github.com/sluicehq/sluice/plugins/assignor/assignortest"
)

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginBin  string
	pluginErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pluginDir != "" {
		_ = os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}

// BuildTestAssignorPlugin builds testdata/assignorplugin once per test binary and
// returns its path (see that file for its modes).
func BuildTestAssignorPlugin(t testing.TB) string {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "sluice-assignor-plugin")
		if pluginErr != nil {
			return
		}
		pluginBin = filepath.Join(pluginDir, "assignorplugin")
		out, err := exec.Command("go", "build", "-o", pluginBin, "./testdata/assignorplugin").CombinedOutput()
		if err != nil {
			pluginErr = fmt.Errorf("build test plugin: %v\n%s", err, out)
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginBin
}

// ProcessAlive reports whether a process with pid exists (and is not a zombie we
// could still signal: go-plugin reaps its children).
func ProcessAlive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

func decodeAssignors(t *testing.T, src string) (*Module, error) {
	t.Helper()
	m := New()
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(m); err != nil {
		return m, err
	}
	return m, m.Validate()
}

func TestAssignorsConfig(t *testing.T) {
	bin := BuildTestAssignorPlugin(t)
	sum, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(sum)
	sha := hex.EncodeToString(h[:])

	m, err := decodeAssignors(t, fmt.Sprintf(`
assignors:
  - name: smallest
    plugin: %s
    sha256: %s
    timeout_ms: 250
    fallback: range
    args: [--x]
    env: {A: b}
  - uniform
  - range
`, bin, sha))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Assignors) != 3 || m.Assignors[1].Name != "uniform" || m.Assignors[0].Plugin != bin ||
		m.Assignors[0].TimeoutMs != 250 || m.Assignors[0].Env["A"] != "b" || m.Assignors[0].Args[0] != "--x" {
		t.Fatalf("decoded %+v", m.Assignors)
	}
	if len(m.assignors) != 3 || len(m.plugins) != 1 || m.assignors[0].Name() != "smallest" ||
		m.plugins[0].fallback.Name() != "range" || m.plugins[0].timeout != 250*time.Millisecond {
		t.Fatalf("built %v / %v", m.assignors, m.plugins)
	}

	m, err = decodeAssignors(t, fmt.Sprintf("assignors: [{name: p, plugin: %s}]\n", bin))
	if err != nil {
		t.Fatal(err)
	}
	if p := m.plugins[0]; p.fallback.Name() != "uniform" || p.timeout != time.Second {
		t.Fatalf("defaults: fallback %s timeout %v", p.fallback.Name(), p.timeout)
	}
	// The default list, and marshalling back.
	m, err = decodeAssignors(t, "sweep_interval_ms: 100\n")
	if err != nil || len(m.assignors) != 2 || m.assignors[0].Name() != "uniform" {
		t.Fatalf("default: %v %v", m.assignors, err)
	}
	out, _ := yaml.Marshal(m.Assignors)
	if string(out) != "- uniform\n- range\n" {
		t.Fatalf("marshal: %q", out)
	}

	notExec := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"assignors: []\n", "at least one"},
		{"assignors: [sticky]\n", "unknown assignor"},
		{"assignors: [uniform, uniform]\n", "listed twice"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s}, {name: p, plugin: %s}]\n", bin, bin), "listed twice"},
		{fmt.Sprintf("assignors: [{name: uniform, plugin: %s}, uniform]\n", bin), "listed twice"},
		{"assignors: [{name: p, plugin: /does/not/exist}]\n", "no such file"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s}]\n", notExec), "not an executable"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s}]\n", filepath.Dir(bin)), "not an executable"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s, sha256: abc}]\n", bin), "64 hex"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s, sha256: %s}]\n", bin, strings.Repeat("zz", 32)), "64 hex"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s, fallback: sticky}]\n", bin), "not a built-in"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s, fallback: q}, {name: q, plugin: %s}]\n", bin, bin), "not a built-in"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s, timeout_ms: -1}]\n", bin), "timeout_ms"},
		{fmt.Sprintf("assignors: [{name: p, plugin: %s, bogus: 1}]\n", bin), `unknown key "bogus"`},
		{"assignors: [{plugin: x}]\n", "needs a name"},
		{"assignors: [{name: uniform, timeout_ms: 5}]\n", "plugins only"},
		{"assignors: [[a]]\n", "want a name or a mapping"},
		{"assignors: [5]\n", "want a name or a mapping"},
	} {
		_, err := decodeAssignors(t, c.yaml)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.want)
		}
	}
}

// testInput is a group of n members subscribed to one topic of parts partitions.
func testInput(n int, parts int32) assignor.Input {
	id := assignor.TopicID{1}
	in := assignor.Input{Topics: map[assignor.TopicID]assignor.Topic{id: {ID: id, Name: "t", Partitions: parts}}}
	for i := range n {
		in.Members = append(in.Members, assignor.Member{ID: fmt.Sprintf("m%04d", i), Topics: []string{"t"}})
	}
	return in
}

// isSmallest reports whether out is the test plugin's answer: all to the first member.
func isSmallest(in assignor.Input, out assignor.Assignment) bool {
	for id, t := range in.Topics {
		if len(out[in.Members[0].ID][id]) != int(t.Partitions) {
			return false
		}
	}
	return true
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testcheck.SyncBuffer

// startTestPlugin starts a plugin assignor on the test binary in mode.
func startTestPlugin(t testing.TB, mode string, edit ...func(*AssignorConfig)) (*pluginAssignor, *syncBuffer) {
	t.Helper()
	c := AssignorConfig{Name: "smallest", Plugin: BuildTestAssignorPlugin(t), TimeoutMs: 300,
		Env: map[string]string{"SLUICE_TEST_ASSIGNOR_MODE": mode}}
	for _, e := range edit {
		e(&c)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	p := newPluginAssignor(c)
	p.start(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { _ = p.shutdown(context.Background()) })
	return p, logs
}

func waitState(t *testing.T, p *pluginAssignor, what string, cond func(PluginStats) bool) PluginStats {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := p.stats()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: stats %+v", what, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPluginAssignorGood(t *testing.T) {
	p, logs := startTestPlugin(t, "good")
	s := p.stats()
	if s.State != PluginRunning || !ProcessAlive(s.PID) {
		t.Fatalf("after start: %+v", s)
	}
	in := testInput(5, 12)
	out, err := p.Assign(context.Background(), in)
	if err != nil || !isSmallest(in, out) {
		t.Fatalf("Assign = %v, %v; want everything to %s", out, err, in.Members[0].ID)
	}
	s = p.stats()
	if s.Calls != 1 || s.Errors != 0 || s.Fallbacks != 0 || s.LastLatencyMs <= 0 {
		t.Fatalf("stats %+v", s)
	}
	// The plugin's stderr is in the broker's log, tagged with the plugin's name.
	waitFor := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "test plugin: starting") && time.Now().Before(waitFor) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "test plugin: starting") {
			if !strings.Contains(line, "plugin=smallest") || !strings.Contains(line, "level=INFO") {
				t.Fatalf("stderr line without plugin tag or not at info: %s", line)
			}
			goto stopped
		}
	}
	t.Fatalf("plugin stderr not logged:\n%s", logs.String())
stopped:
	pid := s.PID
	if err := p.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ProcessAlive(pid) {
		t.Fatalf("plugin process %d still alive after shutdown", pid)
	}
	if s := p.stats(); s.State != PluginStopped || s.PID != 0 {
		t.Fatalf("after shutdown: %+v", s)
	}
	// Calls after shutdown use the fallback and do not count as errors.
	out, err = p.Assign(context.Background(), in)
	if err != nil || assignor.Check(in, out) != nil || isSmallest(in, out) {
		t.Fatalf("after shutdown: %v %v", out, err)
	}
	if s := p.stats(); s.Errors != 0 || s.Fallbacks != 1 {
		t.Fatalf("after shutdown: %+v", s)
	}
}

func TestPluginAssignorNameMismatchWarns(t *testing.T) {
	_, logs := startTestPlugin(t, "good", func(c *AssignorConfig) { c.Env["SLUICE_TEST_ASSIGNOR_NAME"] = "other" })
	if !strings.Contains(logs.String(), "reports another name") {
		t.Fatalf("no warning:\n%s", logs.String())
	}
}

// fallbackCase runs one call expected to fall back and checks the result and stats.
func fallbackCase(t *testing.T, p *pluginAssignor, wantErr string) PluginStats {
	t.Helper()
	in := testInput(4, 8)
	out, err := p.Assign(context.Background(), in)
	if err != nil {
		t.Fatalf("Assign: %v (the fallback never fails a valid input)", err)
	}
	if err := assignor.Check(in, out); err != nil || isSmallest(in, out) {
		t.Fatalf("not the fallback's answer: %v %v", out, err)
	}
	s := p.stats()
	if s.Errors < 1 || s.Fallbacks < 1 || !strings.Contains(s.LastError, wantErr) {
		t.Fatalf("stats %+v, want an error containing %q", s, wantErr)
	}
	return s
}

func TestPluginAssignorInvalidAnswer(t *testing.T) {
	p, _ := startTestPlugin(t, "invalid")
	fallbackCase(t, p, "invalid assignment")
	if s := p.stats(); s.State != PluginRunning {
		t.Fatalf("a bad answer does not restart the plugin: %+v", s)
	}
}

func TestPluginAssignorError(t *testing.T) {
	p, _ := startTestPlugin(t, "error")
	fallbackCase(t, p, "asked to fail")
}

func TestPluginAssignorHang(t *testing.T) {
	p, _ := startTestPlugin(t, "hang")
	start := time.Now()
	fallbackCase(t, p, "no answer within 300ms")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a hung plugin held the call for %v", d)
	}
}

func TestPluginAssignorExitAtStart(t *testing.T) {
	p, _ := startTestPlugin(t, "exit-at-start")
	s := fallbackCase(t, p, "")
	if s.State == PluginRunning || s.PID != 0 {
		t.Fatalf("state %+v", s)
	}
	waitState(t, p, "failed", func(s PluginStats) bool { return s.State == PluginFailed })
}

func TestPluginAssignorCrashRestarts(t *testing.T) {
	modeFile := filepath.Join(t.TempDir(), "mode")
	if err := os.WriteFile(modeFile, []byte("crash-on-call"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := startTestPlugin(t, "", func(c *AssignorConfig) { c.Env["SLUICE_TEST_ASSIGNOR_MODE_FILE"] = modeFile })
	pid := p.stats().PID
	fallbackCase(t, p, "")
	if err := os.WriteFile(modeFile, []byte("good"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := waitState(t, p, "restart", func(s PluginStats) bool {
		return s.State == PluginRunning && s.Restarts == 1 && s.PID != pid
	})
	if ProcessAlive(pid) {
		t.Fatalf("crashed process %d still there", pid)
	}
	in := testInput(3, 6)
	if out, err := p.Assign(context.Background(), in); err != nil || !isSmallest(in, out) {
		t.Fatalf("after restart: %v %v (stats %+v)", out, err, s)
	}
}

func TestPluginAssignorKilledRestarts(t *testing.T) {
	p, _ := startTestPlugin(t, "good")
	pid := p.stats().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, "restart", func(s PluginStats) bool { return s.State == PluginRunning && s.PID != pid && s.Restarts == 1 })
}

func TestPluginAssignorChecksum(t *testing.T) {
	bad := strings.Repeat("00", 32)
	p, _ := startTestPlugin(t, "good", func(c *AssignorConfig) { c.SHA256 = bad })
	fallbackCase(t, p, "")
	if s := p.stats(); !strings.Contains(s.LastError, "checksum") {
		t.Fatalf("stats %+v, want a checksum error", s)
	}

	b, err := os.ReadFile(BuildTestAssignorPlugin(t))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	p, _ = startTestPlugin(t, "good", func(c *AssignorConfig) { c.SHA256 = hex.EncodeToString(h[:]) })
	if s := p.stats(); s.State != PluginRunning {
		t.Fatalf("with the right checksum: %+v", s)
	}
}

// Stop waits for a call in flight (it finishes at its deadline, with the
// fallback), then kills the process.
func TestPluginAssignorStopWaitsForCalls(t *testing.T) {
	p, _ := startTestPlugin(t, "hang", func(c *AssignorConfig) { c.TimeoutMs = 700 })
	pid := p.stats().PID
	callDone := make(chan struct{})
	go func() {
		defer close(callDone)
		_, _ = p.Assign(context.Background(), testInput(2, 2))
	}()
	waitState(t, p, "call in flight", func(PluginStats) bool { p.mu.Lock(); defer p.mu.Unlock(); return p.inflight == 1 })
	if err := p.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The call's own accounting, not its goroutine's later send: Assign leaves the
	// in-flight count before it returns, and the goroutine may run after shutdown.
	p.mu.Lock()
	inflight := p.inflight
	p.mu.Unlock()
	if inflight != 0 {
		t.Fatalf("shutdown returned with %d call(s) in flight", inflight)
	}
	<-callDone
	if ProcessAlive(pid) {
		t.Fatalf("plugin process %d alive after shutdown", pid)
	}

	// Bounded by the context: a hung call past Stop's deadline is cut.
	p, _ = startTestPlugin(t, "hang", func(c *AssignorConfig) { c.TimeoutMs = 30_000 })
	pid = p.stats().PID
	go func() { _, _ = p.Assign(context.Background(), testInput(2, 2)) }()
	waitState(t, p, "call in flight", func(PluginStats) bool { p.mu.Lock(); defer p.mu.Unlock(); return p.inflight == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := p.shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown = %v, want a deadline error", err)
	}
	if ProcessAlive(pid) {
		t.Fatalf("plugin process %d alive after shutdown", pid)
	}
}

// The plugin SDK owns its types: the host's conversion must carry every field both
// ways. The two sets of types have the same JSON form, so a value and its conversion
// encode alike; the field counts catch a field added on one side only.
func TestSDKConversion(t *testing.T) {
	for _, pair := range [][2]any{
		{assignor.Input{}, pluginsdk.Input{}},
		{assignor.Member{}, pluginsdk.Member{}},
		{assignor.Topic{}, pluginsdk.Topic{}},
	} {
		a, b := reflect.TypeOf(pair[0]), reflect.TypeOf(pair[1])
		if a.NumField() != b.NumField() {
			t.Errorf("%v has %d fields, %v %d: convert the new ones in plugins.go", a, a.NumField(), b, b.NumField())
		}
	}
	x, y := assignor.TopicID{1, 2, 3}, assignor.TopicID{9}
	in := assignor.Input{
		Members: []assignor.Member{
			{ID: "m1", InstanceID: "i1", Rack: "r1", Topics: []string{"a", "b"}, Current: map[assignor.TopicID][]int32{x: {0, 2}, y: nil}},
			{ID: "m2", Topics: []string{}},
		},
		Topics: map[assignor.TopicID]assignor.Topic{
			x: {ID: x, Name: "a", Partitions: 3, PartitionRacks: [][]string{{"r1"}, nil, {"r2", "r3"}},
				PartitionEndOffsets: []int64{1, 2, 3}, PartitionLag: []int64{0, -1, 7}},
			y: {ID: y, Name: "b"},
		},
	}
	sameJSON := func(what string, a, b any) {
		t.Helper()
		ja, err1 := json.Marshal(a)
		jb, err2 := json.Marshal(b)
		if err1 != nil || err2 != nil || !bytes.Equal(ja, jb) {
			t.Errorf("%s: %s (%v)\nconverted: %s (%v)", what, ja, err1, jb, err2)
		}
	}
	sameJSON("input", in, toSDKInput(in))
	sameJSON("zero input", assignor.Input{}, toSDKInput(assignor.Input{}))
	if got := toSDKInput(assignor.Input{}); got.Members != nil || got.Topics != nil {
		t.Errorf("zero input converted to %+v", got)
	}
	a := pluginsdk.Assignment{"m1": {pluginsdk.TopicID(x): {0, 2}}, "m2": {}}
	sameJSON("assignment", a, fromSDKAssignment(a))
	if got := fromSDKAssignment(a); got["m2"] == nil || fromSDKAssignment(nil) != nil {
		t.Errorf("nil and empty not kept apart: %#v", got)
	}

	// An SDK error wrapping its ErrInvalidInput wraps ours too, with the same text.
	err := fmt.Errorf("plugin: %w", pluginsdk.ErrInvalidInput)
	if _, got := (sdkAssignor{failing{err}}).Assign(context.Background(), in); !errors.Is(got, assignor.ErrInvalidInput) ||
		!errors.Is(got, pluginsdk.ErrInvalidInput) || got.Error() != err.Error() {
		t.Errorf("invalid input error became %v", got)
	}
}

type failing struct{ err error }

func (failing) Name() string { return "failing" }
func (f failing) Assign(context.Context, pluginsdk.Input) (pluginsdk.Assignment, error) {
	return nil, f.err
}

// The built-ins, served by the test plugin (which converts to and from the SDK's
// types), pass the SDK's standard suite through the process boundary: what the
// SDK's own tests ran in process while its types were ours.
func TestBuiltinsPassSDKSuite(t *testing.T) {
	bin := BuildTestAssignorPlugin(t)
	for _, name := range []string{"uniform", "range"} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "SLUICE_TEST_ASSIGNOR_MODE="+name)
			c, _ := assignortest.Launch(t, cmd)
			assignortest.Suite(t, c)
		})
	}
}
