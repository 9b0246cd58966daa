package interop

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// systemPython is Debian's interpreter, the one python3-confluent-kafka installs into (a
// python3 earlier on PATH, e.g. from pyenv, would not see it).
const systemPython = "/usr/bin/python3"

// needLibrdkafka skips (or, with SLUICE_INTEROP_REQUIRED=1, fails) the test when
// systemPython cannot import confluent_kafka.
func needLibrdkafka(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		need(t, "%s not found", systemPython)
	}
	if out, err := exec.Command(systemPython, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		need(t, "%s cannot import confluent_kafka (apt-get install python3-confluent-kafka): %v\n%s", systemPython, err, out)
	}
}

// pythonEnv is what systemPython scripts get added to the test's environment: no .pyc
// files written next to them, and unbuffered stdout so each event line arrives when it
// is printed.
func pythonEnv(extra ...string) []string {
	return append([]string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}, extra...)
}

// startPython starts script args under systemPython as a lineProc.
func startPython(t *testing.T, script string, args ...string) *lineProc {
	t.Helper()
	return startLineProc(t, pythonEnv(), systemPython, append([]string{script}, args...)...)
}

// runPythonOK runs script args under systemPython to its end, logs its output and fails
// the test unless it exited 0 with a line holding ok.
func runPythonOK(t *testing.T, timeout time.Duration, ok, script string, args ...string) {
	t.Helper()
	start := time.Now()
	out := runCmd(t, runOpts{timeout: timeout, env: pythonEnv()}, systemPython, append([]string{script}, args...)...)
	t.Logf("%s (%s):\n%s", script, time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, ok) {
		t.Errorf("%s exited 0 without its OK line", script)
	}
}

// TestLibrdkafka runs librdkafka_test.py: produce with gzip, snappy, lz4 and zstd
// (acks=all), consume back with assign() at OFFSET_BEGINNING checking every key, value and
// header exactly once in order, then the AdminClient calls the installed version has.
func TestLibrdkafka(t *testing.T) {
	t.Parallel()
	needLibrdkafka(t)
	b := startBroker(t)

	runPythonOK(t, 150*time.Second, "librdkafka interop: OK", "librdkafka_test.py", b.addr, "lrk-")
}
