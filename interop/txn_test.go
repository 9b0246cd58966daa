package interop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnClient returns a franz-go transactional producer (manual partitioning), closed in
// t.Cleanup.
func txnClient(t *testing.T, addr, txnID string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, addr, append([]kgo.Opt{
		kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30 * time.Second),
	}, opts...)...)
}

// runTxn begins a transaction, produces recs and waits for their acknowledgements, then
// commits or aborts.
func runTxn(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, commit bool) error {
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("produce: %w", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		return fmt.Errorf("end (commit %v): %w", commit, err)
	}
	return nil
}

// runTxns runs txns transactions on cl, the tx-th writing recs(tx) and committing when
// commit(tx) (called in that order), and adds each to the ledger once it has ended. It
// stops at the first error.
func (l *txnLedger) runTxns(ctx context.Context, cl *kgo.Client, txns int, recs func(tx int) []*kgo.Record, commit func(tx int) bool) error {
	for tx := range txns {
		rs := recs(tx)
		c := commit(tx)
		if err := runTxn(ctx, cl, rs, c); err != nil {
			return fmt.Errorf("transaction %d: %w", tx, err)
		}
		l.add(rs, c)
	}
	return nil
}

// runConcurrently runs every fn in a goroutine of its own, waits for all of them and
// reports each error one returns with t.Error.
func runConcurrently(t *testing.T, fns ...func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(fns))
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// txnLedger is what producers wrote: values per producer (the value's prefix up to the
// first '-') and partition, in production order, all of them and the committed ones.
type txnLedger struct {
	mu        sync.Mutex
	all       map[string]map[int32][]string
	committed map[string]map[int32][]string
}

func newTxnLedger() *txnLedger {
	return &txnLedger{all: map[string]map[int32][]string{}, committed: map[string]map[int32][]string{}}
}

func (l *txnLedger) add(recs []*kgo.Record, committed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		v := string(r.Value)
		appendValue(l.all, producerOf(v), r.Partition, v)
		if committed {
			appendValue(l.committed, producerOf(v), r.Partition, v)
		}
	}
}

func appendValue(m map[string]map[int32][]string, prod string, p int32, v string) {
	if m[prod] == nil {
		m[prod] = map[int32][]string{}
	}
	m[prod][p] = append(m[prod][p], v)
}

func producerOf(v string) string {
	if i := strings.IndexByte(v, '-'); i > 0 {
		return v[:i]
	}
	return v
}

// byProducer splits what a consumer read per partition by producer.
func byProducer(got map[int32][]*kgo.Record) map[string]map[int32][]string {
	out := map[string]map[int32][]string{}
	for p, rs := range got {
		for _, r := range rs {
			appendValue(out, producerOf(string(r.Value)), p, string(r.Value))
		}
	}
	return out
}

// verify appends a sentinel to every partition, then reads the topic up to them at both
// isolation levels: read_committed must see exactly the committed transactions and
// read_uncommitted every one.
func (l *txnLedger) verify(t *testing.T, addr, topic string, partitions int) {
	t.Helper()
	writeSentinels(t, addr, topic, partitions)
	checkLedger(t, "read_committed", readToSentinels(t, addr, topic, partitions, kgo.ReadCommitted(), 60*time.Second), l.committed)
	checkLedger(t, "read_uncommitted", readToSentinels(t, addr, topic, partitions, kgo.ReadUncommitted(), 60*time.Second), l.all)
}

// checkLedger compares what a consumer read with the ledger: for every producer and
// partition, the same values in the same order.
func checkLedger(t *testing.T, what string, got map[int32][]*kgo.Record, want map[string]map[int32][]string) {
	t.Helper()
	g := byProducer(got)
	prods := map[string]bool{}
	for p := range g {
		prods[p] = true
	}
	for p := range want {
		prods[p] = true
	}
	for prod := range prods {
		checkSamePartitionValues(t, fmt.Sprintf("%s, producer %s", what, prod), g[prod], want[prod])
	}
}

