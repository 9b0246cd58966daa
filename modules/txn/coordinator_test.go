package txn

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func TestIdempotentInitProducerID(t *testing.T) {
	e := newEnv(t)
	seen := map[int64]bool{}
	for range pidBlockSize + 1 {
		pid, epoch, err := e.initPID("", 0, -1, -1)
		if err != nil || epoch != 0 || seen[pid] {
			t.Fatalf("pid %d epoch %d err %v (seen %v)", pid, epoch, err, seen[pid])
		}
		seen[pid] = true
	}
	// KIP-360 fields are ignored: still a fresh id.
	pid, epoch, err := e.initPID("", 0, 5, 3)
	if err != nil || epoch != 0 || seen[pid] {
		t.Fatalf("with old id: pid %d epoch %d err %v", pid, epoch, err)
	}
	if e.c.allocs != 2 {
		t.Fatalf("allocations = %d, want 2 blocks for %d ids", e.c.allocs, pidBlockSize+2)
	}
}

func TestInitProducerIDValidation(t *testing.T) {
	e := newEnv(t, withConfigs("transaction.max.timeout.ms", "10000"))
	for _, tc := range []struct {
		name     string
		timeout  int32
		pid      int64
		epoch    int16
		want     *kerr.Error
		emptyTxn bool
	}{
		{name: "timeout too large", timeout: 10001, pid: -1, epoch: -1, want: kerr.InvalidTransactionTimeout},
		{name: "timeout zero", timeout: 0, pid: -1, epoch: -1, want: kerr.InvalidTransactionTimeout},
		{name: "only pid", timeout: 1000, pid: 5, epoch: -1, want: kerr.InvalidRequest},
		{name: "only epoch", timeout: 1000, pid: -1, epoch: 2, want: kerr.InvalidRequest},
		{name: "max timeout ok", timeout: 10000, pid: -1, epoch: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.initPID("v-"+tc.name, tc.timeout, tc.pid, tc.epoch)
			if err != tc.want {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	r := kmsg.NewPtrInitProducerIDRequest()
	empty := ""
	r.TransactionalID, r.TransactionTimeoutMillis = &empty, 1000
	if got := e.call(r, 5).(*kmsg.InitProducerIDResponse).ErrorCode; got != kerr.InvalidRequest.Code {
		t.Fatalf("empty id: %d", got)
	}
}

func TestInitProducerIDBumpsEpoch(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	if epoch != 0 {
		t.Fatalf("first epoch %d", epoch)
	}
	recs := e.c.records(t, e.txnTP("a"))
	if len(recs) != 1 || recs[0].id != "a" || recs[0].d.State != stEmpty || recs[0].d.Epoch != 0 || recs[0].d.ProducerID != pid {
		t.Fatalf("the answer was not written first: %+v", recs)
	}
	pid2, epoch2 := e.initOK("a")
	if pid2 != pid || epoch2 != 1 {
		t.Fatalf("second init: %d/%d, want %d/1", pid2, epoch2, pid)
	}
	// The old instance is fenced.
	if err := e.addOne("a", pid, 0, tp("t", 0)); err != kerr.ProducerFenced {
		t.Fatalf("old epoch add: %v", err)
	}
	if err := e.addParts("a", pid, 0, 1, tp("t", 0))[tp("t", 0)]; err != kerr.InvalidProducerEpoch {
		t.Fatalf("old epoch add v1: %v", err)
	}
}

func TestKIP360(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.initOK("a")
	// The producer re-inits with its current id/epoch: bumped, previous epoch kept.
	p1, e1, err := e.initPID("a", 60000, pid, 0)
	if err != nil || p1 != pid || e1 != 1 {
		t.Fatalf("bump with expected: %d/%d %v", p1, e1, err)
	}
	// Its answer was lost: the retry gets the same answer.
	p2, e2, err := e.initPID("a", 60000, pid, 0)
	if err != nil || p2 != pid || e2 != 1 {
		t.Fatalf("retry: %d/%d %v", p2, e2, err)
	}
	// Another id: fenced (v4+), INVALID_PRODUCER_EPOCH before.
	if _, _, err := e.initPID("a", 60000, pid+100, 0); err != kerr.ProducerFenced {
		t.Fatalf("wrong id: %v", err)
	}
	r := kmsg.NewPtrInitProducerIDRequest()
	id := "a"
	r.TransactionalID, r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = &id, 60000, pid+100, 0
	if got := e.call(r, 3).(*kmsg.InitProducerIDResponse).ErrorCode; got != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("wrong id v3: %d", got)
	}
	// A stale epoch (neither current nor previous): fenced.
	if _, _, err := e.initPID("a", 60000, pid, 7); err != kerr.ProducerFenced {
		t.Fatalf("stale epoch: %v", err)
	}
}

func setEpoch(e *testEnv, id string, epoch int16) {
	s, kerrr := e.m.coordinatorFor(context.Background(), id)
	if kerrr != nil {
		e.t.Fatal(kerrr)
	}
	s.mu.Lock()
	s.txns[id].cur.Epoch = epoch
	s.mu.Unlock()
}

func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.initOK("a")
	setEpoch(e, "a", math.MaxInt16-2)
	_, epoch := e.initOK("a")
	if epoch != math.MaxInt16-1 {
		t.Fatalf("epoch %d", epoch)
	}
	// Exhausted: KIP-360 init with it rotates to a new id, epoch 0.
	p2, e2, err := e.initPID("a", 60000, pid, epoch)
	if err != nil || p2 == pid || e2 != 0 {
		t.Fatalf("rotation: %d/%d %v", p2, e2, err)
	}
	// The answer was lost: a retry with the old id and exhausted epoch gets it again.
	p3, e3, err := e.initPID("a", 60000, pid, epoch)
	if err != nil || p3 != p2 || e3 != 0 {
		t.Fatalf("retry of rotation: %d/%d %v (want %d/0)", p3, e3, err, p2)
	}
	// Without KIP-360 fields an exhausted epoch also rotates.
	setEpoch(e, "a", math.MaxInt16-1)
	p4, e4 := e.initOK("a")
	if p4 == p2 || e4 != 0 {
		t.Fatalf("rotation without expected: %d/%d", p4, e4)
	}
}

func TestCommitAndAbort(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			e := newEnv(t)
			pid, epoch := e.initOK("a")
			if err := e.addOne("a", pid, epoch, tp("t", 0), tp("t", 2)); err != nil {
				t.Fatal(err)
			}
			// Re-adding a partition already in the transaction writes nothing.
			n := len(e.c.records(t, e.txnTP("a")))
			if err := e.addOne("a", pid, epoch, tp("t", 0)); err != nil {
				t.Fatal(err)
			}
			if got := len(e.c.records(t, e.txnTP("a"))); got != n {
				t.Fatalf("re-add wrote a record")
			}
			if err := e.addOne("a", pid, epoch, tp("u", 1)); err != nil {
				t.Fatal(err)
			}
			if d := e.describe("a"); d.State != "Ongoing" || len(d.Topics) != 2 || d.StartTimestamp != e.clock.Now().UnixMilli() {
				t.Fatalf("describe ongoing: %+v", d)
			}
			if err := e.endTxn("a", pid, epoch, commit, 4); err != nil {
				t.Fatal(err)
			}
			want := "CompleteAbort"
			if commit {
				want = "CompleteCommit"
			}
			e.waitState("a", want)
			calls := e.c.markerCalls()
			var got []kernel.TopicPartition
			for _, c := range calls {
				if c.m.Commit != commit || c.m.ProducerID != pid || c.m.ProducerEpoch != epoch || c.m.CoordinatorEpoch != 0 {
					t.Fatalf("marker %+v", c)
				}
				got = append(got, c.tp)
			}
			slices.SortFunc(got, cmpTP)
			if !slices.Equal(got, []kernel.TopicPartition{tp("t", 0), tp("t", 2), tp("u", 1)}) {
				t.Fatalf("markers to %v", got)
			}
			var states []txnState
			for _, r := range e.c.records(t, e.txnTP("a")) {
				states = append(states, r.d.State)
			}
			prep, comp := stPrepareAbort, stCompleteAbort
			if commit {
				prep, comp = stPrepareCommit, stCompleteCommit
			}
			if !slices.Equal(states, []txnState{stEmpty, stOngoing, stOngoing, prep, comp}) {
				t.Fatalf("records %v", states)
			}
			// A retried EndTxn is answered OK; the other outcome is INVALID_TXN_STATE.
			if err := e.endTxn("a", pid, epoch, commit, 4); err != nil {
				t.Fatalf("retried end: %v", err)
			}
			if err := e.endTxn("a", pid, epoch, !commit, 4); err != kerr.InvalidTxnState {
				t.Fatalf("opposite end: %v", err)
			}
			// The next transaction starts from Complete*.
			if err := e.addOne("a", pid, epoch, tp("t", 1)); err != nil {
				t.Fatal(err)
			}
			if d := e.describe("a"); d.State != "Ongoing" || len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 1 {
				t.Fatalf("next txn: %+v", d)
			}
		})
	}
}

