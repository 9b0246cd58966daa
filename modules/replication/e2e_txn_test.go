package replication_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/modules/replication"
)

// rawProduce sends one batch to topic-0 with acks=all over a fresh connection.
func rawProduce(t *testing.T, b *testbroker.Broker, topic string, txnID *string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10_000, txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rawRequest(t, b.Addr, req, 9).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// rawMarker writes a COMMIT or ABORT marker to topic-0 with WriteTxnMarkers.
func rawMarker(t *testing.T, b *testbroker.Broker, topic string, pid int64, epoch int16, commit bool) {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.CoordinatorEpoch, mk.Committed = pid, epoch, 1, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	mk.Topics = append(mk.Topics, mt)
	req.Markers = append(req.Markers, mk)
	resp := rawRequest(t, b.Addr, req, 1).(*kmsg.WriteTxnMarkersResponse)
	if c := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("marker: %v", kerr.ErrorForCode(c))
	}
}

func expectCode(t *testing.T, what string, got kmsg.ProduceResponseTopicPartition, want *kerr.Error) {
	t.Helper()
	if want == nil && got.ErrorCode != 0 || want != nil && got.ErrorCode != want.Code {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got.ErrorCode), want)
	}
}

func endOffsets(t *testing.T, b *testbroker.Broker, topic string) (uncommitted, committed int64) {
	t.Helper()
	adm := b.Admin(t)
	u, err := adm.ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := adm.ListCommittedOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	uo, _ := u.Lookup(topic, 0)
	co, _ := c.Lookup(topic, 0)
	if uo.Err != nil || co.Err != nil {
		t.Fatalf("list offsets: %v %v", uo.Err, co.Err)
	}
	return uo.Offset, co.Offset
}

