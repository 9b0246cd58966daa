package replication

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/kernel"
)

// pidBatch builds one batch of an idempotent (or transactional) producer.
func pidBatch(pid int64, epoch int16, seq int32, txn bool, values ...string) []byte {
	recs := make([]recordbatch.Record, len(values))
	for i, v := range values {
		recs[i] = recordbatch.Record{Value: []byte(v)}
	}
	return recordbatch.Build(recordbatch.Options{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		Transactional: txn, BaseTimestamp: time.Now().UnixMilli()}, recs...)
}

// produceTxn produces records at v9 with acks=all and a transactional id (nil: none).
func (h *harness) produceTxn(txnID *string, topic string, part int32, records []byte) kmsg.ProduceResponseTopicPartition {
	h.t.Helper()
	r := produceReq(-1, topic, 1, part, records)
	r.TransactionID = txnID
	resp, err := h.do(context.Background(), 9, r)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func (h *harness) part(topic string, p int32) *Partition {
	h.t.Helper()
	pt := h.m.partition(kernel.TopicPartition{Topic: topic, Partition: p})
	if pt == nil {
		h.t.Fatalf("no partition %s-%d", topic, p)
	}
	return pt
}

func TestSeqRangeWraps(t *testing.T) {
	for _, tc := range []struct {
		base, delta, last int32
	}{
		{0, 0, 0},
		{0, 4, 4},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1},
	} {
		h := recordbatch.Header{BaseSequence: tc.base, LastOffsetDelta: tc.delta, ProducerID: 3, ProducerEpoch: 2}
		if r := seqRange(&h); r.First != tc.base || r.Last != tc.last || r.ProducerID != 3 || r.Epoch != 2 {
			t.Errorf("seqRange(%d, %d) = %+v, want last %d", tc.base, tc.delta, r, tc.last)
		}
	}
}

func TestIdempotentProduce(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	p := h.part("t", 0)

	r := h.produceTxn(nil, "t", 0, pidBatch(7, 0, 0, false, "a", "b", "c"))
	testcheck.WantCode(t, "first batch", r.ErrorCode, nil)
	if r.BaseOffset != 0 {
		t.Fatalf("first batch at %d", r.BaseOffset)
	}
	r = h.produceTxn(nil, "t", 0, pidBatch(7, 0, 3, false, "d", "e"))
	testcheck.WantCode(t, "second batch", r.ErrorCode, nil)
	if r.BaseOffset != 3 {
		t.Fatalf("second batch at %d", r.BaseOffset)
	}
	// A retry of the second batch: the original offsets, nothing appended.
	r = h.produceTxn(nil, "t", 0, pidBatch(7, 0, 3, false, "d", "e"))
	testcheck.WantCode(t, "retry", r.ErrorCode, nil)
	if r.BaseOffset != 3 || p.log.LogEndOffset() != 5 {
		t.Fatalf("retry: base %d, log end %d; want 3 and 5", r.BaseOffset, p.log.LogEndOffset())
	}
	// And of the first, still among the last five.
	r = h.produceTxn(nil, "t", 0, pidBatch(7, 0, 0, false, "a", "b", "c"))
	if r.ErrorCode != 0 || r.BaseOffset != 0 || p.log.LogEndOffset() != 5 {
		t.Fatalf("retry of the first: %v base %d, log end %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, p.log.LogEndOffset())
	}
	r = h.produceTxn(nil, "t", 0, pidBatch(7, 0, 9, false, "gap"))
	testcheck.WantCode(t, "gap", r.ErrorCode, kerr.OutOfOrderSequenceNumber)
	r = h.produceTxn(nil, "t", 0, pidBatch(7, 1, 0, false, "new epoch"))
	testcheck.WantCode(t, "new epoch", r.ErrorCode, nil)
	r = h.produceTxn(nil, "t", 0, pidBatch(7, 0, 5, false, "old epoch"))
	testcheck.WantCode(t, "old epoch", r.ErrorCode, kerr.InvalidProducerEpoch)
	two := append(pidBatch(7, 1, 1, false, "x"), pidBatch(7, 1, 2, false, "y")...)
	r = h.produceTxn(nil, "t", 0, two)
	testcheck.WantCode(t, "two batches", r.ErrorCode, kerr.InvalidRecord)
	if r.ErrorMessage == nil {
		t.Error("two batches: no error message")
	}
	mixed := append(testBatch(1, "plain"), pidBatch(7, 1, 1, false, "y")...)
	r = h.produceTxn(nil, "t", 0, mixed)
	testcheck.WantCode(t, "plain and producer batch", r.ErrorCode, kerr.InvalidRecord)
	r = h.produceTxn(nil, "t", 0, pidBatch(7, 1, -1, false, "no seq"))
	testcheck.WantCode(t, "negative base sequence", r.ErrorCode, kerr.InvalidRecord)
	if leo := p.log.LogEndOffset(); leo != 6 {
		t.Fatalf("log end %d, want 6", leo)
	}
	// Batches without a producer id are unchanged: several per partition are fine.
	r = h.produceTxn(nil, "t", 0, append(testBatch(1, "p"), testBatch(2, "q")...))
	testcheck.WantCode(t, "plain batches", r.ErrorCode, nil)
}

func TestIdempotentDuplicateLogAppendTime(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, configs: map[string]string{"message.timestamp.type": "LogAppendTime"}})
	r1 := h.produceTxn(nil, "t", 0, pidBatch(3, 0, 0, false, "a"))
	testcheck.WantCode(t, "first", r1.ErrorCode, nil)
	r2 := h.produceTxn(nil, "t", 0, pidBatch(3, 0, 0, false, "a"))
	testcheck.WantCode(t, "retry", r2.ErrorCode, nil)
	if r2.BaseOffset != r1.BaseOffset || r2.LogAppendTime != r1.LogAppendTime || r1.LogAppendTime <= 0 {
		t.Fatalf("retry answered %d@%d, original %d@%d", r2.BaseOffset, r2.LogAppendTime, r1.BaseOffset, r1.LogAppendTime)
	}
}