func TestStateMachineErrors(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	if err := e.addOne("nobody", 1, 0, tp("t", 0)); err != kerr.InvalidProducerIDMapping {
		t.Fatalf("unknown id: %v", err)
	}
	if err := e.addOne("a", pid+1, epoch, tp("t", 0)); err != kerr.InvalidProducerIDMapping {
		t.Fatalf("wrong pid: %v", err)
	}
	if err := e.endTxn("a", pid, epoch, true, 4); err != kerr.InvalidTxnState {
		t.Fatalf("end of Empty: %v", err)
	}
	if err := e.endTxn("a", pid, epoch+1, true, 4); err != kerr.ProducerFenced {
		t.Fatalf("end wrong epoch: %v", err)
	}
	if err := e.endTxn("a", pid, epoch+1, true, 1); err != kerr.InvalidProducerEpoch {
		t.Fatalf("end wrong epoch v1: %v", err)
	}
	if err := e.endTxn("nobody", 1, 0, true, 4); err != kerr.InvalidProducerIDMapping {
		t.Fatalf("end unknown: %v", err)
	}
	res := e.addParts("a", pid, epoch, 3, tp("t", 0), tp("t", 9), tp("nope", 0))
	if res[tp("t", 0)] != kerr.OperationNotAttempted || res[tp("t", 9)] != kerr.UnknownTopicOrPartition || res[tp("nope", 0)] != kerr.UnknownTopicOrPartition {
		t.Fatalf("unknown partitions: %v", res)
	}
	if st := e.state("a"); st != "Empty" {
		t.Fatalf("state after refused add: %s", st)
	}

	// While the markers are being written: Prepare* answers CONCURRENT_TRANSACTIONS
	// to everything but the opposite EndTxn (INVALID_TXN_STATE).
	release := e.c.holdMarkers()
	defer release()
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.endTxn("a", pid, epoch, true, 4); err != nil {
		t.Fatal(err)
	}
	if st := e.state("a"); st != "PrepareCommit" {
		t.Fatalf("state %s", st)
	}
	if err := e.endTxn("a", pid, epoch, true, 4); err != kerr.ConcurrentTransactions {
		t.Fatalf("retried end during prepare: %v", err)
	}
	if err := e.endTxn("a", pid, epoch, false, 4); err != kerr.InvalidTxnState {
		t.Fatalf("abort during prepare commit: %v", err)
	}
	if err := e.addOne("a", pid, epoch, tp("t", 1)); err != kerr.ConcurrentTransactions {
		t.Fatalf("add during prepare: %v", err)
	}
	if _, _, err := e.initPID("a", 60000, -1, -1); err != kerr.ConcurrentTransactions {
		t.Fatalf("init during prepare: %v", err)
	}
	release()
	e.waitState("a", "CompleteCommit")
}

