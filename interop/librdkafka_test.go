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

// TestLibrdkafka runs librdkafka_test.py: produce with gzip, snappy, lz4 and zstd
// (acks=all), consume back with assign() at OFFSET_BEGINNING checking every key, value and
// header exactly once in order, then the AdminClient calls the installed version has.
func TestLibrdkafka(t *testing.T) {
	needLibrdkafka(t)
	b := startBroker(t)

	start := time.Now()
	out := runCmd(t, runOpts{timeout: 150 * time.Second, env: []string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}},
		systemPython, "librdkafka_test.py", b.addr, "lrk-")
	t.Logf("librdkafka_test.py (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, "librdkafka interop: OK") {
		t.Errorf("librdkafka_test.py exited 0 without its OK line")
	}
}