// fakeVerifier is a txn module that verifies partitions.
type fakeVerifier struct {
	mu    sync.Mutex
	calls []kernel.TopicPartition
	adds  []bool // per call: asked to add the partition (Produce v12+)
	err   error
}

func (f *fakeVerifier) VerifyTxnPartition(_ context.Context, txnID string, pid int64, epoch int16, tp kernel.TopicPartition, add bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, tp)
	f.adds = append(f.adds, add)
	return f.err
}

func (f *fakeVerifier) ncalls() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.calls) }

func TestTransactionalProduceAndMarkers(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 2})
	fv := &fakeVerifier{}
	h.m.SetTxnVerifier(fv)
	txn := "tx"
	p := h.part("t", 0)
	tp := p.tp

	// Not added to the transaction: refused before anything is appended.
	fv.err = fmt.Errorf("verify: %w", kerr.InvalidTxnState)
	r := h.produceTxn(&txn, "t", 0, pidBatch(9, 0, 0, true, "a"))
	testcheck.WantCode(t, "unverified", r.ErrorCode, kerr.InvalidTxnState)
	if p.log.LogEndOffset() != 0 {
		t.Fatal("unverified batch appended")
	}
	// Another coordinator: the check is skipped.
	fv.err = fmt.Errorf("verify: %w", kernel.ErrNotCoordinator)
	h.produce(9, -1, "t", 0, testBatch(2, "plain"))
	r = h.produceTxn(&txn, "t", 0, pidBatch(9, 0, 0, true, "a", "b"))
	testcheck.WantCode(t, "first txn batch", r.ErrorCode, nil)
	first := r.BaseOffset
	if first != 2 {
		t.Fatalf("txn batch at %d, want 2", first)
	}
	fv.err = nil
	calls := fv.ncalls()
	r = h.produceTxn(&txn, "t", 0, pidBatch(9, 0, 2, true, "c"))
	testcheck.WantCode(t, "second txn batch", r.ErrorCode, nil)
	if fv.ncalls() != calls {
		t.Error("verified again with the transaction open")
	}
	r = h.produceTxn(nil, "t", 0, pidBatch(9, 0, 3, false, "not txn"))
	testcheck.WantCode(t, "non-transactional batch during the txn", r.ErrorCode, kerr.InvalidTxnState)

	if hw, lso := p.stableOffsets(); hw != 5 || lso != first {
		t.Fatalf("hw %d lso %d, want 5 and %d", hw, lso, first)
	}
	// read_committed stops at the LSO; read_uncommitted sees everything.
	fr := fetchReq("t", 1, 0, 0)
	fr.IsolationLevel = 1
	out := h.fetch(context.Background(), 12, fr).Topics[0].Partitions[0]
	if out.LastStableOffset != first || out.HighWatermark != 5 || out.AbortedTransactions == nil || len(out.AbortedTransactions) != 0 {
		t.Fatalf("read_committed: lso %d hw %d aborted %v", out.LastStableOffset, out.HighWatermark, out.AbortedTransactions)
	}
	if n := countRecords(t, out.RecordBatches); n != 2 {
		t.Fatalf("read_committed got %d records, want the 2 before the txn", n)
	}
	unc := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0)).Topics[0].Partitions[0]
	if unc.LastStableOffset != first || unc.AbortedTransactions != nil || countRecords(t, unc.RecordBatches) != 5 {
		t.Fatalf("read_uncommitted: lso %d aborted %v", unc.LastStableOffset, unc.AbortedTransactions)
	}
	// At the LSO, a read_committed long poll waits until the marker moves it.
	fr = fetchReq("t", 1, 0, first)
	fr.IsolationLevel, fr.MaxWaitMillis, fr.MinBytes = 1, 20_000, 1
	got := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() {
		resp, err := h.do(context.Background(), 12, fr)
		if err != nil {
			t.Error(err)
			got <- kmsg.FetchResponseTopicPartition{}
			return
		}
		out := &kmsg.FetchResponse{Version: 12}
		if err := out.ReadFrom(bodyBytes(t, resp.Body)); err != nil {
			t.Error(err)
		}
		got <- out.Topics[0].Partitions[0]
	}()
	waitFor(t, func() bool { return h.m.pg.watching(tp) > 0 })
	if err := h.m.WriteTxnMarker(context.Background(), tp, kernel.TxnMarker{ProducerID: 9, ProducerEpoch: 0, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case out = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("read_committed long poll not woken by the marker")
	}
	if out.LastStableOffset != 6 || len(out.AbortedTransactions) != 1 || out.AbortedTransactions[0].ProducerID != 9 || out.AbortedTransactions[0].FirstOffset != first {
		t.Fatalf("after the abort: lso %d aborted %+v", out.LastStableOffset, out.AbortedTransactions)
	}
	// Nothing read past the aborted range: no aborted transactions listed.
	fr = fetchReq("t", 1, 0, 0)
	fr.IsolationLevel = 1
	fr.Topics[0].Partitions[0].PartitionMaxBytes = 1 // the first batch only (KIP-74)
	out = h.fetch(context.Background(), 12, fr).Topics[0].Partitions[0]
	if len(out.AbortedTransactions) != 0 || countRecords(t, out.RecordBatches) != 2 {
		t.Fatalf("first batch only: aborted %+v", out.AbortedTransactions)
	}

	// A committed transaction: no aborted entry, LSO back at the HW.
	r = h.produceTxn(&txn, "t", 0, pidBatch(9, 0, 3, true, "d"))
	testcheck.WantCode(t, "next txn", r.ErrorCode, nil)
	if err := h.m.WriteTxnMarker(context.Background(), tp, kernel.TxnMarker{ProducerID: 9, ProducerEpoch: 0, CoordinatorEpoch: 1, Commit: true}); err != nil {
		t.Fatal(err)
	}
	fr = fetchReq("t", 1, 0, 6)
	fr.IsolationLevel = 1
	out = h.fetch(context.Background(), 12, fr).Topics[0].Partitions[0]
	if out.LastStableOffset != 8 || out.HighWatermark != 8 || len(out.AbortedTransactions) != 0 || countRecords(t, out.RecordBatches) != 1 {
		t.Fatalf("after the commit: lso %d hw %d aborted %+v", out.LastStableOffset, out.HighWatermark, out.AbortedTransactions)
	}
	// Fenced markers.
	err := h.m.WriteTxnMarker(context.Background(), tp, kernel.TxnMarker{ProducerID: 9, ProducerEpoch: 0, CoordinatorEpoch: 0, Commit: true})
	if !errors.Is(err, kernel.ErrTxnCoordinatorFenced) {
		t.Errorf("old coordinator epoch: %v", err)
	}
	err = h.m.WriteTxnMarker(context.Background(), kernel.TopicPartition{Topic: "nope"}, kernel.TxnMarker{ProducerID: 9})
	if !errors.Is(err, kernel.ErrNotLeader) {
		t.Errorf("unknown partition: %v", err)
	}
}

