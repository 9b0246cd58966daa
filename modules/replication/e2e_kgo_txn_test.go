package replication_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/modules/replication"
)

// TestE2EKgoTransactions: a kgo transactional producer against the txn coordinator
// (markers through this module's TxnMarkerWriter, first batches verified), read back
// by a read_committed consumer.
func TestE2EKgoTransactions(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "ktx", 2, nil)
	ctx := testCtx(t)
	cl := b.Client(t, kgo.TransactionalID("ktx-producer"), kgo.DefaultProduceTopic("ktx"))
	run := func(commit bool, values ...string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	run(false, "a1", "a2", "a3")
	run(true, "c1", "c2", "c3")
	run(false, "a4")
	run(true, "c4")

	cons := b.Client(t, kgo.ConsumeTopics("ktx"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	vals := valuesOf(pollN(t, ctx, cons, 4))
	slices.Sort(vals)
	if !slices.Equal(vals, []string{"c1", "c2", "c3", "c4"}) {
		t.Fatalf("read_committed consumed %v", vals)
	}
	// Every transaction ended: the LSO reaches the log end on both partitions once the
	// markers are written (EndTxn may answer before they are).
	adm := b.Admin(t)
	for {
		end, err1 := adm.ListEndOffsets(ctx, "ktx")
		com, err2 := adm.ListCommittedOffsets(ctx, "ktx")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		same := true
		end.Each(func(o kadm.ListedOffset) {
			c, _ := com.Lookup(o.Topic, o.Partition)
			same = same && c.Offset == o.Offset
		})
		if same {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("LSO never reached the log end: %v vs %v", com, end)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// KIP-890: a transactional batch of a transaction the coordinator does not know is
	// refused, so it cannot leave a hanging transaction pinning the LSO.
	before, _ := endOffsets(t, b, "ktx")
	ghost := "ghost"
	var r kmsg.ProduceResponseTopicPartition
	for {
		// (Retried while the coordinator loads the transactional id's shard.)
		r = rawProduce(t, b, "ktx", &ghost, replication.ProducerBatch(987654, 0, 0, true, "hanging"))
		if r.ErrorCode != kerr.CoordinatorLoadInProgress.Code || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.ErrorCode == 0 {
		t.Fatal("a transactional batch outside any transaction was accepted")
	}
	t.Logf("refused with %v", kerr.ErrorForCode(r.ErrorCode))
	if after, lso := endOffsets(t, b, "ktx"); after != before || lso != after {
		t.Fatalf("after the refused batch: log end %d (was %d), LSO %d", after, before, lso)
	}
}

// TestE2EKgoConsumeTransformProduce: a kgo GroupTransactSession commits its consumed
// offsets inside the transaction (TxnOffsetCommit); they become visible when the
// marker this module writes to __consumer_offsets reaches the group coordinator's
// TxnMarkerHook listener.
func TestE2EKgoConsumeTransformProduce(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "ctp-in", 1, nil)
	createTopic(t, b, "ctp-out", 1, nil)
	ctx := testCtx(t)
	src := b.Client(t, kgo.DefaultProduceTopic("ctp-in"))
	for i := range 10 {
		produceSync(t, src, &kgo.Record{Value: []byte{byte('0' + i)}})
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.Addr), kgo.TransactionalID("ctp"),
		kgo.ConsumerGroup("ctp-group"), kgo.ConsumeTopics("ctp-in"), kgo.DefaultProduceTopic("ctp-out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	moved := 0
	for moved < 10 {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("moved %d: %v", moved, err)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := sess.ProduceSync(ctx, &kgo.Record{Value: append([]byte("x"), r.Value...)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			t.Fatalf("end: committed %v, %v", committed, err)
		}
		moved += len(recs)
	}
	// The transactional offset commit is visible once its marker is applied.
	adm := b.Admin(t)
	for {
		offs, err := adm.FetchOffsets(ctx, "ctp-group")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup("ctp-in", 0); ok && o.At == 10 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("committed offsets %v", offs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := consumeN(t, b, "ctp-out", 10, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if string(out[0].Value) != "x0" || string(out[9].Value) != "x9" {
		t.Fatalf("out: %q .. %q", out[0].Value, out[9].Value)
	}
}
