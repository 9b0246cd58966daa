package interop

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLibrdkafkaTransactions runs txn_librdkafka_test.py: librdkafka transactions
// (init_transactions, begin/produce/commit and abort, send_offsets_to_transaction from a
// group consumer) interleaved with plain records; read_committed consumers see exactly
// the committed and plain records and stop before a transaction still open,
// read_uncommitted ones see the aborted records too, and the group's committed offsets
// are the committed transaction's, not the aborted one's.
func TestLibrdkafkaTransactions(t *testing.T) {
	t.Parallel()
	needLibrdkafka(t)
	b := startBrokerConfig(t, txnBrokerConfig)

	runPythonOK(t, 150*time.Second, "librdkafka transactions: OK", "txn_librdkafka_test.py", b.addr, "lrk-txn-")
}

// TestLibrdkafkaTransactionsBrokerKills runs txn_librdkafka_kill_test.py: a librdkafka
// transactional producer ending one 10-record transaction after another (every fifth
// aborted) and an idempotent producer writing alongside, while the broker is SIGKILLed
// and restarted twice. The script retries retriable commit errors and aborts when
// librdkafka asks for it; it must meet no fatal error. Afterwards read_committed sees
// exactly the transactions the script saw commit, in order, and the idempotent topic
// holds every delivered record exactly once at its reported offset, none undelivered.
func TestLibrdkafkaTransactionsBrokerKills(t *testing.T) {
	t.Parallel()
	needLibrdkafka(t)
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		txnTopic   = "lrk-kill-txn"
		idemTopic  = "lrk-kill-idem"
		partitions = 2
		perRound   = 10 // transactions between kills
	)
	createTopic(t, b.addr, txnTopic, partitions)
	createTopic(t, b.addr, idemTopic, partitions)
	p := startPython(t, "txn_librdkafka_kill_test.py", b.addr, txnTopic, idemTopic, "lrk-kill-txn-id")
	p.waitEvent("ready", 60*time.Second)

	type txnEvent struct {
		Event     string      `json:"event"`
		Committed bool        `json:"committed"`
		Records   [][2]any    `json:"records"`
		Delivered [][3]any    `json:"delivered"`
		Failed    [][3]string `json:"failed"`
		Left      int         `json:"undelivered"`
		Msg       string      `json:"msg"`
	}
	events := func() []txnEvent {
		var out []txnEvent
		for _, line := range p.out.from(0) {
			var ev txnEvent
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Event != "" {
				out = append(out, ev)
			}
		}
		return out
	}
	ended := func() int {
		n := 0
		for _, ev := range events() {
			if ev.Event == "fail" {
				t.Fatalf("txn_librdkafka_kill_test.py: %s", ev.Msg)
			}
			if ev.Event == "txn" {
				n++
			}
		}
		return n
	}
	for round := 1; round <= 3; round++ {
		target := ended() + perRound
		if !pollUntil(120*time.Second, func() bool { return ended() >= target }) {
			t.Fatalf("round %d: %d transactions ended within 120s, want %d", round, ended(), target)
		}
		if round < 3 {
			t.Logf("SIGKILL with %d transactions ended", ended())
			b.kill()
			b.start()
		}
	}
	_ = p.stdin.Close()
	p.wait(150 * time.Second)

	wantCommitted, wantAll := map[int32][]string{}, map[int32][]string{}
	var idem *txnEvent
	aborted := 0
	for _, ev := range events() {
		switch ev.Event {
		case "txn":
			if !ev.Committed {
				aborted++
			}
			for _, r := range ev.Records {
				part, v := int32(r[0].(float64)), r[1].(string)
				wantAll[part] = append(wantAll[part], v)
				if ev.Committed {
					wantCommitted[part] = append(wantCommitted[part], v)
				}
			}
		case "idem":
			idem = &ev
		}
	}
	t.Logf("%d transactions ended, %d aborted", ended(), aborted)
	writeSentinels(t, b.addr, txnTopic, partitions)
	checkSamePartitionValues(t, "read_committed", valuesPerPartition(readToSentinels(t, b.addr, txnTopic, partitions, kgo.ReadCommitted(), 60*time.Second)), wantCommitted)
	// A transaction aborted on librdkafka's request may have lost records before they
	// reached the log, so read_uncommitted only has to hold what committed, in order.
	got := readToSentinels(t, b.addr, txnTopic, partitions, kgo.ReadUncommitted(), 60*time.Second)
	for part, vs := range valuesPerPartition(got) {
		if !isSubsequence(wantCommitted[part], vs) || !isSubsequence(vs, wantAll[part]) {
			t.Errorf("read_uncommitted partition %d: %d records, not between the committed (%d) and all (%d) records in order",
				part, len(vs), len(wantCommitted[part]), len(wantAll[part]))
		}
	}

	if idem == nil {
		t.Fatalf("no idem report from the script")
	}
	if len(idem.Failed) > 0 || idem.Left > 0 {
		t.Errorf("idempotent producer: %d records failed (first: %v), %d undelivered", len(idem.Failed), idem.Failed[:min(1, len(idem.Failed))], idem.Left)
	}
	wantIdem := map[int32]map[int64]string{}
	for _, d := range idem.Delivered {
		part, off, v := int32(d[0].(float64)), int64(d[1].(float64)), d[2].(string)
		if wantIdem[part] == nil {
			wantIdem[part] = map[int64]string{}
		}
		wantIdem[part][off] = v
	}
	gotIdem := fetchAll(t, b.addr, idemTopic, partitionList(partitions), 60*time.Second)
	for part := range int32(partitions) {
		recs := gotIdem[part]
		if len(recs) != len(wantIdem[part]) {
			t.Errorf("idempotent topic partition %d: %d records, %d delivered", part, len(recs), len(wantIdem[part]))
		}
		seen := map[string]bool{}
		for _, r := range recs {
			if seen[string(r.Value)] {
				t.Errorf("idempotent topic partition %d: %q twice (again at offset %d)", part, r.Value, r.Offset)
			}
			seen[string(r.Value)] = true
			if w, ok := wantIdem[part][r.Offset]; !ok || w != string(r.Value) {
				t.Errorf("idempotent topic partition %d offset %d: %q, delivery report said %q", part, r.Offset, r.Value, w)
			}
		}
	}
}

// isSubsequence reports whether sub appears in seq in order (not necessarily adjacent).
func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, v := range seq {
		if i < len(sub) && sub[i] == v {
			i++
		}
	}
	return i == len(sub)
}