// countRecords counts the data records in fetched batches (control batches skipped).
func countRecords(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	if err := recordbatch.Split(b, func(h recordbatch.Header, _ []byte) error {
		if !h.IsControl() {
			n += int(h.RecordCount)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestListOffsetsIsolation(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	txn := "tx"
	h.produce(9, -1, "t", 0, testBatch(2, "a")) // offsets 0-1
	r := h.produceTxn(&txn, "t", 0, pidBatch(4, 0, 0, true, "b", "c"))
	testcheck.WantCode(t, "txn", r.ErrorCode, nil)
	list := func(iso int8, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID, req.IsolationLevel = -1, iso
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := h.do(context.Background(), 7, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	if o := list(0, -1); o.Offset != 4 {
		t.Errorf("read_uncommitted latest %d, want 4", o.Offset)
	}
	if o := list(1, -1); o.Offset != 2 {
		t.Errorf("read_committed latest %d, want the LSO 2", o.Offset)
	}
	// Every record's timestamp is <= now: timestamp 0 finds offset 0 in both; a
	// timestamp past the committed records finds nothing for read_committed.
	if o := list(1, 0); o.Offset != 0 {
		t.Errorf("read_committed ts 0: %d", o.Offset)
	}
	// The plain records are from 2023, the transaction's from now: a timestamp between
	// them finds the open transaction's first batch, past the LSO for read_committed.
	if o := list(0, 1_700_000_000_001); o.Offset != 2 {
		t.Errorf("read_uncommitted ts lookup %d, want 2", o.Offset)
	}
	if o := list(1, 1_700_000_000_001); o.Offset != -1 {
		t.Errorf("read_committed ts lookup %d, want -1 (at or past the LSO)", o.Offset)
	}
	if o := list(1, -3); o.Offset >= 2 {
		t.Errorf("read_committed max timestamp at %d, past the LSO", o.Offset)
	}
	if err := h.m.WriteTxnMarker(context.Background(), h.part("t", 0).tp, kernel.TxnMarker{ProducerID: 4, Commit: true}); err != nil {
		t.Fatal(err)
	}
	if o := list(1, -1); o.Offset != 5 {
		t.Errorf("read_committed latest after commit %d, want 5", o.Offset)
	}
}

func writeMarkersReq(pid int64, epoch int16, coordEpoch int32, commit bool, topic string, parts ...int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.CoordinatorEpoch, mk.Committed = pid, epoch, coordEpoch, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, parts
	mk.Topics = append(mk.Topics, mt)
	req.Markers = append(req.Markers, mk)
	return req
}

// denyCluster denies CLUSTER_ACTION.
// denyCluster denies ClusterAction and Alter on the cluster (either lets
// WriteTxnMarkers through).
type denyCluster struct{}

func (denyCluster) Authorize(_ context.Context, _ kernel.Principal, _ string, op kernel.Operation, r kernel.Resource) bool {
	return !(r.Type == kernel.ResCluster && (op == kernel.OpClusterAction || op == kernel.OpAlter))
}

func TestWriteTxnMarkersAPI(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 2}, topicSpec{name: "other", id: 2, leader: 2})
	txn := "tx"
	for part := int32(0); part < 2; part++ {
		r := h.produceTxn(&txn, "t", part, pidBatch(5, 1, 0, true, "a"))
		testcheck.WantCode(t, "txn batch", r.ErrorCode, nil)
	}
	codes := func(v int16, req *kmsg.WriteTxnMarkersRequest, az kernel.Authorizer) []int16 {
		t.Helper()
		resp, err := h.doAs(context.Background(), v, req, az)
		if err != nil {
			t.Fatal(err)
		}
		var out []int16
		for _, m := range resp.Msg.(*kmsg.WriteTxnMarkersResponse).Markers {
			if m.ProducerID != 5 {
				t.Errorf("marker for producer %d", m.ProducerID)
			}
			for _, tp := range m.Topics {
				for _, p := range tp.Partitions {
					out = append(out, p.ErrorCode)
				}
			}
		}
		return out
	}
	if c := codes(1, writeMarkersReq(5, 1, 3, true, "t", 0, 1), denyCluster{}); !slices.Equal(c, []int16{kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code}) {
		t.Fatalf("unauthorized: %v", c)
	}
	if leo := h.part("t", 0).log.LogEndOffset(); leo != 1 {
		t.Fatalf("unauthorized marker appended: log end %d", leo)
	}
	if c := codes(0, writeMarkersReq(5, 1, 3, true, "t", 0, 1, 7), kernel.AllowAll{}); !slices.Equal(c, []int16{0, 0, kerr.UnknownTopicOrPartition.Code}) {
		t.Fatalf("commit: %v", c)
	}
	for part := int32(0); part < 2; part++ {
		p := h.part("t", part)
		if hw, lso := p.stableOffsets(); hw != 2 || lso != 2 {
			t.Fatalf("partition %d after commit: hw %d lso %d", part, hw, lso)
		}
	}
	if c := codes(1, writeMarkersReq(5, 1, 3, false, "other", 0), kernel.AllowAll{}); !slices.Equal(c, []int16{kerr.NotLeaderForPartition.Code}) {
		t.Fatalf("not leader: %v", c)
	}
	if c := codes(1, writeMarkersReq(5, 1, 2, false, "t", 0), kernel.AllowAll{}); !slices.Equal(c, []int16{kerr.TransactionCoordinatorFenced.Code}) {
		t.Fatalf("old coordinator epoch: %v", c)
	}
	if c := codes(1, writeMarkersReq(5, 0, 3, false, "t", 0), kernel.AllowAll{}); !slices.Equal(c, []int16{kerr.InvalidProducerEpoch.Code}) {
		t.Fatalf("old producer epoch: %v", c)
	}
	if c := codes(1, writeMarkersReq(5, 1, 3, false, "nope", 0), kernel.AllowAll{}); !slices.Equal(c, []int16{kerr.UnknownTopicOrPartition.Code}) {
		t.Fatalf("unknown topic: %v", c)
	}
}

func TestTxnMarkerListener(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "__consumer_offsets", id: 1, parts: 2, internal: true}, topicSpec{name: "t", id: 2})
	type call struct {
		tp     kernel.TopicPartition
		m      kernel.TxnMarker
		offset int64
	}
	var mu sync.Mutex
	var calls []call
	h.m.AddTxnMarkerListener(func(tp kernel.TopicPartition, m kernel.TxnMarker, offset int64) {
		mu.Lock()
		calls = append(calls, call{tp, m, offset})
		mu.Unlock()
	})
	var second atomic.Int32
	h.m.AddTxnMarkerListener(func(kernel.TopicPartition, kernel.TxnMarker, int64) { second.Add(1) })

	internal := kernel.TopicPartition{Topic: "__consumer_offsets", Partition: 1}
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				mk := kernel.TxnMarker{ProducerID: int64(100 + w), ProducerEpoch: 0, CoordinatorEpoch: 1, Commit: i%2 == 0}
				if err := h.m.WriteTxnMarker(context.Background(), internal, mk); err != nil {
					t.Error(err)
					return
				}
				// Delivered before WriteTxnMarker returns.
				mu.Lock()
				found := false
				for _, c := range calls {
					found = found || (c.m == mk && c.tp == internal)
				}
				mu.Unlock()
				if !found {
					t.Errorf("marker %+v not delivered when WriteTxnMarker returned", mk)
				}
			}
		})
	}
	wg.Wait()
	// A marker on a non-internal topic is not delivered, through either path.
	if err := h.m.WriteTxnMarker(context.Background(), kernel.TopicPartition{Topic: "t"}, kernel.TxnMarker{ProducerID: 1, Commit: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.do(context.Background(), 1, writeMarkersReq(200, 0, 1, false, "t", 0)); err != nil {
		t.Fatal(err)
	}
	// Through the API, on the internal topic: delivered.
	if _, err := h.do(context.Background(), 1, writeMarkersReq(300, 0, 1, true, "__consumer_offsets", 0, 1)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != writers*each+2 || int(second.Load()) != len(calls) {
		t.Fatalf("%d calls (second listener %d), want %d", len(calls), second.Load(), writers*each+2)
	}
	last := map[kernel.TopicPartition]int64{}
	for _, c := range calls {
		if c.tp.Topic != "__consumer_offsets" {
			t.Fatalf("delivered a marker of %s", c.tp)
		}
		if prev, ok := last[c.tp]; ok && c.offset <= prev {
			t.Fatalf("%s: offset %d after %d: not in log order", c.tp, c.offset, prev)
		}
		last[c.tp] = c.offset
	}
	if last[internal] != writers*each { // offsets 0..99 from WriteTxnMarker, 100 from the API
		t.Errorf("last offset on %s: %d", internal, last[internal])
	}
}

func TestDescribeProducers(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1}, topicSpec{name: "other", id: 2, leader: 2}, topicSpec{name: "secret", id: 3})
	txn := "tx"
	testcheck.WantCode(t, "idempotent", h.produceTxn(nil, "t", 0, pidBatch(11, 2, 0, false, "a", "b")).ErrorCode, nil)
	testcheck.WantCode(t, "txn", h.produceTxn(&txn, "t", 0, pidBatch(12, 0, 0, true, "c")).ErrorCode, nil)
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, tp := range []struct {
		topic string
		parts []int32
	}{{"t", []int32{0, 3}}, {"other", []int32{0}}, {"secret", []int32{0}}} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = tp.topic, tp.parts
		req.Topics = append(req.Topics, rt)
	}
	resp, err := h.doAs(context.Background(), 0, req, denyTopic("secret"))
	if err != nil {
		t.Fatal(err)
	}
	ts := resp.Msg.(*kmsg.DescribeProducersResponse).Topics
	testcheck.WantCode(t, "t-0", ts[0].Partitions[0].ErrorCode, nil)
	testcheck.WantCode(t, "t-3", ts[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)
	testcheck.WantCode(t, "other-0", ts[1].Partitions[0].ErrorCode, kerr.NotLeaderForPartition)
	testcheck.WantCode(t, "secret-0", ts[2].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	ps := ts[0].Partitions[0].ActiveProducers
	slices.SortFunc(ps, func(a, b kmsg.DescribeProducersResponseTopicPartitionActiveProducer) int {
		return int(a.ProducerID - b.ProducerID)
	})
	if len(ps) != 2 {
		t.Fatalf("producers %+v", ps)
	}
	if p := ps[0]; p.ProducerID != 11 || p.ProducerEpoch != 2 || p.LastSequence != 1 || p.CurrentTxnStartOffset != -1 || p.LastTimestamp <= 0 {
		t.Errorf("idempotent producer %+v", p)
	}
	if p := ps[1]; p.ProducerID != 12 || p.LastSequence != 0 || p.CurrentTxnStartOffset != 2 {
		t.Errorf("transactional producer %+v", p)
	}
}

func TestTransformIdempotent(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: func(r *recordbatch.Record) []recordbatch.Record {
		if string(r.Value) == "drop" {
			return nil
		}
		return []recordbatch.Record{*r}
	}}
	h.m.SetProduceTransformer(ft)
	p := h.part("t", 0)
	// 3 records in, 2 stored: the input's sequence range (0-2) is what the producer
	// state remembers, so a retry of the input is a duplicate.
	r := h.produceTxn(nil, "t", 0, pidBatch(21, 0, 0, false, "a", "drop", "b"))
	testcheck.WantCode(t, "filtered", r.ErrorCode, nil)
	if p.log.LogEndOffset() != 2 {
		t.Fatalf("log end %d, want 2", p.log.LogEndOffset())
	}
	r = h.produceTxn(nil, "t", 0, pidBatch(21, 0, 0, false, "a", "drop", "b"))
	testcheck.WantCode(t, "retry", r.ErrorCode, nil)
	if r.BaseOffset != 0 || p.log.LogEndOffset() != 2 {
		t.Fatalf("retry: base %d log end %d", r.BaseOffset, p.log.LogEndOffset())
	}
	// Every record dropped: nothing stored, the sequence moves on (3-4).
	r = h.produceTxn(nil, "t", 0, pidBatch(21, 0, 3, false, "drop", "drop"))
	testcheck.WantCode(t, "all dropped", r.ErrorCode, nil)
	if r.BaseOffset != 2 || p.log.LogEndOffset() != 2 {
		t.Fatalf("all dropped: base %d log end %d", r.BaseOffset, p.log.LogEndOffset())
	}
	r = h.produceTxn(nil, "t", 0, pidBatch(21, 0, 3, false, "drop", "drop"))
	testcheck.WantCode(t, "all dropped retry", r.ErrorCode, nil)
	r = h.produceTxn(nil, "t", 0, pidBatch(21, 0, 5, false, "c"))
	testcheck.WantCode(t, "after the dropped batch", r.ErrorCode, nil)
	if r.BaseOffset != 2 {
		t.Fatalf("after the dropped batch at %d", r.BaseOffset)
	}
	r = h.produceTxn(nil, "t", 0, pidBatch(21, 0, 9, false, "gap"))
	testcheck.WantCode(t, "gap", r.ErrorCode, kerr.OutOfOrderSequenceNumber)
	// The stored batch keeps the producer fields.
	st, ok := p.log.Producer(21)
	if !ok || st.LastSequence != 5 {
		t.Fatalf("producer state %+v %v", st, ok)
	}
}