func TestZombieFencing(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	// A new instance: the ongoing transaction is aborted with a bumped epoch and the
	// new instance is told to retry.
	if _, _, err := e.initPID("a", 60000, -1, -1); err != kerr.ConcurrentTransactions {
		t.Fatalf("init over ongoing: %v", err)
	}
	e.waitState("a", "CompleteAbort")
	calls := e.c.markerCalls()
	if len(calls) != 1 || calls[0].m.Commit || calls[0].m.ProducerEpoch != epoch+1 {
		t.Fatalf("fence markers %+v", calls)
	}
	// The zombie can neither commit nor add.
	if err := e.endTxn("a", pid, epoch, true, 4); err != kerr.ProducerFenced {
		t.Fatalf("zombie end: %v", err)
	}
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != kerr.ProducerFenced {
		t.Fatalf("zombie add: %v", err)
	}
	_, epoch2 := e.initOK("a")
	if epoch2 != epoch+2 {
		t.Fatalf("new instance epoch %d, want %d", epoch2, epoch+2)
	}
}

func TestTransactionTimeout(t *testing.T) {
	e := newEnv(t)
	id := "slow"
	r := kmsg.NewPtrInitProducerIDRequest()
	r.TransactionalID, r.TransactionTimeoutMillis = &id, 1000
	resp := e.call(r, 5).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatal(resp.ErrorCode)
	}
	pid, epoch := resp.ProducerID, resp.ProducerEpoch
	if err := e.addOne(id, pid, epoch, tp("t", 1)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(1000)
	time.Sleep(20 * time.Millisecond) // a few sweeps (only to catch an early abort)
	if st := e.state(id); st != "Ongoing" {
		t.Fatalf("aborted early: %s", st)
	}
	e.clock.Advance(2)
	e.waitState(id, "CompleteAbort")
	d := e.describe(id)
	if d.ProducerEpoch != epoch+1 {
		t.Fatalf("timeout abort did not bump: %+v", d)
	}
	if calls := e.c.markerCalls(); len(calls) != 1 || calls[0].m.Commit || calls[0].m.ProducerEpoch != epoch+1 {
		t.Fatalf("markers %+v", calls)
	}
	if err := e.endTxn(id, pid, epoch, true, 4); err != kerr.ProducerFenced {
		t.Fatalf("end after timeout: %v", err)
	}
	if e.m.timedOut.Value() != 1 {
		t.Fatalf("timed out counter %d", e.m.timedOut.Value())
	}
}

