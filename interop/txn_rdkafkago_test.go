package interop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLibrdkafkaTxnV2: a librdkafka 2.11 transactional producer (confluent-kafka-go,
// interop/rdkafkago) on a broker that finalized transaction.version 2 (KIP-890 part
// 2) commits and aborts transactions in turn; a read_committed consumer sees every
// committed record once and no aborted one, a read_uncommitted one sees them all,
// and no transaction is left open. librdkafka 2.11 ends its transactions with
// EndTxn v4 and below (it has no KIP-890 part 2), so the coordinator keeps its
// epoch, as version 2 requires for clients of version 0 or 1; franz-go's version 2
// path is tested in modules/txn.
func TestLibrdkafkaTxnV2(t *testing.T) {
	t.Parallel()
	const topic, partitions, rounds, perRound = "rdk-txn", 3, 4, 30
	b := startBrokerConfig(t, txnBrokerConfig)
	bin := buildRdkafkago(t)
	cl := newClient(t, b.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "interop", "1"
	avr, err := av.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(avr.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool {
		return f.Name == "transaction.version"
	}); i < 0 || avr.FinalizedFeatures[i].MaxVersionLevel != 2 {
		t.Fatalf("transaction.version not finalized at 2: %+v", avr.FinalizedFeatures)
	}
	createTopic(t, b.addr, topic, partitions)

	out := runCmd(t, runOpts{timeout: 2 * time.Minute}, bin, "-bootstrap", b.addr, "-topic", topic,
		"-client-id", "rdk-txn", "-txn", "rdk-txn-id", "-n", fmt.Sprint(perRound), "-rounds", fmt.Sprint(rounds))
	t.Logf("rdkafkago:\n%s", out)
	writeSentinels(t, b.addr, topic, partitions)

	want := map[string]bool{}
	var all []string
	for r := range rounds {
		for i := range perRound {
			v := fmt.Sprintf("%d-%d", r, i)
			all = append(all, v)
			want[v] = r%2 == 0
		}
	}
	for _, level := range []kgo.IsolationLevel{kgo.ReadCommitted(), kgo.ReadUncommitted()} {
		seen := map[string]int{}
		for _, rs := range readToSentinels(t, b.addr, topic, partitions, level, 60*time.Second) {
			for _, r := range rs {
				seen[string(r.Value)]++
			}
		}
		for _, v := range all {
			wantN := 1
			if level == kgo.ReadCommitted() && !want[v] {
				wantN = 0
			}
			if seen[v] != wantN {
				t.Errorf("%s: %q seen %d times, want %d", levelName(level), v, seen[v], wantN)
			}
		}
		if len(seen) > len(all) {
			t.Errorf("%s: %d distinct values, want at most %d", levelName(level), len(seen), len(all))
		}
	}
	// Nothing left open: the transactional id's state is Empty or CompleteCommit/Abort.
	adm := kadm.NewClient(cl)
	dt, err := adm.DescribeTransactions(ctx, "rdk-txn-id")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := dt["rdk-txn-id"]
	if !ok || d.Err != nil || !strings.HasPrefix(d.State, "Complete") && d.State != "Empty" {
		t.Fatalf("transaction state: %+v", d)
	}
	if d.ProducerEpoch != 0 {
		t.Errorf("epoch %d after %d transactions of a client without KIP-890 part 2, want 0 (a bump fences it)", d.ProducerEpoch, rounds)
	}
}