// TestTxnAbortedInvisible: franz-go transactional producers commit some transactions and
// abort others, interleaved on three shared partitions with each other and with a plain
// idempotent producer. First, a transaction left open pins the last stable offset
// (ListOffsets read_committed) at its first record even after later plain records, and
// commit releases it. Afterwards the last stable offsets reach the high watermarks; a
// read_committed consumer reads exactly the committed and plain records (per producer
// and partition, in order), a read_uncommitted one reads the aborted ones too.
func TestTxnAbortedInvisible(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		topic      = "txn-aborts"
		partitions = 3
	)
	createTopic(t, b.addr, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ledger := newTxnLedger()
	plain := newClient(t, b.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(plain)

	// An open transaction pins the last stable offset.
	open := txnClient(t, b.addr, "txn-aborts-open")
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	openRec := &kgo.Record{Topic: topic, Partition: 0, Value: []byte("O-0")}
	if err := open.ProduceSync(ctx, openRec).FirstErr(); err != nil {
		t.Fatalf("produce in an open transaction: %v", err)
	}
	after := []*kgo.Record{{Topic: topic, Partition: 0, Value: []byte("C-open-0")}, {Topic: topic, Partition: 0, Value: []byte("C-open-1")}}
	if err := plain.ProduceSync(ctx, after...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lso, hw, err := stableAndEnd(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if lso[0] != openRec.Offset || hw[0] != openRec.Offset+3 {
		t.Errorf("with a transaction open at offset %d and 2 plain records after it: last stable offset %d, high watermark %d; want %d and %d",
			openRec.Offset, lso[0], hw[0], openRec.Offset, openRec.Offset+3)
	}
	if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	ledger.add([]*kgo.Record{openRec}, true)
	ledger.add(after, true)
	waitStable(t, b.addr, topic, 30*time.Second)

	// Two transactional producers and a plain one, concurrently.
	txnProducer := func(cl *kgo.Client, name string, txns, perTxn int, commit func(int) bool) func() error {
		return func() error {
			err := ledger.runTxns(ctx, cl, txns, func(tx int) []*kgo.Record {
				var recs []*kgo.Record
				for i := range perTxn {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: int32((tx + i) % partitions),
						Value: []byte(fmt.Sprintf("%s-t%02d-r%02d", name, tx, i))})
				}
				return recs
			}, commit)
			if err != nil {
				return fmt.Errorf("producer %s %w", name, err)
			}
			return nil
		}
	}
	clA, clB := txnClient(t, b.addr, "txn-aborts-A"), txnClient(t, b.addr, "txn-aborts-B")
	runConcurrently(t,
		txnProducer(clA, "A", 12, 10, func(tx int) bool { return tx%2 == 0 }),
		txnProducer(clB, "B", 12, 7, func(tx int) bool { return tx%3 != 0 }),
		func() error {
			for chunk := range 20 {
				var recs []*kgo.Record
				for i := range 10 {
					n := chunk*10 + i
					recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(n % partitions), Value: []byte(fmt.Sprintf("C-%03d", n))})
				}
				if err := plain.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					return fmt.Errorf("plain producer: %w", err)
				}
				ledger.add(recs, true)
			}
			return nil
		})
	if t.Failed() {
		return
	}

	waitStable(t, b.addr, topic, 30*time.Second)
	ledger.verify(t, b.addr, topic, partitions)
}