func TestTransactionalIDExpiry(t *testing.T) {
	e := newEnv(t, withConfigs("transactional.id.expiration.ms", "5000"))
	e.initOK("a")
	// b has an ongoing transaction: it does not expire.
	pb, eb := e.initOK("b")
	if err := e.addOne("b", pb, eb, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(5000)
	e.waitFor(func() bool { return e.state("a") == kerr.TransactionalIDNotFound.Error() })
	if st := e.state("b"); st != "Ongoing" {
		t.Fatalf("an ongoing id expired: %s", st)
	}
	recs := e.c.records(t, e.txnTP("a"))
	last := -1
	for i, r := range recs {
		if r.id == "a" {
			last = i
		}
	}
	if last < 0 || recs[last].d != nil {
		t.Fatalf("no tombstone for a: %+v", recs)
	}
	// The id starts over.
	if _, ep := e.initOK("a"); ep != 0 {
		t.Fatalf("re-created id epoch %d", ep)
	}
}

func TestRecoveryResumesPrepareCommit(t *testing.T) {
	c := newFakeCluster()
	e := startEnv(t, c)
	pid, epoch := e.initOK("a")
	if err := e.addOne("a", pid, epoch, tp("t", 0), tp("u", 0)); err != nil {
		t.Fatal(err)
	}
	release := c.holdMarkers()
	if err := e.endTxn("a", pid, epoch, true, 4); err != nil {
		t.Fatal(err)
	}
	e.stop() // the coordinator dies in PrepareCommit
	release()
	if n := len(c.markerCalls()); n != 0 {
		t.Fatalf("%d markers written by a stopped coordinator", n)
	}
	c.setLeader(e.txnTP("a"), true, 7) // a new leader epoch
	e2 := startEnv(t, c)
	e2.waitState("a", "CompleteCommit")
	calls := c.markerCalls()
	if len(calls) != 2 {
		t.Fatalf("markers %+v", calls)
	}
	for _, cl := range calls {
		if !cl.m.Commit || cl.m.CoordinatorEpoch != 7 || cl.m.ProducerEpoch != epoch {
			t.Fatalf("marker %+v", cl)
		}
	}
	// State survived: the producer continues.
	if err := e2.addOne("a", pid, epoch, tp("t", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestLeadershipAndLoading(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	part := e.txnTP("a")
	e.c.setLeader(part, false, 0)
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != kerr.NotCoordinator {
		t.Fatalf("not leader: %v", err)
	}
	if _, _, err := e.initPID("a", 1000, -1, -1); err != kerr.NotCoordinator {
		t.Fatalf("init not leader: %v", err)
	}
	// Leader again, but the replay is slow: COORDINATOR_LOAD_IN_PROGRESS.
	e.m.LoadWaitMs = 0
	hold := make(chan struct{})
	e.c.mu.Lock()
	e.c.readHold = hold
	e.c.mu.Unlock()
	e.c.setLeader(part, true, 1)
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("loading: %v", err)
	}
	lr := kmsg.NewPtrListTransactionsRequest()
	if got := e.call(lr, 0).(*kmsg.ListTransactionsResponse).ErrorCode; got != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while loading: %d", got)
	}
	e.c.mu.Lock()
	e.c.readHold = nil
	e.c.mu.Unlock()
	close(hold)
	e.waitFor(func() bool { return e.addOne("a", pid, epoch, tp("t", 0)) == nil })
}

func TestMarkersRetryAndSkipDeletedTopics(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	if err := e.addOne("a", pid, epoch, tp("t", 0), tp("u", 0)); err != nil {
		t.Fatal(err)
	}
	e.c.failMarkers(tp("t", 0), kernel.ErrNotLeader, fmt.Errorf("wrapped: %w", kernel.ErrNotLeader), context.DeadlineExceeded)
	e.c.deleteTopic("u")
	if err := e.endTxn("a", pid, epoch, true, 4); err != nil {
		t.Fatal(err)
	}
	e.waitState("a", "CompleteCommit")
	calls := e.c.markerCalls()
	if len(calls) != 1 || calls[0].tp != tp("t", 0) {
		t.Fatalf("markers %+v", calls)
	}
}

func TestFencedMarkerDoesNotComplete(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	e.c.failMarkers(tp("t", 0), fmt.Errorf("x: %w", kernel.ErrTxnCoordinatorFenced))
	if err := e.endTxn("a", pid, epoch, false, 4); err != nil {
		t.Fatal(err)
	}
	e.waitFor(func() bool {
		e.c.markersMu.Lock()
		defer e.c.markersMu.Unlock()
		return len(e.c.markerErrs[tp("t", 0)]) == 0
	})
	for range 20 { // a few sweeps: nothing completes it
		if st := e.state("a"); st != "PrepareAbort" {
			t.Fatalf("state %s", st)
		}
	}
}

func TestAppendFailureReloads(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	e.c.failApp.Store(1)
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != kerr.CoordinatorNotAvailable {
		t.Fatalf("failed append: %v", err)
	}
	// Reloaded from the log: still Empty, and the retry works.
	e.waitFor(func() bool { return e.addOne("a", pid, epoch, tp("t", 0)) == nil })
	if st := e.state("a"); st != "Ongoing" {
		t.Fatalf("state %s", st)
	}
}

func TestAddOffsetsToTxn(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	r := kmsg.NewPtrAddOffsetsToTxnRequest()
	r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "a", pid, epoch, "g1"
	if code := e.call(r, 3).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != 0 {
		t.Fatal(code)
	}
	d := e.describe("a")
	want := partitionFor("g1", 5) // offsets.topic.num.partitions: the topic does not exist yet
	if len(d.Topics) != 1 || d.Topics[0].Topic != offsetsTopic || d.Topics[0].Partitions[0] != want {
		t.Fatalf("describe %+v", d)
	}
	r.ProducerEpoch = epoch + 1
	if code := e.call(r, 1).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("v1 fenced: %d", code)
	}
	// With the topic: its partition count.
	e.c.addTopic(offsetsTopic, 7)
	if got := e.m.offsetsPartition("g1"); got.Partition != partitionFor("g1", 7) {
		t.Fatalf("partition %v", got)
	}
}

func TestVerify(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	ctx := context.Background()
	if err := e.m.VerifyTxnPartition(ctx, "a", pid, epoch, tp("t", 0), false); !errIs(err, kerr.InvalidTxnState) {
		t.Fatalf("empty txn: %v", err)
	}
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.m.VerifyTxnPartition(ctx, "a", pid, epoch, tp("t", 0), false); err != nil {
		t.Fatalf("added: %v", err)
	}
	for _, tc := range []struct {
		name  string
		id    string
		pid   int64
		epoch int16
		tp    kernel.TopicPartition
		want  *kerr.Error
	}{
		{"other partition", "a", pid, epoch, tp("t", 1), kerr.InvalidTxnState},
		{"old epoch", "a", pid, epoch - 1, tp("t", 0), kerr.InvalidProducerEpoch},
		{"other pid", "a", pid + 9, epoch, tp("t", 0), kerr.InvalidProducerIDMapping},
		{"unknown id", "zz", pid, epoch, tp("t", 0), kerr.InvalidProducerIDMapping},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.m.VerifyTxnPartition(ctx, tc.id, tc.pid, tc.epoch, tc.tp, false); !errIs(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Between leadership changes (the image still names this broker): a retriable
	// NOT_COORDINATOR.
	e.c.setLeader(e.txnTP("a"), false, 0)
	if err := e.m.VerifyTxnPartition(ctx, "a", pid, epoch, tp("t", 0), false); !errIs(err, kerr.NotCoordinator) {
		t.Fatalf("not coordinator: %v", err)
	}
	e.c.setLeader(e.txnTP("a"), true, 1)

	// The v4 broker form: VerifyOnly checks without adding; a plain v4 entry adds.
	e.waitFor(func() bool { _, err := e.m.coordinatorFor(ctx, "a"); return err == nil })
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "a", pid, epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "t", []int32{0, 2}
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{tt}
	tx2 := tx
	tx2.VerifyOnly = false
	tx2.TransactionalID = "b"
	pb, eb := e.initOK("b")
	tx2.ProducerID, tx2.ProducerEpoch = pb, eb
	r.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx, tx2}
	resp := e.call(r, 4).(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 || len(resp.Transactions) != 2 {
		t.Fatalf("v4 resp %+v", resp)
	}
	got := resp.Transactions[0].Topics[0].Partitions
	if got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("verify only: %+v", got)
	}
	for _, p := range resp.Transactions[1].Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("v4 add: %+v", resp.Transactions[1])
		}
	}
	if d := e.describe("a"); len(d.Topics[0].Partitions) != 1 {
		t.Fatalf("VerifyOnly added partitions: %+v", d)
	}
	if d := e.describe("b"); d.State != "Ongoing" || len(d.Topics[0].Partitions) != 2 {
		t.Fatalf("v4 add: %+v", d)
	}
}

