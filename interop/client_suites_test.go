package interop

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// What the client suites (sarama_suite_test.go, kafkago_suite_test.go) share: each
// runs another client's own go test against Sluice brokers and checks its -v output.

// fullClientSuites reports whether the client suites run whole (SLUICE_CLIENT_SUITES=full)
// rather than in their short CI form.
func fullClientSuites() bool { return os.Getenv("SLUICE_CLIENT_SUITES") == "full" }

// suiteCmd prepares goBin with args (a client suite's go test) in its own process
// group, with env added; its output is collected in out and, when the variable
// logEnv names a file, written there as it runs.
func suiteCmd(t *testing.T, ctx context.Context, goBin, logEnv string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { killGroup(cmd.Process.Pid); return cmd.Process.Kill() }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), env...)
	out := new(bytes.Buffer)
	var w io.Writer = out
	if path := os.Getenv(logEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		w = io.MultiWriter(out, f)
	}
	cmd.Stdout, cmd.Stderr = w, w
	return cmd, out
}

// checkSuite reports a client suite's go test -v results: it fails on any test that
// failed and is not in expected (with its output), and on an expected failure that
// passes now.
func checkSuite(t *testing.T, suite, log string, took time.Duration, runErr error, expected map[string]string) {
	t.Helper()
	results := goTestResults(log)
	var passed, skipped, failed []string
	for name, r := range results {
		switch r {
		case "PASS":
			passed = append(passed, name)
		case "SKIP":
			skipped = append(skipped, name)
		default:
			failed = append(failed, name)
		}
	}
	sort.Strings(failed)
	sort.Strings(skipped)
	t.Logf("%s suite in %v: %d passed, %d skipped %v, %d failed %v (go test: %v)",
		suite, took.Round(time.Second), len(passed), len(skipped), skipped, len(failed), failed, runErr)
	if len(results) == 0 {
		t.Fatalf("no test ran:\n%s", tail(log, 60))
	}
	for _, name := range failed {
		if slices.ContainsFunc(failed, func(sub string) bool { return strings.HasPrefix(sub, name+"/") }) {
			continue // its failed subtests speak for it
		}
		if why, ok := expected[name]; ok {
			t.Logf("%s fails, as expected: %s", name, why)
			continue
		}
		t.Errorf("%s's %s failed:\n%s", suite, name, testOutput(log, name, 40))
	}
	for name := range expected {
		if results[name] == "PASS" {
			t.Errorf("%s passes now: take it off the expected failures", name)
		}
	}
	if runErr != nil && len(failed) == 0 {
		t.Errorf("go test failed without a failed test: %v\n%s", runErr, tail(log, 40))
	}
}

// goTestResults maps each test (and subtest) of go test -v output to PASS, FAIL or
// SKIP.
func goTestResults(log string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): (\S+)`).FindAllStringSubmatch(log, -1) {
		out[m[2]] = m[1]
	}
	return out
}

// testOutput is the last lines of go test -v output between name's RUN and its
// result.
func testOutput(log, name string, n int) string {
	i := strings.Index(log, "=== RUN   "+name+"\n")
	if i < 0 {
		return ""
	}
	rest := log[i:]
	if j := strings.Index(rest, "--- FAIL: "+name+" "); j >= 0 {
		rest = rest[:j+len(name)+40]
	}
	return tail(rest, n)
}
