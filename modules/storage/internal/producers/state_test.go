package producers

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

func data(pid int64, epoch int16, first, n int32, base int64, txn bool) Batch {
	return Batch{ProducerID: pid, Epoch: epoch, FirstSeq: first, LastSeq: LastSeq(first, n-1), BaseOffset: base, LastOffset: base + int64(n) - 1, MaxTimestamp: 1000 + base, AppendMs: 5000 + base, Transactional: txn}
}

func marker(pid int64, epoch int16, commit bool, coord int32, off int64) Batch {
	return Batch{ProducerID: pid, Epoch: epoch, FirstSeq: -1, LastSeq: -1, BaseOffset: off, LastOffset: off, MaxTimestamp: 1000 + off, Transactional: true, Control: true, Marker: recordbatch.Marker{Commit: commit, CoordinatorEpoch: coord}}
}

func check(t *testing.T, s *State, b Batch, mode Mode) (SeqBatch, bool, error) {
	t.Helper()
	p := s.Begin()
	d, dup, err := p.Check(b, mode)
	if err == nil && !dup {
		p.Commit()
	}
	return d, dup, err
}

func mustOK(t *testing.T, s *State, b Batch, mode Mode) {
	t.Helper()
	if _, dup, err := check(t, s, b, mode); err != nil || dup {
		t.Fatalf("batch %+v: dup %v err %v", b, dup, err)
	}
}