func errIs(err error, target error) bool {
	if target == nil {
		return err == nil
	}
	for e := err; e != nil; {
		if e == target {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

func TestDescribeAndList(t *testing.T) {
	e := newEnv(t)
	pa, ea := e.initOK("a")
	pb, eb := e.initOK("b")
	e.initOK("c")
	if err := e.addOne("a", pa, ea, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.addOne("b", pb, eb, tp("t", 1)); err != nil {
		t.Fatal(err)
	}
	if err := e.endTxn("b", pb, eb, true, 4); err != nil {
		t.Fatal(err)
	}
	e.waitState("b", "CompleteCommit")
	if d := e.describe("zz"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("unknown: %+v", d)
	}
	if d := e.describe(""); d.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty: %+v", d)
	}
	list := func(version int16, mut func(*kmsg.ListTransactionsRequest)) *kmsg.ListTransactionsResponse {
		r := kmsg.NewPtrListTransactionsRequest()
		mut(r)
		return e.call(r, version).(*kmsg.ListTransactionsResponse)
	}
	ids := func(r *kmsg.ListTransactionsResponse) []string {
		var out []string
		for _, s := range r.TransactionStates {
			out = append(out, s.TransactionalID+":"+s.TransactionState)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		version int16
		mut     func(*kmsg.ListTransactionsRequest)
		want    []string
	}{
		{"all", 0, func(*kmsg.ListTransactionsRequest) {}, []string{"a:Ongoing", "b:CompleteCommit", "c:Empty"}},
		{"state", 0, func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Ongoing", "Bogus"} }, []string{"a:Ongoing"}},
		{"pid", 0, func(r *kmsg.ListTransactionsRequest) { r.ProducerIDFilters = []int64{pb} }, []string{"b:CompleteCommit"}},
		{"duration", 1, func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 1000 }, []string{"c:Empty"}},
		{"pattern", 2, func(r *kmsg.ListTransactionsRequest) { s := "^[ab]$"; r.TransactionalIDPattern = &s }, []string{"a:Ongoing", "b:CompleteCommit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(list(tc.version, tc.mut)); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if r := list(0, func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Bogus"} }); !slices.Equal(r.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("unknown filters %v", r.UnknownStateFilters)
	}
	if r := list(2, func(r *kmsg.ListTransactionsRequest) { s := "("; r.TransactionalIDPattern = &s }); r.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad regex: %d", r.ErrorCode)
	}
}

func TestAuthorization(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	deny := denyAuthz{}
	call := func(body kmsg.Request, version int16, h kernel.Handler) kmsg.Response {
		r := e.req(body, version)
		r.Authorizer = deny
		resp, err := h(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg
	}
	ir := kmsg.NewPtrInitProducerIDRequest()
	if c := call(ir, 4, kernel.Typed(e.m.handleInitProducerID)).(*kmsg.InitProducerIDResponse).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("idempotent: %d", c)
	}
	id := "a"
	ir.TransactionalID, ir.TransactionTimeoutMillis = &id, 1000
	if c := call(ir, 4, kernel.Typed(e.m.handleInitProducerID)).(*kmsg.InitProducerIDResponse).ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional: %d", c)
	}
	ar := kmsg.NewPtrAddPartitionsToTxnRequest()
	ar.TransactionalID, ar.ProducerID, ar.ProducerEpoch = "a", pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	ar.Topics = append(ar.Topics, at)
	if c := call(ar, 3, kernel.Typed(e.m.handleAddPartitionsToTxn)).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("add: %d", c)
	}
	ar4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	if c := call(ar4, 4, kernel.Typed(e.m.handleAddPartitionsToTxn)).(*kmsg.AddPartitionsToTxnResponse).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("add v4: %d", c)
	}
	er := kmsg.NewPtrEndTxnRequest()
	er.TransactionalID = "a"
	if c := call(er, 3, kernel.Typed(e.m.handleEndTxn)).(*kmsg.EndTxnResponse).ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("end: %d", c)
	}
	dr := kmsg.NewPtrDescribeTransactionsRequest()
	dr.TransactionalIDs = []string{"a"}
	if c := call(dr, 0, kernel.Typed(e.m.handleDescribeTransactions)).(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("describe: %d", c)
	}
	if n := len(call(kmsg.NewPtrListTransactionsRequest(), 0, kernel.Typed(e.m.handleListTransactions)).(*kmsg.ListTransactionsResponse).TransactionStates); n != 0 {
		t.Fatalf("list shows %d unauthorized ids", n)
	}
}

