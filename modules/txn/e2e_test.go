package txn_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kafkahash"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// e2eConfig keeps the internal topics small so brokers start and load quickly.
const e2eConfig = `
configs:
  group.initial.rebalance.delay.ms: "0"
  offsets.topic.num.partitions: "4"
  transaction.state.log.num.partitions: "4"
modules:
  txn: {use: coordinator, sweep_interval_ms: 50}
`

const txnPartitions = 4

func startBroker(t testing.TB, opts ...testbroker.Option) *testbroker.Broker {
	t.Helper()
	return testbroker.Start(t, append([]testbroker.Option{testbroker.WithConfig(e2eConfig)}, opts...)...)
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t testing.TB, b *testbroker.Broker, topic string, partitions int32) {
	t.Helper()
	resp, err := b.Admin(t).CreateTopic(ctxT(t, 20*time.Second), partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// readAll reads topic from the start with the isolation level until it has seen a
// record with key "end" in every partition (written by writeEnds after the records
// under test), returning the values before it.
func readAll(t testing.TB, b *testbroker.Broker, topic string, partitions int, level kgo.IsolationLevel) []string {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(100*time.Millisecond))
	var vals []string
	ends := map[int32]bool{}
	for len(ends) < partitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: only %d of %d end markers seen; values so far %v", topic, len(ends), partitions, vals)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("read %s: %v", topic, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == "end" {
				ends[r.Partition] = true
				return
			}
			vals = append(vals, string(r.Value))
		})
	}
	slices.Sort(vals)
	return vals
}

func writeEnds(t testing.TB, b *testbroker.Broker, topic string, partitions int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range partitions {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte("end")})
	}
	if err := cl.ProduceSync(ctxT(t, 20*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce ends: %v", err)
	}
}