func TestSequences(t *testing.T) {
	s := New()
	mustOK(t, s, data(1, 0, 7, 3, 0, false), Client) // unknown producer: any start
	mustOK(t, s, data(1, 0, 10, 2, 3, false), Client)
	if _, _, err := check(t, s, data(1, 0, 13, 1, 5, false), Client); !errors.Is(err, kernel.ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	d, dup, err := check(t, s, data(1, 0, 7, 3, 99, false), Client)
	if err != nil || !dup || d.BaseOffset != 0 || d.LastOffset != 2 || d.AppendMs != 5000 {
		t.Fatalf("duplicate: %+v %v %v", d, dup, err)
	}
	// newer epoch must start at 0
	if _, _, err := check(t, s, data(1, 1, 12, 1, 5, false), Client); !errors.Is(err, kernel.ErrOutOfOrderSequence) {
		t.Fatalf("new epoch not at 0: %v", err)
	}
	mustOK(t, s, data(1, 1, 0, 1, 5, false), Client)
	if _, _, err := check(t, s, data(1, 0, 12, 1, 6, false), Client); !errors.Is(err, kernel.ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	// old batches of the previous epoch are no longer duplicates
	if _, dup, _ := check(t, s, data(1, 1, 7, 3, 6, false), Client); dup {
		t.Fatal("duplicate across epochs")
	}
	ps, ok := s.Producer(1)
	if !ok || ps.Epoch != 1 || ps.LastSequence != 0 {
		t.Fatalf("state %+v", ps)
	}
}

func TestWindowAndWrap(t *testing.T) {
	s := New()
	off := int64(0)
	for i := int32(0); i < 6; i++ {
		mustOK(t, s, data(2, 0, i, 1, off, false), Client)
		off++
	}
	if _, dup, _ := check(t, s, data(2, 0, 1, 1, off, false), Client); !dup {
		t.Fatal("5th-back not a duplicate")
	}
	if _, _, err := check(t, s, data(2, 0, 0, 1, off, false), Client); !errors.Is(err, kernel.ErrOutOfOrderSequence) {
		t.Fatalf("6th-back: %v", err)
	}
	s = New()
	mustOK(t, s, data(3, 0, math.MaxInt32-1, 2, 0, false), Client)
	mustOK(t, s, data(3, 0, 0, 1, 2, false), Client)
	if LastSeq(math.MaxInt32-1, 3) != 1 {
		t.Fatal("LastSeq wrap")
	}
}

func TestTransactions(t *testing.T) {
	s := New()
	mustOK(t, s, data(1, 0, 0, 2, 10, true), Client)
	mustOK(t, s, data(2, 0, 0, 1, 12, true), Client)
	if off, ok := s.FirstUnstableOffset(); !ok || off != 10 {
		t.Fatalf("fuo %d %v", off, ok)
	}
	if _, _, err := check(t, s, data(1, 0, 2, 1, 13, false), Client); !errors.Is(err, kernel.ErrInvalidTxnState) {
		t.Fatalf("non-txn in txn: %v", err)
	}
	mustOK(t, s, marker(1, 0, false, 3, 13), Leader)
	if off, ok := s.FirstUnstableOffset(); !ok || off != 12 {
		t.Fatalf("fuo after abort %d %v", off, ok)
	}
	if got := s.AllAborted(); len(got) != 1 || got[0].FirstOffset != 10 || got[0].LastOffset != 13 || got[0].LastStable != 12 {
		t.Fatalf("aborted %+v", got)
	}
	if _, _, err := check(t, s, marker(1, 0, true, 2, 14), Leader); !errors.Is(err, kernel.ErrTxnCoordinatorFenced) {
		t.Fatalf("fenced: %v", err)
	}
	mustOK(t, s, marker(2, 0, true, 3, 14), Leader)
	if _, ok := s.FirstUnstableOffset(); ok {
		t.Fatal("still unstable")
	}
	mustOK(t, s, marker(2, 0, true, 3, 15), Leader) // retried marker: no-op
	mustOK(t, s, marker(5, 0, false, 0, 16), Leader)
	if len(s.AllAborted()) != 1 {
		t.Fatal("marker without a txn added an abort")
	}
	if got := s.AbortedTxns(nil, 13, 14); len(got) != 1 {
		t.Fatalf("range %v", got)
	}
	if got := s.AbortedTxns(nil, 14, 100); len(got) != 0 {
		t.Fatalf("range past %v", got)
	}
	if got := s.AbortedTxns(nil, 0, 10); len(got) != 0 {
		t.Fatalf("range before %v", got)
	}
	// Only LastStable of a lone abort: marker+1.
	mustOK(t, s, data(7, 0, 0, 1, 20, true), Client)
	mustOK(t, s, marker(7, 0, false, 0, 21), Leader)
	if a := s.AllAborted()[1]; a.LastStable != 22 {
		t.Fatalf("lso %+v", a)
	}
}

func TestPendingAtomic(t *testing.T) {
	s := New()
	p := s.Begin()
	if _, _, err := p.Check(data(1, 0, 0, 1, 0, true), Client); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Check(data(1, 0, 1, 1, 1, false), Client); !errors.Is(err, kernel.ErrInvalidTxnState) {
		t.Fatalf("second batch: %v", err)
	}
	if s.Len() != 0 {
		t.Fatal("state changed before Commit")
	}
	p = s.Begin()
	_, _, err1 := p.Check(data(1, 0, 0, 1, 0, false), Client)
	_, _, err2 := p.Check(data(1, 0, 1, 1, 1, false), Client)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	p.Commit()
	if ps, _ := s.Producer(1); ps.LastSequence != 1 {
		t.Fatalf("%+v", ps)
	}
}

func TestExpireAndHead(t *testing.T) {
	s := New()
	mustOK(t, s, data(1, 0, 0, 1, 0, false), Client) // ts 1000
	mustOK(t, s, data(2, 0, 0, 1, 1, true), Client)  // ts 1001, open txn
	if n := s.Expire(5000, 1000); n != 1 {
		t.Fatalf("expired %d", n)
	}
	if _, ok := s.Producer(2); !ok {
		t.Fatal("producer with an open txn expired")
	}
	mustOK(t, s, marker(2, 0, false, 0, 2), Leader)
	s.TruncateHead(3)
	if s.Len() != 0 || len(s.AllAborted()) != 0 {
		t.Fatalf("head truncation left %d producers %v", s.Len(), s.AllAborted())
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := New()
	for i := int32(0); i < 7; i++ {
		mustOK(t, s, data(1, 3, i, 1, int64(i), false), Client)
	}
	mustOK(t, s, data(9, 0, 0, 2, 7, true), Client)
	b := EncodeSnapshot(s, 9)
	off, es, err := DecodeSnapshot(b)
	if err != nil || off != 9 || len(es) != 2 {
		t.Fatal(off, es, err)
	}
	s2 := New()
	s2.Load(es)
	if !reflect.DeepEqual(s.Producers(), s2.Producers()) {
		t.Fatalf("%+v != %+v", s.Producers(), s2.Producers())
	}
	if f, _ := s2.FirstUnstableOffset(); f != 7 {
		t.Fatal("ongoing not restored")
	}
	b[len(b)-1] ^= 1
	if _, _, err := DecodeSnapshot(b); !errors.Is(err, ErrBadSnapshot) {
		t.Fatal("corruption not detected")
	}
}

func TestTxnIndexCodec(t *testing.T) {
	a := Aborted{AbortedTxn: kernel.AbortedTxn{ProducerID: 5, FirstOffset: 10, LastOffset: 20}, LastStable: 21}
	b := AppendTxnIndexEntry(nil, a)
	if len(b) != TxnIndexEntrySize {
		t.Fatal(len(b))
	}
	got, torn, err := ParseTxnIndex(append(b, 1, 2))
	if err != nil || !torn || len(got) != 1 || got[0] != a {
		t.Fatal(got, torn, err)
	}
}

// TestAbortedTxnsModel checks AbortedTxns against a brute-force filter over random
// interleaved transactions of several producers.
func TestAbortedTxnsModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := New()
	off := int64(0)
	for range 2000 {
		pid := int64(r.IntN(6))
		var b Batch
		if r.IntN(4) == 0 {
			b = marker(pid, 0, r.IntN(2) == 0, 0, off)
		} else {
			b = data(pid, 0, -1, 1, off, true)
			b.FirstSeq, b.LastSeq = -1, -1
		}
		mustOK(t, s, b, Leader)
		off = b.LastOffset + 1
	}
	all := s.AllAborted()
	if len(all) < 50 {
		t.Fatalf("only %d aborts", len(all))
	}
	for range 2000 {
		from, to := r.Int64N(off+10), r.Int64N(off+10)
		var want []kernel.AbortedTxn
		for _, a := range all {
			if a.LastOffset >= from && a.FirstOffset < to {
				want = append(want, a.AbortedTxn)
			}
		}
		if got := s.AbortedTxns(nil, from, to); !reflect.DeepEqual(got, want) {
			t.Fatalf("AbortedTxns(%d, %d) = %v, want %v", from, to, got, want)
		}
	}
}

func TestFollowerAndLeaderModes(t *testing.T) {
	s := New()
	mustOK(t, s, data(1, 5, 0, 1, 0, false), Client)
	// Leader mode: sequences unchecked, epochs checked.
	mustOK(t, s, data(1, 5, 40, 1, 1, false), Leader)
	if _, _, err := check(t, s, data(1, 4, 41, 1, 2, false), Leader); !errors.Is(err, kernel.ErrInvalidProducerEpoch) {
		t.Fatalf("leader, old epoch: %v", err)
	}
	// Follower mode: nothing checked; an old epoch never moves the epoch back.
	mustOK(t, s, data(1, 4, 99, 1, 2, false), Follower)
	mustOK(t, s, data(1, 5, 7, 1, 3, true), Follower)
	mustOK(t, s, data(1, 5, 9, 1, 4, false), Follower) // non-transactional inside: accepted
	ps, _ := s.Producer(1)
	if ps.Epoch != 5 || ps.LastSequence != 9 || ps.TxnStartOffset != 3 {
		t.Fatalf("%+v", ps)
	}
	mustOK(t, s, marker(1, 5, true, 2, 5), Follower)
	mustOK(t, s, marker(1, 5, true, 1, 6), Follower) // older coordinator epoch: not fenced
	// A marker with a newer epoch moves the epoch and forgets the old batches.
	mustOK(t, s, marker(1, 6, false, 2, 7), Leader)
	if ps, _ := s.Producer(1); ps.Epoch != 6 || ps.LastSequence != -1 {
		t.Fatalf("%+v", ps)
	}
	if _, _, err := check(t, s, data(1, 6, 1, 1, 8, false), Client); !errors.Is(err, kernel.ErrOutOfOrderSequence) {
		t.Fatalf("after the epoch bump by a marker, seq 1: %v", err)
	}
	mustOK(t, s, data(1, 6, 0, 1, 8, false), Client)
	// Batches without a producer id are ignored.
	mustOK(t, s, data(-1, -1, -1, 1, 9, false), Client)
	if s.Len() != 1 {
		t.Fatal(s.Len())
	}
}

// A LogAppendTime batch is remembered with the time the leader stamped (its max
// timestamp), not the storage clock's, so a duplicate answers what the original did.
func TestFromHeaderLogAppendTime(t *testing.T) {
	for _, tc := range []struct {
		attrs int16
		want  int64
	}{{0, 1000}, {recordbatch.AttrLogAppendTime, 777}} {
		h := recordbatch.Header{ProducerID: 5, BaseSequence: 0, Attributes: tc.attrs, MaxTimestamp: 777}
		b, err := FromHeader(&h, nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if b.AppendMs != tc.want {
			t.Errorf("attributes %#x: AppendMs %d, want %d", tc.attrs, b.AppendMs, tc.want)
		}
	}
}
