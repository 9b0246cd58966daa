package replication_test

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
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/kernel"
)

// Transactions on a 3-broker cluster whose partitions are led by every broker: the
// coordinator writes its markers to the partitions other brokers lead through
// WriteTxnMarkers, so a read_committed consumer sees exactly the committed records
// and every partition's last stable offset reaches its log end.
func TestClusterTransactions(t *testing.T) {
	c := startCluster(t, 3, "segmentlog", map[string]string{"transaction.state.log.num.partitions": "3"})
	const topic, parts = "ctxn", 6
	c.createTopic(topic, parts, 2, nil)
	leaders := map[int32]bool{}
	for p := range int32(parts) {
		leaders[c.leaderOf(kernel.TopicPartition{Topic: topic, Partition: p})] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("the partitions' leaders are %v: the test needs several", leaders)
	}
	// Transaction version 2, which kgo uses once the cluster finalized it (a new
	// cluster does): produce adds each partition at the coordinator, wherever it is,
	// and every EndTxn bumps the epoch.
	runClusterTxns(t, c, topic, parts, "tv2")
	wantEpochs(t, c, 4, "tv2-a", "tv2-b")
	// Version 0 clients (EndTxn capped at v4): AddPartitionsToTxn, one epoch.
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	runClusterTxns(t, c, topic, parts, "tv0", kgo.MaxVersions(v))
	wantEpochs(t, c, 0, "tv0-a", "tv0-b")
}

// wantEpochs checks the transactional ids' producer epochs.
func wantEpochs(t *testing.T, c *rcluster, epoch int16, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds, err := kadm.NewClient(c.client()).DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		d, ok := ds[id]
		if !ok || d.Err != nil || d.ProducerEpoch != epoch {
			t.Errorf("%s: %+v, want epoch %d", id, d, epoch)
		}
	}
}

// runClusterTxns runs transactions of one record per partition, committing every
// other one, from two producers whose transactional ids hash to different
// coordinators, and checks what read_committed sees.
func runClusterTxns(t *testing.T, c *rcluster, topic string, parts int32, prefix string, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var want []string
	for _, id := range []string{prefix + "-a", prefix + "-b"} {
		cl := c.client(append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(20 * time.Second)}, opts...)...)
		for n := range 4 {
			commit := n%2 == 1
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			for p := range parts {
				v := fmt.Sprintf("%s-%d-%d", id, n, p)
				recs = append(recs, &kgo.Record{Partition: p, Value: []byte(v)})
				if commit {
					want = append(want, v)
				}
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", id, err)
			}
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("%s: end transaction %d (commit %v): %v", id, n, commit, err)
			}
		}
	}
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed consumed %d of %d records", len(got), len(want))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), prefix+"-") {
				got = append(got, string(r.Value))
			}
		})
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed consumed %v, want %v", got, want)
	}
	// Every marker is written: each partition's LSO is its log end.
	adm := kadm.NewClient(c.client())
	c.eventually(30*time.Second, "every partition's last stable offset at its log end", func() bool {
		end, err1 := adm.ListEndOffsets(ctx, topic)
		com, err2 := adm.ListCommittedOffsets(ctx, topic)
		if err1 != nil || err2 != nil {
			return false
		}
		same := true
		end.Each(func(o kadm.ListedOffset) {
			lso, _ := com.Lookup(o.Topic, o.Partition)
			same = same && o.Err == nil && lso.Err == nil && lso.Offset == o.Offset
		})
		return same
	})
}