func txnClient(t testing.TB, b *testbroker.Broker, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return b.Client(t, append([]kgo.Opt{
		kgo.TransactionalID(id),
		kgo.DefaultProduceTopic("out"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
	}, opts...)...)
}

// produceTxn begins a transaction and produces values (value i to partition i%2).
func produceTxn(t testing.TB, cl *kgo.Client, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	var recs []*kgo.Record
	for i, v := range values {
		recs = append(recs, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctxT(t, 20*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// beginTxn returns a transactional client of b with id (and opts) that has begun a
// transaction and produced values in it, round-robin over partitions 0 and 1.
func beginTxn(t testing.TB, b *testbroker.Broker, id string, values []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := txnClient(t, b, id, opts...)
	produceTxn(t, cl, values...)
	return cl
}

// endTxn ends cl's transaction (kgo.TryCommit or kgo.TryAbort), failing the test with
// what on an error.
func endTxn(t testing.TB, cl *kgo.Client, how kgo.TransactionEndTry, what string) {
	t.Helper()
	if err := cl.EndTransaction(ctxT(t, 20*time.Second), how); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func describeTxn(t testing.TB, b *testbroker.Broker, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := b.Admin(t).DescribeTransactions(ctxT(t, 10*time.Second), id)
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	d, ok := ds[id]
	if !ok {
		t.Fatalf("describe %s: missing", id)
	}
	return d
}

func waitTxnState(t testing.TB, b *testbroker.Broker, id, state string) kadm.DescribedTransaction {
	t.Helper()
	var d kadm.DescribedTransaction
	testbroker.WaitFor(t, 20*time.Second, id+" in "+state, func() string {
		ds, err := b.Admin(t).DescribeTransactions(ctxT(t, 10*time.Second), id)
		if err != nil {
			return err.Error()
		}
		d = ds[id]
		if d.Err != nil {
			return d.Err.Error()
		}
		if d.State != state {
			return d.State
		}
		return ""
	})
	return d
}

func TestE2EIdempotentProducer(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "idem", 1)
	cl := b.Client(t, kgo.DefaultProduceTopic("idem")) // idempotent by default
	var recs []*kgo.Record
	for i := range 50 {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	res := cl.ProduceSync(ctxT(t, 20*time.Second), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if pid := res[0].Record.ProducerID; pid < 0 {
		t.Fatalf("records produced without a producer id (%d): InitProducerId did not run", pid)
	}
	// A second client gets another id.
	cl2 := b.Client(t, kgo.DefaultProduceTopic("idem"))
	res2 := cl2.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: []byte("x")})
	if err := res2.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if res2[0].Record.ProducerID == res[0].Record.ProducerID {
		t.Fatalf("two producers share id %d", res[0].Record.ProducerID)
	}
}

func TestE2ECommitAndAbort(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "out", 2)
	cl := beginTxn(t, b, "tx-1", []string{"c1", "c2", "c3"})
	endTxn(t, cl, kgo.TryCommit, "commit")
	produceTxn(t, cl, "a1", "a2")
	endTxn(t, cl, kgo.TryAbort, "abort")
	produceTxn(t, cl, "c4")
	endTxn(t, cl, kgo.TryCommit, "commit 2")
	// kgo uses transaction version 2 (finalized on a new cluster): every EndTxn
	// bumped the epoch.
	d := waitTxnState(t, b, "tx-1", "CompleteCommit")
	if d.ProducerID < 0 || d.ProducerEpoch != 3 {
		t.Fatalf("described %+v, want epoch 3 after three transactions", d)
	}
	writeEnds(t, b, "out", 2)
	if got, want := readAll(t, b, "out", 2, kgo.ReadCommitted()), []string{"c1", "c2", "c3", "c4"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
	if got, want := readAll(t, b, "out", 2, kgo.ReadUncommitted()), []string{"a1", "a2", "c1", "c2", "c3", "c4"}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted: %v, want %v", got, want)
	}
}

func TestE2EZombieFencing(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "out", 2)
	old := beginTxn(t, b, "tx-z", []string{"zombie"})
	// A new instance with the same id: its init aborts the old transaction.
	fresh := beginTxn(t, b, "tx-z", []string{"fresh"})
	endTxn(t, fresh, kgo.TryCommit, "new instance commit")
	err := old.EndTransaction(ctxT(t, 20*time.Second), kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie commit: %v, want fenced", err)
	}
	writeEnds(t, b, "out", 2)
	if got := readAll(t, b, "out", 2, kgo.ReadCommitted()); !slices.Equal(got, []string{"fresh"}) {
		t.Fatalf("read_committed: %v", got)
	}
}

func TestE2ETransactionTimeout(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "out", 2)
	cl := beginTxn(t, b, "tx-slow", []string{"stalled"}, kgo.TransactionTimeout(time.Second))
	// The producer stalls; the coordinator aborts its transaction after 1s.
	start := time.Now()
	d := waitTxnState(t, b, "tx-slow", "CompleteAbort")
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("aborted after %v", el)
	}
	if d.ProducerEpoch != 1 {
		t.Fatalf("timeout abort did not bump the epoch: %+v", d)
	}
	writeEnds(t, b, "out", 2)
	if got := readAll(t, b, "out", 2, kgo.ReadCommitted()); len(got) != 0 {
		t.Fatalf("read_committed sees the aborted transaction: %v", got)
	}
	err := cl.EndTransaction(ctxT(t, 20*time.Second), kgo.TryCommit)
	if err == nil {
		t.Fatal("the timed-out producer committed")
	}
}

// TestE2ERecoverPrepareCommit leaves a transaction in PrepareCommit in
// __transaction_state (as a coordinator that crashed right after answering EndTxn
// would), restarts the broker, and checks that the new coordinator writes the markers
// and completes the commit.
func TestE2ERecoverPrepareCommit(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "out", 2)
	const id = "tx-crash"
	cl := beginTxn(t, b, id, []string{"r1", "r2"}, kgo.TransactionTimeout(time.Minute))
	d := waitTxnState(t, b, id, "Ongoing")
	cl.Close()

	// What the coordinator would have written on EndTxn(commit).
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = d.ProducerID, d.ProducerEpoch, int32(time.Minute/time.Millisecond)
	v.State = 2 // PrepareCommit
	now := time.Now().UnixMilli()
	v.LastUpdateTimestamp, v.StartTimestamp = now, d.StartTimestamp
	topic := kmsg.NewTxnMetadataValueTopic()
	topic.Topic = "out"
	for p := range d.Topics["out"] {
		topic.Partitions = append(topic.Partitions, p)
	}
	slices.Sort(topic.Partitions)
	v.Topics = []kmsg.TxnMetadataValueTopic{topic}
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = id
	adm := b.Client(t, kgo.ClientID("__admin_client"), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rec := &kgo.Record{Topic: "__transaction_state", Partition: kafkahash.Partition(id, txnPartitions), Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
	if err := adm.ProduceSync(ctxT(t, 20*time.Second), rec).FirstErr(); err != nil {
		t.Fatalf("write PrepareCommit: %v", err)
	}
	adm.Close()

	b.Restart(t)
	waitTxnState(t, b, id, "CompleteCommit")
	writeEnds(t, b, "out", 2)
	if got := readAll(t, b, "out", 2, kgo.ReadCommitted()); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("read_committed after recovery: %v", got)
	}
	// The id carries on with a bumped epoch.
	cl2 := beginTxn(t, b, id, []string{"r3"})
	endTxn(t, cl2, kgo.TryCommit, "commit after recovery")
}

// TestE2EStateSurvivesRestart: an id's producer id and epoch come back after a
// restart (the log is replayed), so its next InitProducerId bumps the epoch.
func TestE2EStateSurvivesRestart(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "out", 2)
	cl := beginTxn(t, b, "tx-r", []string{"x"})
	endTxn(t, cl, kgo.TryCommit, "commit")
	before := waitTxnState(t, b, "tx-r", "CompleteCommit")
	cl.Close()
	b.Restart(t)
	after := waitTxnState(t, b, "tx-r", "CompleteCommit")
	if after.ProducerID != before.ProducerID || after.ProducerEpoch != before.ProducerEpoch {
		t.Fatalf("after restart %+v, before %+v", after, before)
	}
	beginTxn(t, b, "tx-r", []string{"y"}) // a new instance: its init bumps the epoch
	if d := describeTxn(t, b, "tx-r"); d.ProducerEpoch != before.ProducerEpoch+1 || d.ProducerID != before.ProducerID {
		t.Fatalf("new instance %+v", d)
	}
	// A fresh idempotent producer never reuses an id from before the restart.
	res := b.Client(t, kgo.DefaultProduceTopic("out")).ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: []byte("i")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if res[0].Record.ProducerID == before.ProducerID {
		t.Fatalf("producer id %d reused after restart", before.ProducerID)
	}
}

