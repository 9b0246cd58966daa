package txn

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// The transaction version 2 state machine (KIP-890 part 2), transition by transition.
func TestEndTransitVersion2(t *testing.T) {
	parts := []kernel.TopicPartition{{Topic: "t", Partition: 0}}
	noID := func() (int64, *kerr.Error) { t.Fatal("a new producer id was asked for"); return -1, nil }
	ongoing := func(epoch int16, tv int16) *txnMeta {
		return &txnMeta{id: "x", cur: txnData{ProducerID: 7, LastProducerID: -1, Epoch: epoch, LastEpoch: -1,
			TimeoutMs: 1000, State: stOngoing, Partitions: parts, StartMs: 1, ClientTV: tv}}
	}
	apply := func(t *txnMeta, n *txnData) { t.cur = *n }

	// Commit bumps the epoch; the answer is the next transaction's producer.
	m := ongoing(5, 2)
	next, ans, e := m.endTransit(7, 5, true, 2, noID, 10)
	if e != nil || next.State != stPrepareCommit || next.Epoch != 6 || next.LastEpoch != 5 || next.ClientTV != 2 || ans != (pidEpoch{7, 6}) {
		t.Fatalf("commit: %+v %+v %v", next, ans, e)
	}
	apply(m, next)
	// While the markers are written: the retry and the next transaction wait; an
	// older epoch is fenced.
	for _, ep := range []int16{5, 6} {
		if _, _, e := m.endTransit(7, ep, true, 2, noID, 11); e != kerr.ConcurrentTransactions {
			t.Errorf("epoch %d during PrepareCommit: %v", ep, e)
		}
	}
	if _, _, e := m.endTransit(7, 4, true, 2, noID, 11); e != kerr.ProducerFenced {
		t.Errorf("epoch 4 during PrepareCommit: %v", e)
	}
	if e := m.verify(7, 6, parts[0]); e != kerr.ConcurrentTransactions {
		t.Errorf("verify of the next transaction during PrepareCommit: %v", e)
	}
	done, ok := m.completeTransit(7, 6, true, 12)
	if !ok || done.State != stCompleteCommit || done.Epoch != 6 {
		t.Fatalf("complete: %+v %v", done, ok)
	}
	apply(m, done)
	// A retried EndTxn (the epoch before the bump) gets the same answer; its opposite
	// is refused.
	if next, ans, e := m.endTransit(7, 5, true, 2, noID, 13); e != nil || next != nil || ans != (pidEpoch{7, 6}) {
		t.Errorf("retried commit: %+v %+v %v", next, ans, e)
	}
	if _, _, e := m.endTransit(7, 5, false, 2, noID, 13); e != kerr.InvalidTxnState {
		t.Errorf("retried commit as an abort: %v", e)
	}
	// At the current epoch: nothing to commit, but an abort is legal and bumps.
	if _, _, e := m.endTransit(7, 6, true, 2, noID, 13); e != kerr.InvalidTxnState {
		t.Errorf("commit of nothing: %v", e)
	}
	next, ans, e = m.endTransit(7, 6, false, 2, noID, 13)
	if e != nil || next.State != stPrepareAbort || next.Epoch != 7 || len(next.Partitions) != 0 || ans != (pidEpoch{7, 7}) {
		t.Fatalf("empty abort: %+v %+v %v", next, ans, e)
	}
	// A version 0 abort of nothing stays INVALID_TXN_STATE, and a version 0 EndTxn
	// keeps the epoch.
	if _, _, e := m.endTransit(7, 6, false, 0, noID, 13); e != kerr.InvalidTxnState {
		t.Errorf("version 0 abort of nothing: %v", e)
	}
	empty := &txnMeta{id: "x", cur: txnData{ProducerID: 7, LastProducerID: -1, Epoch: 0, LastEpoch: -1, TimeoutMs: 1000, State: stEmpty, StartMs: -1}}
	if next, _, e := empty.endTransit(7, 0, false, 2, noID, 1); e != nil || next.Epoch != 1 || next.State != stPrepareAbort {
		t.Errorf("abort right after InitProducerId: %+v %v", next, e)
	}
	if _, _, e := empty.endTransit(7, 0, false, 0, noID, 1); e != kerr.InvalidTxnState {
		t.Errorf("version 0 abort right after InitProducerId: %v", e)
	}
	v0 := ongoing(5, 0)
	if next, ans, e := v0.endTransit(7, 5, true, 0, noID, 1); e != nil || next.Epoch != 5 || next.ClientTV != 0 || ans != (pidEpoch{7, 5}) {
		t.Errorf("version 0 commit: %+v %+v %v", next, ans, e)
	}
	// A transaction partitions were added to by version 2 but ended by a version 0
	// EndTxn ends as version 0: the epoch stays, the markers are checked as before.
	if next, _, e := ongoing(5, 2).endTransit(7, 5, false, 0, noID, 1); e != nil || next.Epoch != 5 || next.ClientTV != 0 {
		t.Errorf("version 2 transaction ended by version 0: %+v %v", next, e)
	}
}

// The epochs run out: the EndTxn that reaches MaxInt16 answers a new producer id at
// epoch 0, which the Complete* record makes current; retries come with the old one.
func TestEndTransitVersion2Rotation(t *testing.T) {
	parts := []kernel.TopicPartition{{Topic: "t", Partition: 0}}
	m := &txnMeta{id: "x", cur: txnData{ProducerID: 7, LastProducerID: -1, Epoch: math.MaxInt16 - 1, LastEpoch: -1,
		TimeoutMs: 1000, State: stOngoing, Partitions: parts, StartMs: 1, ClientTV: 2}}
	asked := 0
	newID := func() (int64, *kerr.Error) { asked++; return 99, nil }
	next, ans, e := m.endTransit(7, math.MaxInt16-1, true, 2, newID, 10)
	if e != nil || asked != 1 || next.Epoch != math.MaxInt16 || next.Next == nil || *next.Next != (pidEpoch{99, 0}) || ans != (pidEpoch{99, 0}) {
		t.Fatalf("commit at the last epoch: %+v %+v %v (asked %d)", next, ans, e, asked)
	}
	m.cur = *next
	// The new producer id arrives before the markers are all in: wait, do not refuse.
	if e := m.checkProducer(99, 0); e != kerr.ConcurrentTransactions {
		t.Errorf("the new producer id during PrepareCommit: %v", e)
	}
	if _, _, e := m.endTransit(99, 0, false, 2, newID, 11); e != kerr.ConcurrentTransactions {
		t.Errorf("EndTxn of the new producer id during PrepareCommit: %v", e)
	}
	done, ok := m.completeTransit(7, math.MaxInt16, true, 12)
	if !ok || done.ProducerID != 99 || done.Epoch != 0 || done.LastProducerID != 7 || done.Next != nil {
		t.Fatalf("complete: %+v %v", done, ok)
	}
	m.cur = *done
	if next, ans, e := m.endTransit(7, math.MaxInt16-1, true, 2, newID, 13); e != nil || next != nil || ans != (pidEpoch{99, 0}) {
		t.Errorf("retried commit with the old producer id: %+v %+v %v", next, ans, e)
	}
	if _, _, e := m.endTransit(7, math.MaxInt16-2, true, 2, newID, 13); e != kerr.InvalidProducerIDMapping {
		t.Errorf("an older epoch of the old producer id: %v", e)
	}
	if n, e := m.addPartitionsTransit(99, 0, parts, 2, 14); e != nil || n.State != stOngoing || n.ClientTV != 2 {
		t.Errorf("the next transaction: %+v %v", n, e)
	}
}