// TestTxnZombieFenced: two franz-go producers with the same transactional id. The first
// begins a transaction and writes to two partitions; the second initialises (which must
// abort the first one's transaction and fence its epoch), writes and commits. The
// first's later produce and its commit fail with PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH; read_committed sees only the second producer's records, and
// even read_uncommitted sees none of the first one's records written after the fencing.
func TestTxnZombieFenced(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		topic      = "txn-zombie"
		partitions = 2
		txnID      = "txn-zombie-id"
	)
	createTopic(t, b.addr, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs := func(prefix string, n int) []*kgo.Record {
		var out []*kgo.Record
		for i := range n {
			out = append(out, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		return out
	}

	zombie := txnClient(t, b.addr, txnID, kgo.RecordRetries(3), kgo.RetryTimeout(10*time.Second))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	early := recs("Z1early", 6)
	if err := zombie.ProduceSync(ctx, early...).FirstErr(); err != nil {
		t.Fatalf("first producer, before the second one exists: %v", err)
	}
	zpid, zepoch, _ := zombie.ProducerID(ctx)

	second := txnClient(t, b.addr, txnID)
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	mine := recs("Z2", 4)
	if err := second.ProduceSync(ctx, mine...).FirstErr(); err != nil {
		t.Fatalf("second producer: %v", err)
	}
	spid, sepoch, _ := second.ProducerID(ctx)
	t.Logf("first producer: id %d epoch %d; second: id %d epoch %d", zpid, zepoch, spid, sepoch)
	if spid == zpid && sepoch <= zepoch {
		t.Errorf("second producer got id %d epoch %d, not past the first one's epoch %d", spid, sepoch, zepoch)
	}

	late := recs("Z1late", 6)
	err := zombie.ProduceSync(ctx, late...).FirstErr()
	if !isFenced(err) {
		t.Errorf("first producer after the second one initialised: produce error %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	err = zombie.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Errorf("first producer: committing after being fenced succeeded")
	} else {
		t.Logf("first producer: commit after fencing: %v", err)
	}

	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("second producer: commit: %v", err)
	}
	waitStable(t, b.addr, topic, 30*time.Second)
	writeSentinels(t, b.addr, topic, partitions)

	committed := readToSentinels(t, b.addr, topic, partitions, kgo.ReadCommitted(), 60*time.Second)
	want := map[int32][]string{}
	for _, r := range mine {
		want[r.Partition] = append(want[r.Partition], string(r.Value))
	}
	checkSamePartitionValues(t, "read_committed", valuesPerPartition(committed), want)
	for p, rs := range readToSentinels(t, b.addr, topic, partitions, kgo.ReadUncommitted(), 60*time.Second) {
		for _, r := range rs {
			if strings.HasPrefix(string(r.Value), "Z1late") {
				t.Errorf("read_uncommitted: partition %d offset %d holds %q, written by the fenced producer", p, r.Offset, r.Value)
			}
		}
	}
}

// TestTxnTimeoutAborts: a franz-go producer with transaction.timeout.ms 4s begins a
// transaction, writes 5 records between plain records and stalls. While it is open the
// last stable offset stays at its first record; after the timeout the coordinator
// aborts it, so the last stable offset reaches the high watermark (within 60s: Kafka
// looks for expired transactions every 10s), a late commit from the stalled producer
// fails, and read_committed sees only the plain records while read_uncommitted sees all.
func TestTxnTimeoutAborts(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		topic   = "txn-timeout"
		timeout = 4 * time.Second
	)
	createTopic(t, b.addr, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	plain := newClient(t, b.addr)
	adm := kadm.NewClient(plain)
	seq := func(prefix string, n int) []*kgo.Record {
		var out []*kgo.Record
		for i := range n {
			out = append(out, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		return out
	}
	before, slowRecs, after := seq("before", 5), seq("slow", 5), seq("after", 5)
	if err := plain.ProduceSync(ctx, before...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	slow := txnClient(t, b.addr, "txn-timeout-id", kgo.TransactionTimeout(timeout))
	if err := slow.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := slow.ProduceSync(ctx, slowRecs...).FirstErr(); err != nil {
		t.Fatalf("produce in the transaction: %v", err)
	}
	opened := time.Now()
	if err := plain.ProduceSync(ctx, after...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lso, hw, err := stableAndEnd(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(opened) < timeout {
		if lso[0] != 5 || hw[0] != 15 {
			t.Errorf("with the transaction open: last stable offset %d, high watermark %d; want 5 and 15", lso[0], hw[0])
		}
	} else {
		t.Logf("the machine is slow: %s passed before the check, the transaction may have timed out already", time.Since(opened))
	}

	waitStable(t, b.addr, topic, 60*time.Second)
	t.Logf("the last stable offset reached the high watermark %s after the transaction's records were written", time.Since(opened).Round(time.Millisecond))
	if err := slow.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Errorf("committing the transaction after the coordinator aborted it succeeded")
	} else {
		t.Logf("late commit: %v", err)
	}

	waitStable(t, b.addr, topic, 30*time.Second)
	writeSentinels(t, b.addr, topic, 1)
	var want, wantAll []string
	for _, r := range before {
		want = append(want, string(r.Value))
	}
	wantAll = append(wantAll, want...)
	for _, r := range slowRecs {
		wantAll = append(wantAll, string(r.Value))
	}
	for _, r := range after {
		want = append(want, string(r.Value))
		wantAll = append(wantAll, string(r.Value))
	}
	checkSamePartitionValues(t, "read_committed", valuesPerPartition(readToSentinels(t, b.addr, topic, 1, kgo.ReadCommitted(), 60*time.Second)),
		map[int32][]string{0: want})
	checkSamePartitionValues(t, "read_uncommitted", valuesPerPartition(readToSentinels(t, b.addr, topic, 1, kgo.ReadUncommitted(), 60*time.Second)),
		map[int32][]string{0: wantAll})
}

// TestTxnConcurrentProducers: 8 franz-go transactional producers run 25 transactions each
// at the same time, each transaction writing 1-15 records to random partitions of 4
// shared ones and then committing or aborting at random (seed in the log). Nothing may
// fail or hang; afterwards the last stable offsets reach the high watermarks, and
// read_committed sees exactly the committed records (per producer and partition, in
// order), read_uncommitted all of them.
func TestTxnConcurrentProducers(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		topic      = "txn-concurrent"
		partitions = 4
		producers  = 8
		txns       = 25
	)
	createTopic(t, b.addr, topic, partitions)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ledger := newTxnLedger()
	var fns []func() error
	start := time.Now()
	for p := range producers {
		rng := rand.New(rand.NewPCG(seed, uint64(p)))
		cl := txnClient(t, b.addr, fmt.Sprintf("txn-concurrent-%d", p))
		fns = append(fns, func() error {
			err := ledger.runTxns(ctx, cl, txns, func(tx int) []*kgo.Record {
				var recs []*kgo.Record
				for i := range 1 + rng.IntN(15) {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(rng.IntN(partitions)),
						Value: []byte(fmt.Sprintf("P%d-t%02d-r%02d", p, tx, i))})
				}
				return recs
			}, func(int) bool { return rng.IntN(10) < 6 })
			if err != nil {
				return fmt.Errorf("producer %d %w", p, err)
			}
			return nil
		})
	}
	runConcurrently(t, fns...)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("the producers did not finish within 90s")
	}
	if t.Failed() {
		return
	}
	t.Logf("%d producers x %d transactions in %s", producers, txns, time.Since(start).Round(time.Millisecond))
	waitStable(t, b.addr, topic, 30*time.Second)
	ledger.verify(t, b.addr, topic, partitions)
}

// TestTxnAdminViews checks the inspection APIs through kadm while a franz-go transaction
// is open and after it commits: DescribeTransactions (state Ongoing with the producer id,
// epoch, timeout and partition; CompleteCommit with no partitions afterwards),
// ListTransactions (with and without a state filter) and DescribeProducers (the open
// transaction's first offset, then -1).
func TestTxnAdminViews(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		topic = "txn-admin"
		txnID = "txn-admin-id"
	)
	createTopic(t, b.addr, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	plain := newClient(t, b.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(plain)
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cl := txnClient(t, b.addr, txnID)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: topic, Partition: 1, Value: []byte("in-txn")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	describe := func() kadm.DescribedTransaction {
		t.Helper()
		ds, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			t.Fatalf("DescribeTransactions: %v", err)
		}
		d, ok := ds[txnID]
		if !ok || d.Err != nil {
			t.Fatalf("DescribeTransactions %q: found %v, error %v", txnID, ok, d.Err)
		}
		return d
	}
	d := describe()
	if d.State != "Ongoing" || d.ProducerID != pid || d.ProducerEpoch != epoch || d.TimeoutMillis != 30000 ||
		!d.Topics.Lookup(topic, 1) || d.Topics.Lookup(topic, 0) {
		t.Errorf("open transaction described as %+v; want state Ongoing, producer %d epoch %d, timeout 30000, partitions {%s: [1]}",
			d, pid, epoch, topic)
	}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatalf("ListTransactions: %v", err)
	}
	if l, ok := listed[txnID]; !ok || l.State != "Ongoing" || l.ProducerID != pid {
		t.Errorf("ListTransactions: %q is %+v (listed: %v), want Ongoing with producer %d", txnID, l, ok, pid)
	}
	if listed, err := adm.ListTransactions(ctx, nil, []string{"CompleteCommit"}); err != nil {
		t.Fatalf("ListTransactions(CompleteCommit): %v", err)
	} else if _, ok := listed[txnID]; ok {
		t.Errorf("ListTransactions filtered on CompleteCommit lists the open transaction %q", txnID)
	}

	producerOn := func(p int32) (kadm.DescribedProducer, bool) {
		t.Helper()
		dps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {p: {}}})
		if err != nil {
			t.Fatalf("DescribeProducers: %v", err)
		}
		dp, ok := dps[topic].Partitions[p]
		if !ok || dp.Err != nil {
			t.Fatalf("DescribeProducers %s/%d: found %v, error %v", topic, p, ok, dp.Err)
		}
		prod, ok := dp.ActiveProducers[pid]
		return prod, ok
	}
	if prod, ok := producerOn(1); !ok || prod.ProducerEpoch != epoch || prod.CurrentTxnStartOffset != rec.Offset || prod.LastSequence != 0 {
		t.Errorf("DescribeProducers %s/1 with the transaction open: producer %d is %+v (found: %v); want epoch %d, transaction start offset %d, last sequence 0",
			topic, pid, prod, ok, epoch, rec.Offset)
	}

	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The coordinator completes the commit after EndTxn answers (markers, then
	// CompleteCommit).
	if !pollUntil(30*time.Second, func() bool { return describe().State == "CompleteCommit" }) {
		t.Errorf("after the commit the transaction is described as %+v, want state CompleteCommit", describe())
	}
	if d := describe(); len(d.Topics) != 0 {
		t.Errorf("a completed transaction still lists partitions: %v", d.Topics)
	}
	if prod, ok := producerOn(1); !ok || prod.CurrentTxnStartOffset != -1 {
		t.Errorf("DescribeProducers %s/1 after the commit: producer %d is %+v (found: %v); want transaction start offset -1",
			topic, pid, prod, ok)
	}
}

