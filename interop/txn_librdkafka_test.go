package interop

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLibrdkafkaTransactions runs txn_librdkafka_test.py: librdkafka transactions
// (init_transactions, begin/produce/commit and abort, send_offsets_to_transaction from a
// group consumer) interleaved with plain records; read_committed consumers see exactly
// the committed and plain records and stop before a transaction still open,
// read_uncommitted ones see the aborted records too, and the group's committed offsets
// are the committed transaction's, not the aborted one's.
func TestLibrdkafkaTransactions(t *testing.T) {
	if _, err := os.Stat(systemPython); err != nil {
		need(t, "%s not found", systemPython)
	}
	if out, err := exec.Command(systemPython, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		need(t, "%s cannot import confluent_kafka (apt-get install python3-confluent-kafka): %v\n%s", systemPython, err, out)
	}
	b := startBrokerConfig(t, txnBrokerConfig)

	start := time.Now()
	out := runCmd(t, runOpts{timeout: 150 * time.Second, env: []string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}},
		systemPython, "txn_librdkafka_test.py", b.addr, "lrk-txn-")
	t.Logf("txn_librdkafka_test.py (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, "librdkafka transactions: OK") {
		t.Errorf("txn_librdkafka_test.py exited 0 without its OK line")
	}
}