func TestE2EIdempotentProduce(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "idem", 1, nil)
	expectCode(t, "first", rawProduce(t, b, "idem", nil, replication.ProducerBatch(1000, 0, 0, false, "a", "b")), nil)
	r := rawProduce(t, b, "idem", nil, replication.ProducerBatch(1000, 0, 2, false, "c"))
	expectCode(t, "second", r, nil)
	if r.BaseOffset != 2 {
		t.Fatalf("second at %d", r.BaseOffset)
	}
	r = rawProduce(t, b, "idem", nil, replication.ProducerBatch(1000, 0, 2, false, "c"))
	expectCode(t, "retry", r, nil)
	if r.BaseOffset != 2 {
		t.Fatalf("retry at %d", r.BaseOffset)
	}
	if u, _ := endOffsets(t, b, "idem"); u != 3 {
		t.Fatalf("log end %d after the retry, want 3", u)
	}
	expectCode(t, "gap", rawProduce(t, b, "idem", nil, replication.ProducerBatch(1000, 0, 7, false, "gap")), kerr.OutOfOrderSequenceNumber)
	expectCode(t, "two batches", rawProduce(t, b, "idem", nil, append(replication.ProducerBatch(1000, 0, 3, false, "x"), replication.ProducerBatch(1000, 0, 4, false, "y")...)), kerr.InvalidRecord)
	expectCode(t, "new epoch", rawProduce(t, b, "idem", nil, replication.ProducerBatch(1000, 1, 0, false, "d")), nil)
	expectCode(t, "old epoch", rawProduce(t, b, "idem", nil, replication.ProducerBatch(1000, 0, 3, false, "e")), kerr.InvalidProducerEpoch)
	txn := "tx-idem"
	expectCode(t, "txn open", rawProduce(t, b, "idem", &txn, replication.ProducerBatch(1001, 0, 0, true, "t")), nil)
	expectCode(t, "plain during txn", rawProduce(t, b, "idem", nil, replication.ProducerBatch(1001, 0, 1, false, "p")), kerr.InvalidTxnState)
	got := consumeN(t, b, "idem", 5)
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	if !slices.Equal(vals, []string{"a", "b", "c", "d", "t"}) {
		t.Fatalf("consumed %v", vals)
	}
	// A kgo producer (idempotent when the broker gives producer ids, plain otherwise)
	// keeps working next to them.
	produceSync(t, b.Client(t), &kgo.Record{Topic: "idem", Value: []byte("kgo")})

	// DescribeProducers sees both producers.
	dp, err := b.Admin(t).DescribeProducers(testCtx(t), kadm.TopicsSet{"idem": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ps, ok := dp["idem"].Partitions[0]
	if !ok || ps.Err != nil {
		t.Fatalf("describe producers: %v %v", ok, ps.Err)
	}
	byID := ps.ActiveProducers
	if p := byID[1000]; p.ProducerEpoch != 1 || p.LastSequence != 0 || p.CurrentTxnStartOffset != -1 {
		t.Errorf("producer 1000: %+v", p)
	}
	if p := byID[1001]; p.CurrentTxnStartOffset != 4 {
		t.Errorf("producer 1001: %+v", p)
	}
}

func TestE2EReadCommitted(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "rc", 1, nil)
	txn := "tx-rc"
	const pid, other = 3000, 3001
	// 0-1 aborted, 2 ABORT, 3 plain, 4 committed, 5 COMMIT, 6 open txn of other, 7 plain.
	expectCode(t, "aborted", rawProduce(t, b, "rc", &txn, replication.ProducerBatch(pid, 0, 0, true, "x1", "x2")), nil)
	rawMarker(t, b, "rc", pid, 0, false)
	produceSync(t, b.Client(t), &kgo.Record{Topic: "rc", Value: []byte("plain1")})
	expectCode(t, "committed", rawProduce(t, b, "rc", &txn, replication.ProducerBatch(pid, 0, 2, true, "c1")), nil)
	rawMarker(t, b, "rc", pid, 0, true)
	expectCode(t, "open", rawProduce(t, b, "rc", &txn, replication.ProducerBatch(other, 0, 0, true, "o1")), nil)
	produceSync(t, b.Client(t), &kgo.Record{Topic: "rc", Value: []byte("plain2")})

	if u, c := endOffsets(t, b, "rc"); u != 8 || c != 6 {
		t.Fatalf("end offsets: read_uncommitted %d, read_committed %d; want 8 and the LSO 6", u, c)
	}
	// Raw read_committed fetch: stops at the LSO, lists the aborted transaction.
	fr := fetchFromStart("rc", [16]byte{})
	fr.IsolationLevel, fr.ReplicaID = 1, -1
	out := rawRequest(t, b.Addr, fr, 11).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if out.ErrorCode != 0 || out.LastStableOffset != 6 || out.HighWatermark != 8 {
		t.Fatalf("fetch: %v lso %d hw %d", kerr.ErrorForCode(out.ErrorCode), out.LastStableOffset, out.HighWatermark)
	}
	if len(out.AbortedTransactions) != 1 || out.AbortedTransactions[0].ProducerID != pid || out.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted %+v", out.AbortedTransactions)
	}
	var last int64 = -1
	if err := recordbatch.Split(out.RecordBatches, func(h recordbatch.Header, _ []byte) error { last = h.LastOffset(); return nil }); err != nil {
		t.Fatal(err)
	}
	if last != 5 {
		t.Fatalf("read_committed fetch ended at %d, want 5 (before the open transaction)", last)
	}
	fr.IsolationLevel = 0
	out = rawRequest(t, b.Addr, fr, 11).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if out.LastStableOffset != 6 || out.AbortedTransactions != nil {
		t.Fatalf("read_uncommitted: lso %d aborted %v", out.LastStableOffset, out.AbortedTransactions)
	}

	// A kgo read_committed consumer skips the aborted records and stops at the open
	// transaction until it commits.
	cl := b.Client(t, kgo.ConsumeTopics("rc"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testCtx(t)
	vals := valuesOf(pollN(t, ctx, cl, 2))
	if !slices.Equal(vals, []string{"plain1", "c1"}) {
		t.Fatalf("read_committed before the commit: %v", vals)
	}
	// Nothing more while the transaction is open.
	pollCtx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	fs := cl.PollFetches(pollCtx)
	cancel()
	if n := len(fs.Records()); n != 0 {
		t.Fatalf("read %d records past the open transaction", n)
	}
	rawMarker(t, b, "rc", other, 0, true)
	for len(vals) < 4 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %v: %v", vals, err)
		}
		for _, r := range fs.Records() {
			vals = append(vals, string(r.Value))
		}
	}
	if !slices.Equal(vals, []string{"plain1", "c1", "o1", "plain2"}) {
		t.Fatalf("read_committed after the commit: %v", vals)
	}
	if u, c := endOffsets(t, b, "rc"); u != 9 || c != 9 {
		t.Fatalf("end offsets after the commit: %d %d", u, c)
	}
	// read_uncommitted sees the aborted records too.
	all := consumeN(t, b, "rc", 6)
	if string(all[0].Value) != "x1" {
		t.Fatalf("read_uncommitted starts with %q", all[0].Value)
	}
}
