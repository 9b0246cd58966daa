package txn

import (
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// txnState is a transactional id's state, with Kafka's ids (the value's State field in
// __transaction_state). Dead and PrepareEpochFence are never written: Dead is a
// tombstone, and the epoch fence is folded into the PrepareAbort record it precedes.
type txnState int8

const (
	stEmpty             txnState = 0
	stOngoing           txnState = 1
	stPrepareCommit     txnState = 2
	stPrepareAbort      txnState = 3
	stCompleteCommit    txnState = 4
	stCompleteAbort     txnState = 5
	stDead              txnState = 6
	stPrepareEpochFence txnState = 7
)

func (s txnState) String() string { return kmsg.TransactionState(s).String() }

// parseState returns the state named name (DescribeTransactions/ListTransactions names).
func parseState(name string) (txnState, bool) {
	for s := stEmpty; s <= stPrepareEpochFence; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

func (s txnState) isPrepare() bool  { return s == stPrepareCommit || s == stPrepareAbort }
func (s txnState) isComplete() bool { return s == stCompleteCommit || s == stCompleteAbort }

// expirable: a transactional id in this state may be forgotten after
// transactional.id.expiration.ms without hearing from it.
func (s txnState) expirable() bool { return s == stEmpty || s.isComplete() }

// txnData is one transactional id's durable state: exactly what one
// __transaction_state value holds (plus LastProducerID and LastEpoch, which only live
// in memory, as in Kafka: they let a KIP-360 retry of an InitProducerId whose answer
// was lost get the same answer again).
type txnData struct {
	ProducerID     int64
	LastProducerID int64 // -1: none
	Epoch          int16 // -1: never handed out
	LastEpoch      int16 // -1: none
	TimeoutMs      int32
	State          txnState
	Partitions     []kernel.TopicPartition // sorted, unique; empty unless Ongoing or Prepare*
	StartMs        int64                   // first AddPartitions of the transaction; -1 when none
	UpdateMs       int64
	// ClientTV is the transaction version the transaction runs under: 2 when its
	// client uses KIP-890 part 2 (EndTxn v5+ bumps the epoch; partitions are added
	// by the produce path), else 0. Set when a transaction starts and by EndTxn, so in
	// Prepare* and Complete* it is the version of the EndTxn that ended it.
	ClientTV int16
	// Next is set in a Prepare* state of version 2 whose epoch bump used up the
	// epochs (Prepare* at MaxInt16): the producer id, at epoch 0, that the Complete*
	// record switches to and that EndTxn already answered. nil otherwise.
	Next *pidEpoch
}

func (d txnData) clone() txnData {
	d.Partitions = slices.Clone(d.Partitions)
	return d
}

func (d *txnData) has(tp kernel.TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(d.Partitions, tp, cmpTP)
	return ok
}

func cmpTP(a, b kernel.TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// addPartitions returns ps merged into d's partitions (sorted, unique) and whether any
// was new.
func (d *txnData) addPartitions(ps []kernel.TopicPartition) bool {
	added := false
	for _, tp := range ps {
		i, ok := slices.BinarySearchFunc(d.Partitions, tp, cmpTP)
		if !ok {
			d.Partitions = slices.Insert(d.Partitions, i, tp)
			added = true
		}
	}
	return added
}

// txnMeta is a transactional id as its coordinator holds it. Guarded by its shard's
// mutex.
//
// Invariant: cur is what the log holds (the last record written for the id, or the
// record about to be written for a new id with Epoch -1, which no client has seen).
// pending is the transition being written; while it is set, no other transition of
// the id starts (requests get CONCURRENT_TRANSACTIONS), so the log's order of an id's
// records is the order of its transitions, and a transition is answered only after
// its record is committed (cur = *pending happens after the append returned).
type txnMeta struct {
	id      string
	cur     txnData
	pending *txnData
	// marked are the partitions of the current Prepare* transaction whose marker is
	// written (DescribeTransactions leaves them out, as Kafka). Memory only; reset by
	// every transition.
	marked map[kernel.TopicPartition]bool
}

// epochExhausted: an epoch this high gets a new producer id on the next
// InitProducerId (Kafka keeps the last one for fencing the producer's transaction).
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// pidEpoch is the producer id and epoch an InitProducerId (v3+, KIP-360) says it had.
type pidEpoch struct {
	id    int64
	epoch int16
}

// initTransit is InitProducerId on an existing transactional id. It returns the next
// state to write, and fence = true when that state aborts the id's ongoing transaction
// with a bumped epoch (the caller then writes markers and answers
// CONCURRENT_TRANSACTIONS so the client retries until the abort is complete). newID is
// called only when the epoch is exhausted.
func (t *txnMeta) initTransit(timeoutMs int32, expected *pidEpoch, newID func() (int64, *kerr.Error), nowMs int64) (next *txnData, fence bool, e *kerr.Error) {
	cur := &t.cur
	if t.pending != nil {
		return nil, false, kerr.ConcurrentTransactions
	}
	if expected != nil {
		// A producer may re-initialise with its own id when: the id's metadata was just
		// created (no epoch yet: it recovers from UNKNOWN_PRODUCER_ID); its id is the
		// current one (the epoch is checked below); or its id is the previous one and
		// its epoch was exhausted (a retry of the rotation whose answer was lost).
		ok := cur.Epoch == -1 || expected.id == cur.ProducerID ||
			(expected.id == cur.LastProducerID && epochExhausted(expected.epoch))
		if !ok {
			return nil, false, kerr.ProducerFenced
		}
	}
	switch cur.State {
	case stPrepareCommit, stPrepareAbort:
		return nil, false, kerr.ConcurrentTransactions
	case stOngoing:
		// Fence the zombie: abort its transaction with a bumped epoch, so its
		// in-flight writes and its EndTxn are refused. The bumped epoch is never
		// handed out: the retry bumps it again (or rotates the id if exhausted).
		if cur.Epoch == math.MaxInt16 {
			return nil, false, kerr.UnknownServerError // never handed out: rotation happens first
		}
		n := cur.clone()
		n.Epoch++
		n.LastEpoch = -1
		n.State = stPrepareAbort
		n.UpdateMs = nowMs
		return &n, true, nil
	case stEmpty, stCompleteCommit, stCompleteAbort:
	default:
		return nil, false, kerr.ConcurrentTransactions // Dead: being expired
	}
	n := cur.clone()
	n.TimeoutMs = timeoutMs
	n.State = stEmpty
	n.Partitions = nil
	n.StartMs = -1
	n.UpdateMs = nowMs
	if epochExhausted(cur.Epoch) && (expected == nil || expected.epoch == cur.Epoch) {
		id, e := newID()
		if e != nil {
			return nil, false, e
		}
		n.LastProducerID = cur.ProducerID
		n.ProducerID = id
		n.Epoch = 0
		n.LastEpoch = -1
		if expected != nil {
			n.LastEpoch = cur.Epoch
		}
		return &n, false, nil
	}
	switch {
	case expected == nil:
		// A new producer instance: bump, forget the previous epoch (a retry of an old
		// instance is fenced). For a new id, -1 becomes 0.
		n.Epoch, n.LastEpoch = cur.Epoch+1, -1
	case cur.Epoch == -1 || expected.epoch == cur.Epoch:
		if epochExhausted(cur.Epoch) {
			return nil, false, kerr.ProducerFenced // unreachable: rotated above
		}
		n.Epoch, n.LastEpoch = cur.Epoch+1, cur.Epoch
	case expected.epoch == cur.LastEpoch:
		// A retry of a bump whose answer was lost: the same answer again.
		n.Epoch, n.LastEpoch = cur.Epoch, cur.LastEpoch
	default:
		return nil, false, kerr.ProducerFenced
	}
	return &n, false, nil
}

// checkProducer checks a request's producer id and epoch against the id's current
// ones and that no transition is being written.
func (t *txnMeta) checkProducer(pid int64, epoch int16) *kerr.Error {
	switch {
	case t.early(pid, epoch):
		return kerr.ConcurrentTransactions
	case t.cur.ProducerID != pid:
		return kerr.InvalidProducerIDMapping
	case t.cur.Epoch != epoch:
		return kerr.ProducerFenced
	case t.pending != nil:
		return kerr.ConcurrentTransactions
	}
	return nil
}

// early reports whether a request comes with the producer id and epoch that the
// id's ending transaction (version 2, Prepare* with a new producer id) handed out in
// its EndTxn answer before its markers were written: the client's next transaction
// arriving before this one completed. It is answered CONCURRENT_TRANSACTIONS, so the
// client retries once the Complete* record makes that id current.
func (t *txnMeta) early(pid int64, epoch int16) bool {
	n := t.cur.Next
	return n != nil && t.cur.State.isPrepare() && pid == n.id && epoch == n.epoch
}

// answer is the producer id and epoch an EndTxn v5+ answers for a transaction in
// state d: those of the Complete* state d leads to (the new producer id at epoch 0
// when d rotates it).
func (d *txnData) answer() pidEpoch {
	if d.Next != nil {
		return *d.Next
	}
	return pidEpoch{id: d.ProducerID, epoch: d.Epoch}
}

// addPartitionsTransit adds ps to the transaction (starting one if none is ongoing),
// which runs under transaction version tv when it starts here. A nil next with a nil
// error means nothing to write: the partitions are already in the ongoing
// transaction.
func (t *txnMeta) addPartitionsTransit(pid int64, epoch int16, ps []kernel.TopicPartition, tv int16, nowMs int64) (*txnData, *kerr.Error) {
	if e := t.checkProducer(pid, epoch); e != nil {
		return nil, e
	}
	cur := &t.cur
	switch cur.State {
	case stPrepareCommit, stPrepareAbort:
		return nil, kerr.ConcurrentTransactions
	case stOngoing:
		if !slices.ContainsFunc(ps, func(tp kernel.TopicPartition) bool { return !cur.has(tp) }) {
			return nil, nil
		}
	case stEmpty, stCompleteCommit, stCompleteAbort:
	default:
		return nil, kerr.ConcurrentTransactions
	}
	n := cur.clone()
	if cur.State != stOngoing {
		n.StartMs = nowMs
		n.Partitions = nil
		n.ClientTV = tv
	}
	n.addPartitions(ps)
	n.State = stOngoing
	n.UpdateMs = nowMs
	return &n, nil
}

// endTransit is EndTxn under transaction version tv (2 for EndTxn v5+, else 0). It
// returns the state to write (nil with a nil error: the transaction already ended
// this way, a retried EndTxn, answered OK) and the producer id and epoch to answer.
// newID is called only when a version 2 epoch bump uses up the epochs.
//
// Version 2 (KIP-890 part 2): every EndTxn bumps the epoch, and the markers are
// written at the bumped epoch, so a produce of the ended transaction that arrives
// late is refused by its partition (its epoch is older) instead of opening a
// transaction no coordinator knows. A retried EndTxn is recognised by the epoch: it
// comes at the epoch before the bump (or, after a rotation, with the previous
// producer id at its last epoch). An abort with no ongoing transaction is legal and
// bumps the epoch too: a client cannot know whether a failed produce added its
// partition. Two departures from Kafka, both answers a retry would get anyway: a
// request with the epoch an ending transaction already answered gets
// CONCURRENT_TRANSACTIONS (Kafka answers PRODUCER_FENCED), and so does one with the
// new producer id of a rotation still being completed.
func (t *txnMeta) endTransit(pid int64, epoch int16, commit bool, tv int16, newID func() (int64, *kerr.Error), nowMs int64) (*txnData, pidEpoch, *kerr.Error) {
	none := pidEpoch{id: -1, epoch: -1}
	cur := &t.cur
	v2 := cur.ClientTV >= 2
	retryOnBump := v2 && pid == cur.ProducerID && epoch+1 == cur.Epoch
	retryOnRotate := v2 && cur.State.isComplete() && pid != cur.ProducerID && pid == cur.LastProducerID &&
		epoch == math.MaxInt16-1 && cur.Epoch == 0
	retry := retryOnBump || retryOnRotate
	switch {
	case t.early(pid, epoch) || (v2 && cur.State.isPrepare() && pid == cur.ProducerID && epoch == cur.Epoch):
		return nil, none, kerr.ConcurrentTransactions
	case pid != cur.ProducerID && !retryOnRotate:
		return nil, none, kerr.InvalidProducerIDMapping
	case v2 && cur.State.isPrepare() && !retryOnBump,
		v2 && cur.State.isComplete() && !retry && epoch != cur.Epoch,
		!(v2 && (cur.State.isPrepare() || cur.State.isComplete())) && epoch != cur.Epoch:
		return nil, none, kerr.ProducerFenced
	case t.pending != nil:
		return nil, none, kerr.ConcurrentTransactions
	}
	current := pidEpoch{id: cur.ProducerID, epoch: cur.Epoch}
	switch cur.State {
	case stOngoing:
		return t.prepareEnd(commit, tv, newID, nowMs)
	case stCompleteCommit, stCompleteAbort:
		same := (cur.State == stCompleteCommit) == commit
		switch {
		case retry:
			if same {
				return nil, current, nil
			}
		case tv >= 2 && !commit:
			return t.prepareEnd(false, tv, newID, nowMs) // an empty transaction's abort
		case same && tv < 2:
			return nil, current, nil // a version 0 retry: the same epoch
		}
		return nil, none, kerr.InvalidTxnState
	case stPrepareCommit, stPrepareAbort:
		if (cur.State == stPrepareCommit) == commit {
			return nil, none, kerr.ConcurrentTransactions
		}
		return nil, none, kerr.InvalidTxnState
	case stEmpty:
		if tv >= 2 && !commit {
			return t.prepareEnd(false, tv, newID, nowMs)
		}
		return nil, none, kerr.InvalidTxnState
	default:
		return nil, none, kerr.ConcurrentTransactions
	}
}

// prepareEnd returns the Prepare* state that ends the id's transaction (an empty one
// when it is not Ongoing) under transaction version tv, and the producer id and
// epoch to answer.
func (t *txnMeta) prepareEnd(commit bool, tv int16, newID func() (int64, *kerr.Error), nowMs int64) (*txnData, pidEpoch, *kerr.Error) {
	none := pidEpoch{id: -1, epoch: -1}
	cur := &t.cur
	n := cur.clone()
	n.State = stPrepareAbort
	if commit {
		n.State = stPrepareCommit
	}
	if cur.State != stOngoing {
		n.Partitions = nil
		n.StartMs = nowMs
	}
	n.ClientTV = tv
	n.Next = nil
	n.UpdateMs = nowMs
	if tv >= 2 {
		if cur.Epoch == math.MaxInt16 {
			return nil, none, kerr.ProducerFenced // never handed out: rotation happens first
		}
		if epochExhausted(cur.Epoch) {
			id, e := newID()
			if e != nil {
				return nil, none, e
			}
			n.Next = &pidEpoch{id: id, epoch: 0}
		}
		n.Epoch, n.LastEpoch = cur.Epoch+1, cur.Epoch
	}
	return &n, n.answer(), nil
}

// completeTransit ends a transaction whose markers are all written. ok is false when
// the id moved on meanwhile (another epoch, or no longer in that Prepare state): the
// caller then writes nothing.
func (t *txnMeta) completeTransit(pid int64, epoch int16, commit bool, nowMs int64) (*txnData, bool) {
	want := stPrepareAbort
	if commit {
		want = stPrepareCommit
	}
	cur := &t.cur
	if t.pending != nil || cur.ProducerID != pid || cur.Epoch != epoch || cur.State != want {
		return nil, false
	}
	n := cur.clone()
	n.State = stCompleteAbort
	if commit {
		n.State = stCompleteCommit
	}
	n.Partitions = nil
	n.UpdateMs = nowMs
	if cur.Next != nil {
		// The epochs are used up: the next transaction runs under the new producer
		// id, and a retried EndTxn is recognised by the previous one.
		n.LastProducerID, n.ProducerID, n.Epoch = cur.ProducerID, cur.Next.id, cur.Next.epoch
		n.Next = nil
	}
	return &n, true
}

// timeoutTransit aborts an ongoing transaction older than its timeout, bumping the
// epoch (Kafka fences the producer of a timed-out transaction).
func (t *txnMeta) timeoutTransit(nowMs int64) (*txnData, bool) {
	cur := &t.cur
	if t.pending != nil || cur.State != stOngoing || cur.StartMs < 0 ||
		nowMs <= cur.StartMs+int64(cur.TimeoutMs) || cur.Epoch == math.MaxInt16 {
		return nil, false
	}
	n := cur.clone()
	n.Epoch++
	n.LastEpoch = -1
	n.State = stPrepareAbort
	n.UpdateMs = nowMs
	return &n, true
}

// expired reports whether the id may be forgotten (a tombstone written).
func (t *txnMeta) expired(nowMs, expirationMs int64) bool {
	return t.pending == nil && t.cur.State.expirable() && nowMs >= t.cur.UpdateMs+expirationMs
}

// verify is the KIP-890 part 1 check of a produce to tp (and AddPartitionsToTxn with
// VerifyOnly). Producer-epoch mismatches answer PRODUCER_FENCED; the caller maps it for
// the produce path.
func (t *txnMeta) verify(pid int64, epoch int16, tp kernel.TopicPartition) *kerr.Error {
	cur := &t.cur
	switch {
	case t.early(pid, epoch):
		return kerr.ConcurrentTransactions
	case cur.ProducerID != pid:
		return kerr.InvalidProducerIDMapping
	case cur.Epoch != epoch:
		return kerr.ProducerFenced
	case cur.State.isPrepare() || (t.pending != nil && t.pending.State.isPrepare()):
		return kerr.ConcurrentTransactions
	case cur.State != stOngoing || !cur.has(tp):
		return kerr.InvalidTxnState
	}
	return nil
}