type denyAuthz struct{}

func (denyAuthz) Authorize(context.Context, kernel.Principal, string, kernel.Operation, kernel.Resource) bool {
	return false
}

// TestHammer runs many producers' transactions concurrently, some sharing ids (so
// fencing and CONCURRENT_TRANSACTIONS interleave), and checks that every id ends in a
// consistent state that a reload reproduces.
func TestHammer(t *testing.T) {
	c := newFakeCluster()
	e := startEnv(t, c)
	const workers, loops = 8, 30
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("h%d", w%4) // two workers per id
			for i := range loops {
				pid, epoch, err := e.initPID(id, 60000, -1, -1)
				if err != nil {
					continue
				}
				if e.addOne(id, pid, epoch, tp("t", int32(i%3)), tp("u", int32(i%2))) != nil {
					continue
				}
				_ = e.endTxn(id, pid, epoch, i%2 == 0, 4)
			}
		})
	}
	wg.Wait()
	want := map[string]string{}
	for i := range 4 {
		id := fmt.Sprintf("h%d", i)
		e.waitFor(func() bool {
			st := e.state(id)
			return st != "PrepareCommit" && st != "PrepareAbort"
		})
		d := e.describe(id)
		want[id] = fmt.Sprintf("%s/%d/%d", d.State, d.ProducerID, d.ProducerEpoch)
	}
	e.stop()
	e2 := startEnv(t, c)
	for id, w := range want {
		var d kmsg.DescribeTransactionsResponseTransactionState
		e2.waitFor(func() bool { d = e2.describe(id); return d.ErrorCode == 0 })
		if got := fmt.Sprintf("%s/%d/%d", d.State, d.ProducerID, d.ProducerEpoch); got != w {
			t.Fatalf("%s after reload: %s, want %s", id, got, w)
		}
	}
}