// A transform that breaks an idempotent batch's producer fields is refused.
func TestTransformBreaksProducerBatch(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	h.m.SetProduceTransformer(&rewritingTransformer{})
	r := h.produceTxn(nil, "t", 0, pidBatch(21, 0, 0, false, "a"))
	testcheck.WantCode(t, "rewritten producer id", r.ErrorCode, kerr.UnknownServerError)
	if h.part("t", 0).log.LogEndOffset() != 0 {
		t.Fatal("appended")
	}
}

// rewritingTransformer drops the producer id of every batch (a buggy transform).
type rewritingTransformer struct{}

func (rewritingTransformer) Bound(string) bool { return true }
func (rewritingTransformer) TransformProduce(_ context.Context, _ kernel.TopicPartition, _ kernel.ProduceSource, records []byte) ([]byte, error) {
	return testBatch(1, "z"), nil
}

// Producers racing their own retries: every batch is sent twice at once; each must be
// stored exactly once, in sequence order, and both sends answered with its offset.
func TestIdempotentConcurrentRetries(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	const producers, batches = 4, 40
	var wg sync.WaitGroup
	for pid := range producers {
		wg.Go(func() {
			for seq := range batches {
				var offs [2]int64
				var codes [2]int16
				var inner sync.WaitGroup
				for i := range 2 {
					inner.Add(1)
					go func() {
						defer inner.Done()
						r := produceReq(-1, "t", 1, 0, pidBatch(int64(pid), 0, int32(seq), false, fmt.Sprintf("%d-%d", pid, seq)))
						resp, err := h.call(t, context.Background(), 9, r, kernel.AllowAll{})
						if err != nil {
							t.Error(err)
							return
						}
						p := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
						offs[i], codes[i] = p.BaseOffset, p.ErrorCode
					}()
				}
				inner.Wait()
				if codes[0] != 0 || codes[1] != 0 || offs[0] != offs[1] {
					t.Errorf("producer %d seq %d: codes %v offsets %v", pid, seq, codes, offs)
					return
				}
			}
		})
	}
	wg.Wait()
	out := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0)).Topics[0].Partitions[0]
	next := make([]int, producers)
	n := 0
	var dec recordbatch.Decoder
	if err := recordbatch.Split(out.RecordBatches, func(_ recordbatch.Header, b []byte) error {
		_, err := dec.Records(b, func(r *recordbatch.Record) error {
			var pid, seq int
			if _, err := fmt.Sscanf(string(r.Value), "%d-%d", &pid, &seq); err != nil {
				return err
			}
			if seq != next[pid] {
				return fmt.Errorf("producer %d: seq %d stored where %d was next", pid, seq, next[pid])
			}
			next[pid]++
			n++
			return nil
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != producers*batches {
		t.Fatalf("stored %d records, want %d", n, producers*batches)
	}
}

// Transaction version 2 (KIP-890 part 2) on the partition side: Produce v12+ asks the
// coordinator to add the partition; a version 2 marker must be above the epoch of the
// producer's open transaction, so it cannot end the next transaction's data; a retried
// one is accepted; data of the ended epoch is refused.
func TestTransactionVersion2Partition(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 1})
	fv := &fakeVerifier{}
	h.m.SetTxnVerifier(fv)
	txn := "tx"
	tp := h.part("t", 0).tp
	produce := func(version int16, records []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		r := produceReq(-1, "t", 1, 0, records)
		r.TransactionID = &txn
		resp, err := h.do(context.Background(), version, r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	marker := func(epoch int16, tv int16) error {
		return h.m.WriteTxnMarker(context.Background(), tp, kernel.TxnMarker{ProducerID: 11, ProducerEpoch: epoch,
			CoordinatorEpoch: 1, Commit: true, TransactionVersion: tv})
	}
	testcheck.WantCode(t, "v11 first batch", produce(11, pidBatch(10, 0, 0, true, "a")).ErrorCode, nil)
	testcheck.WantCode(t, "v12 first batch", produce(12, pidBatch(11, 0, 0, true, "b")).ErrorCode, nil)
	fv.mu.Lock()
	adds := slices.Clone(fv.adds)
	fv.mu.Unlock()
	if !slices.Equal(adds, []bool{false, true}) {
		t.Fatalf("verifier asked to add: %v, want [false true] (v11 verifies, v12 adds)", adds)
	}
	if err := marker(0, 2); !errors.Is(err, kernel.ErrInvalidProducerEpoch) {
		t.Fatalf("version 2 marker at the data's epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	if err := marker(1, 2); err != nil {
		t.Fatalf("version 2 marker at the bumped epoch: %v", err)
	}
	if err := marker(1, 2); err != nil {
		t.Fatalf("retried version 2 marker: %v", err)
	}
	testcheck.WantCode(t, "late batch of the ended epoch", produce(12, pidBatch(11, 0, 1, true, "late")).ErrorCode, kerr.InvalidProducerEpoch)
	testcheck.WantCode(t, "next transaction", produce(12, pidBatch(11, 1, 0, true, "c")).ErrorCode, nil)
	if err := marker(1, 2); !errors.Is(err, kernel.ErrInvalidProducerEpoch) {
		t.Fatalf("version 2 marker at the next transaction's epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	if err := marker(1, 0); err != nil {
		t.Fatalf("version 0 marker at the data's epoch: %v", err)
	}
	if _, lso := h.part("t", 0).stableOffsets(); lso != 0 {
		t.Fatalf("LSO %d, want 0 (producer 10's transaction, at offset 0, is still open)", lso)
	}
}