// TestTxnSurvivesBrokerKill: transaction state must survive a broker SIGKILL at each
// step of the two-phase commit. A franz-go producer writes in a transaction, the broker
// is SIGKILLed and restarted, the coordinator still describes the transaction as Ongoing
// with its partitions, and the commit then succeeds. A second transaction is aborted and
// a third committed, each with the broker SIGKILLed right after EndTxn answers: after
// the restart the coordinator finishes writing the markers (the last stable offsets
// reach the high watermarks), and read_committed sees exactly the first and third
// transactions' records, read_uncommitted all three.
func TestTxnSurvivesBrokerKill(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		topic      = "txn-kill"
		partitions = 2
	)
	createTopic(t, b.addr, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ledger := newTxnLedger()
	recs := func(prefix string) []*kgo.Record {
		var out []*kgo.Record
		for i := range 6 {
			out = append(out, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		return out
	}

	// Killed while the transaction is open.
	a := txnClient(t, b.addr, "txn-kill-a")
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	aRecs := recs("A")
	if err := a.ProduceSync(ctx, aRecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.kill()
	b.start()
	adm := kadm.NewClient(newClient(t, b.addr))
	ds, err := adm.DescribeTransactions(ctx, "txn-kill-a")
	if err != nil {
		t.Fatalf("DescribeTransactions after the restart: %v", err)
	}
	if d := ds["txn-kill-a"]; d.Err != nil || d.State != "Ongoing" || !d.Topics.Lookup(topic, 0) || !d.Topics.Lookup(topic, 1) {
		t.Errorf("after the restart the open transaction is described as %+v; want Ongoing with %s partitions 0 and 1", d, topic)
	}
	if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the restart: %v", err)
	}
	ledger.add(aRecs, true)

	// Killed right after EndTxn answers: the markers may not be written yet.
	for _, step := range []struct {
		name   string
		commit bool
	}{{"B", false}, {"C", true}} {
		cl := txnClient(t, b.addr, "txn-kill-"+step.name)
		rs := recs(step.name)
		if err := runTxn(ctx, cl, rs, step.commit); err != nil {
			t.Fatalf("transaction %s: %v", step.name, err)
		}
		b.kill()
		ledger.add(rs, step.commit)
		b.start()
		waitStable(t, b.addr, topic, 60*time.Second)
	}

	ledger.verify(t, b.addr, topic, partitions)
}