func TestMarkerConcurrency(t *testing.T) {
	e := newEnv(t, func(m *Module, _ *fakeCluster) { m.MarkerPartitionConcurrency = 4 })
	e.c.addTopic("w", 6)
	pid, epoch := e.initOK("wide")
	var all []kernel.TopicPartition
	for p := range int32(6) {
		all = append(all, tp("w", p))
	}
	if err := e.addOne("wide", pid, epoch, all...); err != nil {
		t.Fatal(err)
	}
	release := e.c.holdMarkers()
	if err := e.endTxn("wide", pid, epoch, true, 4); err != nil {
		t.Fatal(err)
	}
	// One transaction's partitions in parallel, bounded.
	e.waitFor(func() bool { return e.c.inFlight.Load() == 4 })
	release()
	e.waitState("wide", "CompleteCommit")
	if mx := e.c.maxFlight.Load(); mx != 4 {
		t.Fatalf("max markers in flight %d, want 4", mx)
	}

	// Transactions are independent: one stuck on a partition that keeps failing does
	// not hold up another.
	p1, e1 := e.initOK("stuck")
	p2, e2 := e.initOK("free")
	if err := e.addOne("stuck", p1, e1, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.addOne("free", p2, e2, tp("t", 1)); err != nil {
		t.Fatal(err)
	}
	e.c.failMarkers(tp("t", 0), slices.Repeat([]error{kernel.ErrNotLeader}, 100_000)...)
	if err := e.endTxn("stuck", p1, e1, true, 4); err != nil {
		t.Fatal(err)
	}
	if err := e.endTxn("free", p2, e2, false, 4); err != nil {
		t.Fatal(err)
	}
	e.waitState("free", "CompleteAbort")
	if st := e.state("stuck"); st != "PrepareCommit" {
		t.Fatalf("stuck: %s", st)
	}
	e.c.failMarkers(tp("t", 0))
	e.waitState("stuck", "CompleteCommit")
}

// selectiveAuthz denies the listed (operation, resource type, name) triples.
type selectiveAuthz map[string]bool

func (a selectiveAuthz) Authorize(_ context.Context, _ kernel.Principal, _ string, op kernel.Operation, r kernel.Resource) bool {
	return !a[fmt.Sprint(op, "/", r.Type, "/", r.Name)]
}

func TestResourceAuthorization(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	authz := selectiveAuthz{
		fmt.Sprint(kernel.OpWrite, "/", kernel.ResTopic, "/", "u"):    true,
		fmt.Sprint(kernel.OpRead, "/", kernel.ResGroup, "/", "g"):     true,
		fmt.Sprint(kernel.OpDescribe, "/", kernel.ResTopic, "/", "t"): true,
	}
	do := func(body kmsg.Request, version int16, h kernel.Handler) kmsg.Response {
		r := e.req(body, version)
		r.Authorizer = authz
		resp, err := h(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg
	}
	ar := kmsg.NewPtrAddPartitionsToTxnRequest()
	ar.TransactionalID, ar.ProducerID, ar.ProducerEpoch = "a", pid, epoch
	for _, topic := range []string{"t", "u"} {
		at := kmsg.NewAddPartitionsToTxnRequestTopic()
		at.Topic, at.Partitions = topic, []int32{0}
		ar.Topics = append(ar.Topics, at)
	}
	resp := do(ar, 3, kernel.Typed(e.m.handleAddPartitionsToTxn)).(*kmsg.AddPartitionsToTxnResponse)
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if got["t"] != kerr.OperationNotAttempted.Code || got["u"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("topic authorization: %v", got)
	}
	or := kmsg.NewPtrAddOffsetsToTxnRequest()
	or.TransactionalID, or.ProducerID, or.ProducerEpoch, or.Group = "a", pid, epoch, "g"
	if c := do(or, 3, kernel.Typed(e.m.handleAddOffsetsToTxn)).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("group authorization: %d", c)
	}
	// DescribeTransactions hides partitions of topics the caller may not describe.
	if err := e.addOne("a", pid, epoch, tp("t", 0), tp("u", 0)); err != nil {
		t.Fatal(err)
	}
	dr := kmsg.NewPtrDescribeTransactionsRequest()
	dr.TransactionalIDs = []string{"a"}
	st := do(dr, 0, kernel.Typed(e.m.handleDescribeTransactions)).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
	if st.ErrorCode != 0 || len(st.Topics) != 1 || st.Topics[0].Topic != "u" {
		t.Fatalf("describe topics: %+v", st.Topics)
	}
}

// TestConcurrentWait: with concurrent_wait_ms, a request that would get
// CONCURRENT_TRANSACTIONS while the previous transaction completes waits for it.
func TestConcurrentWait(t *testing.T) {
	e := newEnv(t, func(m *Module, _ *fakeCluster) { m.ConcurrentWaitMs = 10_000 })
	pid, epoch := e.initOK("a")
	if err := e.addOne("a", pid, epoch, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	release := e.c.holdMarkers()
	if err := e.endTxn("a", pid, epoch, true, 4); err != nil {
		t.Fatal(err)
	}
	done := make(chan *kerr.Error, 1)
	go func() { done <- e.addOne("a", pid, epoch, tp("t", 1)) }()
	select {
	case err := <-done:
		t.Fatalf("answered while the markers are held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("add after the commit completed: %v", err)
	}
	if st := e.state("a"); st != "Ongoing" {
		t.Fatalf("state %s", st)
	}
	// A new instance over an ongoing transaction: fenced, aborted, then answered with
	// the epoch bumped twice.
	_, epoch2, err := e.initPID("a", 60000, -1, -1)
	if err != nil || epoch2 != epoch+2 {
		t.Fatalf("init over ongoing: epoch %d %v", epoch2, err)
	}
	// The wait is bounded.
	e.m.ConcurrentWaitMs = 30
	pid3, epoch3 := e.initOK("b")
	if err := e.addOne("b", pid3, epoch3, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	release = e.c.holdMarkers()
	defer release()
	if err := e.endTxn("b", pid3, epoch3, true, 4); err != nil {
		t.Fatal(err)
	}
	if err := e.addOne("b", pid3, epoch3, tp("t", 1)); err != kerr.ConcurrentTransactions {
		t.Fatalf("bounded wait: %v", err)
	}
}

// TestInitNewIDWhileUnloading: the shard is unloaded while a new id's producer id is
// being reserved; the request gets NOT_COORDINATOR (no entry is created or written).
func TestInitNewIDWhileUnloading(t *testing.T) {
	e := newEnv(t)
	s, kerrr := e.m.coordinatorFor(context.Background(), "n")
	if kerrr != nil {
		t.Fatal(kerrr)
	}
	e.m.pids = &pidBlocks{alloc: allocFunc(func(ctx context.Context, n int32) (int64, error) {
		s.Unload(kerr.NotCoordinator)
		return e.c.AllocateProducerIDs(ctx, n)
	})}
	if _, _, err := s.initProducerID(context.Background(), "n", 1000, nil); err != kerr.NotCoordinator {
		t.Fatalf("got %v", err)
	}
}

type allocFunc func(context.Context, int32) (int64, error)

func (f allocFunc) AllocateProducerIDs(ctx context.Context, n int32) (int64, error) { return f(ctx, n) }

// TestDescribeShowsUnmarkedPartitions: while a transaction's markers are being
// written, DescribeTransactions lists only the partitions still without one.
func TestDescribeShowsUnmarkedPartitions(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.initOK("a")
	if err := e.addOne("a", pid, epoch, tp("t", 0), tp("t", 1)); err != nil {
		t.Fatal(err)
	}
	e.c.failMarkers(tp("t", 1), slices.Repeat([]error{kernel.ErrNotLeader}, 100_000)...)
	if err := e.endTxn("a", pid, epoch, true, 4); err != nil {
		t.Fatal(err)
	}
	e.waitFor(func() bool {
		d := e.describe("a")
		return d.State == "PrepareCommit" && len(d.Topics) == 1 && slices.Equal(d.Topics[0].Partitions, []int32{1})
	})
	e.c.failMarkers(tp("t", 1))
	e.waitState("a", "CompleteCommit")
	if d := e.describe("a"); len(d.Topics) != 0 {
		t.Fatalf("complete: %+v", d.Topics)
	}
}

// byTypeAuthz denies everything but answers "Write on some topic" with anyTopic.
type byTypeAuthz struct{ anyTopic bool }

func (byTypeAuthz) Authorize(context.Context, kernel.Principal, string, kernel.Operation, kernel.Resource) bool {
	return false
}

func (a byTypeAuthz) AuthorizeByResourceType(_ context.Context, _ kernel.Principal, _ string, op kernel.Operation, typ kernel.ResourceType) bool {
	return a.anyTopic && op == kernel.OpWrite && typ == kernel.ResTopic
}

// TestIdempotentInitByResourceType: without IDEMPOTENT_WRITE on the cluster, an
// idempotent InitProducerId is allowed exactly when the authorizer says the principal
// may write some topic (Kafka 3.0+).
func TestIdempotentInitByResourceType(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		anyTopic bool
		want     int16
	}{{true, 0}, {false, kerr.ClusterAuthorizationFailed.Code}} {
		r := e.req(kmsg.NewPtrInitProducerIDRequest(), 4)
		r.Authorizer = byTypeAuthz{anyTopic: tc.anyTopic}
		resp, err := kernel.Typed(e.m.handleInitProducerID)(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		ir := resp.Msg.(*kmsg.InitProducerIDResponse)
		if ir.ErrorCode != tc.want || (tc.want == 0) != (ir.ProducerID >= 0) {
			t.Errorf("write on some topic %v: code %d, producer id %d; want code %d", tc.anyTopic, ir.ErrorCode, ir.ProducerID, tc.want)
		}
	}
}