func TestE2EDescribeAndListTransactions(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "out", 2)
	beginTxn(t, b, "tx-open", []string{"o"}) // left open
	done := beginTxn(t, b, "tx-done", []string{"d"})
	endTxn(t, done, kgo.TryCommit, "commit")
	waitTxnState(t, b, "tx-done", "CompleteCommit")
	d := describeTxn(t, b, "tx-open")
	if d.State != "Ongoing" || d.TimeoutMillis <= 0 || d.StartTimestamp <= 0 {
		t.Fatalf("describe open: %+v", d)
	}
	if _, ok := d.Topics["out"][0]; len(d.Topics) != 1 || len(d.Topics["out"]) != 1 || !ok {
		t.Fatalf("describe open partitions: %+v", d.Topics)
	}
	adm := b.Admin(t)
	ls, err := adm.ListTransactions(ctxT(t, 10*time.Second), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range ls.Sorted() {
		got[l.TxnID] = l.State
	}
	if got["tx-open"] != "Ongoing" || got["tx-done"] != "CompleteCommit" {
		t.Fatalf("list: %v", got)
	}
	ls, err = adm.ListTransactions(ctxT(t, 10*time.Second), nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	if ids := ls.TransactionalIDs(); !slices.Equal(ids, []string{"tx-open"}) {
		t.Fatalf("list Ongoing: %v", ids)
	}
	ds, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "nope")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ds["nope"].Err, kerr.TransactionalIDNotFound) {
		t.Fatalf("unknown id: %+v", ds["nope"])
	}
}

// TestE2EVerifyOnly sends the broker-to-broker form of AddPartitionsToTxn (v4+,
// VerifyOnly) over the wire for a transaction a kgo producer has open.
func TestE2EVerifyOnly(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "out", 2)
	cl := beginTxn(t, b, "tx-v", []string{"v"}) // partition 0
	d := describeTxn(t, b, "tx-v")
	raw := b.Client(t)
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "tx-v", d.ProducerID, d.ProducerEpoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "out", []int32{0, 1}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), raw)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 4 || resp.ErrorCode != 0 || len(resp.Transactions) != 1 {
		t.Fatalf("response v%d: %+v", resp.Version, resp)
	}
	codes := map[int32]int16{}
	for _, p := range resp.Transactions[0].Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	if codes[0] != 0 || codes[1] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify: %v", codes)
	}
	endTxn(t, cl, kgo.TryCommit, "commit")
}
