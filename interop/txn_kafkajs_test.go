package interop

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkajsTxnReport is the last stdout line of txn_kafkajs_test.js.
type kafkajsTxnReport struct {
	IdemTopic string `json:"idemTopic"`
	Idem      []struct {
		Partition int32  `json:"partition"`
		Value     string `json:"value"`
	} `json:"idem"`
	OutTopic string `json:"outTopic"`
	Out      []struct {
		Partition int32  `json:"partition"`
		Value     string `json:"value"`
		Committed bool   `json:"committed"`
	} `json:"out"`
	Group   string           `json:"group"`
	Offsets map[string]int64 `json:"offsets"`
}

// TestKafkajsTransactions runs txn_kafkajs_test.js, the seed's kafkajs snippets: an
// idempotent producer (idempotent: true, maxInFlightRequests: 5, acks -1) with
// sequential and concurrent sends, and a transactionalId producer doing tx.send +
// tx.sendOffsets + tx.commit, the same with tx.abort, and tx.send + tx.commit. Then
// franz-go checks: the idempotent topic holds every message exactly once (each send's
// messages in order); read_committed sees exactly the committed transactions' messages
// in order (reading up to sentinels appended afterwards, so a transaction left open
// would fail it), read_uncommitted the aborted ones too; kadm shows the group's offsets
// from the committed transaction, not the aborted one.
func TestKafkajsTransactions(t *testing.T) {
	t.Parallel()
	node := needKafkajs(t)
	b := startBrokerConfig(t, txnBrokerConfig)
	var rep kafkajsTxnReport
	runNodeReport(t, 120*time.Second, &rep, node, "txn_kafkajs_test.js", b.addr, "kjs-txn-")
	if len(rep.Idem) == 0 || len(rep.Out) == 0 || rep.Group == "" {
		t.Fatalf("txn_kafkajs_test.js report: %d idempotent messages, %d transactional ones, group %q", len(rep.Idem), len(rep.Out), rep.Group)
	}
	const partitions = 3

	// Idempotent topic: each message exactly once; each send's messages in order (the
	// concurrent sends may interleave with each other).
	got := fetchAll(t, b.addr, rep.IdemTopic, partitionList(partitions), 30*time.Second)
	want := map[int32]map[string][]string{} // partition → send → values
	for _, m := range rep.Idem {
		send := m.Value[:strings.LastIndexByte(m.Value, '-')]
		if want[m.Partition] == nil {
			want[m.Partition] = map[string][]string{}
		}
		want[m.Partition][send] = append(want[m.Partition][send], m.Value)
	}
	for p := range int32(partitions) {
		gotSends := map[string][]string{}
		for _, r := range got[p] {
			v := string(r.Value)
			send := v[:max(strings.LastIndexByte(v, '-'), 0)]
			gotSends[send] = append(gotSends[send], v)
		}
		checkSameLists(t, fmt.Sprintf("idempotent topic, partition %d", p), gotSends, want[p])
	}

	// Transactional output.
	writeSentinels(t, b.addr, rep.OutTopic, partitions)
	wantCommitted, wantAll := map[int32][]string{}, map[int32][]string{}
	for _, m := range rep.Out {
		wantAll[m.Partition] = append(wantAll[m.Partition], m.Value)
		if m.Committed {
			wantCommitted[m.Partition] = append(wantCommitted[m.Partition], m.Value)
		}
	}
	checkSamePartitionValues(t, "read_committed", valuesPerPartition(readToSentinels(t, b.addr, rep.OutTopic, partitions, kgo.ReadCommitted(), 60*time.Second)), wantCommitted)
	checkSamePartitionValues(t, "read_uncommitted", valuesPerPartition(readToSentinels(t, b.addr, rep.OutTopic, partitions, kgo.ReadUncommitted(), 60*time.Second)), wantAll)

	// The group's offsets come from the committed transaction only.
	adm := kadm.NewClient(newClient(t, b.addr))
	offs, err := committed(adm, rep.Group, rep.IdemTopic)
	if err != nil {
		t.Fatalf("fetch the offsets of group %s: %v", rep.Group, err)
	}
	for p := range int32(partitions) {
		w := rep.Offsets[strconv.Itoa(int(p))]
		if offs[p] != w {
			t.Errorf("group %s: committed offset of %s partition %d is %d, want %d (committed by tx.sendOffsets; the aborted transaction's must not count)",
				rep.Group, rep.IdemTopic, p, offs[p], w)
		}
	}
}
