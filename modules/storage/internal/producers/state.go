package producers

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// MaxBatches is how many of a producer's last batches are remembered for duplicate
// detection (Kafka's NUM_BATCHES_TO_RETAIN; the client keeps at most 5 in flight).
const MaxBatches = 5

// Mode selects the checks Check applies.
type Mode int

const (
	// Follower applies the batch without checks (the leader checked it).
	Follower Mode = iota
	// Leader checks epochs, transaction state and coordinator epochs, not sequences.
	Leader
	// Client is Leader plus duplicate detection and sequence checks.
	Client
)

// Batch is what the producer state needs from one batch.
type Batch struct {
	ProducerID int64
	Epoch      int16
	// FirstSeq and LastSeq are the sequence range; FirstSeq < 0: no sequence (a
	// coordinator write or a marker).
	FirstSeq, LastSeq      int32
	BaseOffset, LastOffset int64
	MaxTimestamp           int64
	AppendMs               int64
	Transactional, Control bool
	Marker                 recordbatch.Marker // when Control
}

// LastSeq returns the last sequence of a batch with base sequence first and
// lastOffsetDelta delta, wrapping past MaxInt32 to 0 as Kafka does.
func LastSeq(first, delta int32) int32 {
	return int32((int64(first) + int64(delta)) % (math.MaxInt32 + 1))
}

// FromHeader fills a Batch from a batch's header (offsets as in the header) and, for
// a control batch, its marker. Only a control batch of a producer reads the records.
func FromHeader(h *recordbatch.Header, batch []byte, appendMs int64) (Batch, error) {
	b := Batch{
		ProducerID:    h.ProducerID,
		Epoch:         h.ProducerEpoch,
		FirstSeq:      -1,
		LastSeq:       -1,
		BaseOffset:    h.BaseOffset,
		LastOffset:    h.LastOffset(),
		MaxTimestamp:  h.MaxTimestamp,
		AppendMs:      appendMs,
		Transactional: h.IsTransactional(),
		Control:       h.IsControl(),
	}
	if h.Attributes&recordbatch.AttrLogAppendTime != 0 {
		// The leader stamped the batch with its append time (max timestamp): remember
		// that one, so a duplicate's answer carries exactly what the original's did
		// (the storage clock may have ticked since the leader read its own).
		b.AppendMs = h.MaxTimestamp
	}
	if h.BaseSequence >= 0 && h.LastOffsetDelta >= 0 {
		b.FirstSeq, b.LastSeq = h.BaseSequence, LastSeq(h.BaseSequence, h.LastOffsetDelta)
	}
	if b.Control && b.ProducerID >= 0 {
		m, err := recordbatch.ParseMarker(batch)
		if err != nil {
			return b, fmt.Errorf("transaction marker at %d: %w", h.BaseOffset, err)
		}
		b.Marker = m
	}
	return b, nil
}

// SeqBatch is one remembered batch of a producer.
type SeqBatch struct {
	FirstSeq, LastSeq      int32
	BaseOffset, LastOffset int64
	AppendMs               int64
}

// Entry is what the state remembers about one producer.
type Entry struct {
	kernel.ProducerState
	// LastOffset is the last offset of its last batch or marker (head truncation drops
	// producers that have nothing left in the log).
	LastOffset int64
	// Batches[:N] are its last batches, oldest first, all of the current epoch.
	Batches [MaxBatches]SeqBatch
	N       int
}

func newEntry(pid int64, epoch int16) Entry {
	return Entry{ProducerState: kernel.ProducerState{ProducerID: pid, Epoch: epoch, LastSequence: -1, CoordinatorEpoch: -1, TxnStartOffset: -1}, LastOffset: -1}
}

func (e *Entry) findDup(first, last int32) (SeqBatch, bool) {
	for _, b := range e.Batches[:e.N] {
		if b.FirstSeq == first && b.LastSeq == last {
			return b, true
		}
	}
	return SeqBatch{}, false
}

// setEpoch moves to epoch; a new epoch forgets the previous one's batches.
func (e *Entry) setEpoch(epoch int16) {
	if epoch != e.Epoch {
		e.Epoch, e.N, e.LastSequence = epoch, 0, -1
	}
}

func (e *Entry) addBatch(b SeqBatch) {
	if e.N == MaxBatches {
		copy(e.Batches[:], e.Batches[1:])
		e.N--
	}
	e.Batches[e.N] = b
	e.N++
	e.LastSequence = b.LastSeq
}

// Aborted is one aborted transaction with the last stable offset at the time its
// ABORT marker was written (Kafka's .txnindex entry).
type Aborted struct {
	kernel.AbortedTxn
	LastStable int64
}

// State is a partition's producer state. The zero value is not usable: use New.
type State struct {
	producers map[int64]*Entry
	ongoing   map[int64]int64 // producer id -> TxnStartOffset, open transactions only
	aborted   []Aborted       // by LastOffset
	// maxSpan >= LastOffset-FirstOffset of every aborted transaction held (it never
	// shrinks): AbortedTxns stops at a marker past to+maxSpan.
	maxSpan int64
	scratch Pending // reused by Begin: appends run one at a time under the log's lock
}

// New returns an empty State. Its maps are made at the first producer: most of a
// broker's partitions may never see one (non-idempotent producers, or none at all).
func New() *State { return &State{} }

// ensureMaps makes the maps before the first insert.
func (s *State) ensureMaps() {
	if s.producers == nil {
		s.producers, s.ongoing = map[int64]*Entry{}, map[int64]int64{}
	}
}

// Reset forgets everything.
func (s *State) Reset() {
	clear(s.producers)
	clear(s.ongoing)
	s.aborted = s.aborted[:0]
}

// Len is the number of producers remembered.
func (s *State) Len() int { return len(s.producers) }

// Producer returns the state of one producer.
func (s *State) Producer(id int64) (kernel.ProducerState, bool) {
	e, ok := s.producers[id]
	if !ok {
		return kernel.ProducerState{}, false
	}
	return e.ProducerState, true
}

// Producers lists the producers by id.
func (s *State) Producers() []kernel.ProducerState {
	out := make([]kernel.ProducerState, 0, len(s.producers))
	for _, e := range s.producers {
		out = append(out, e.ProducerState)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// Entries calls fn for every producer, by id (snapshots).
func (s *State) Entries(fn func(e *Entry)) {
	ids := make([]int64, 0, len(s.producers))
	for id := range s.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fn(s.producers[id])
	}
}

// FirstUnstableOffset is the smallest first offset of an open transaction.
func (s *State) FirstUnstableOffset() (int64, bool) {
	first, ok := int64(0), false
	for _, off := range s.ongoing {
		if !ok || off < first {
			first, ok = off, true
		}
	}
	return first, ok
}

// AbortedTxns appends to dst the aborted transactions with LastOffset >= from and
// FirstOffset < to, in marker order. The start is found by binary search; a marker
// past to may still close a transaction that began before to, so the scan goes on
// until a marker past to+maxSpan (the longest aborted transaction), beyond which no
// transaction can have begun before to.
func (s *State) AbortedTxns(dst []kernel.AbortedTxn, from, to int64) []kernel.AbortedTxn {
	i := sort.Search(len(s.aborted), func(i int) bool { return s.aborted[i].LastOffset >= from })
	for _, a := range s.aborted[i:] {
		if a.LastOffset-s.maxSpan >= to {
			break
		}
		if a.FirstOffset < to {
			dst = append(dst, a.AbortedTxn)
		}
	}
	return dst
}

// AllAborted returns the aborted transactions (shared; do not modify).
func (s *State) AllAborted() []Aborted { return s.aborted }

// AddAborted appends aborted transactions read from disk (recovery); they must come
// after the ones already held.
func (s *State) AddAborted(as ...Aborted) {
	for _, a := range as {
		s.maxSpan = max(s.maxSpan, a.LastOffset-a.FirstOffset)
	}
	s.aborted = append(s.aborted, as...)
}

// Load replaces the producers with es (a decoded snapshot), keeping the aborted
// transactions.
func (s *State) Load(es []Entry) {
	clear(s.producers)
	clear(s.ongoing)
	if len(es) > 0 {
		s.ensureMaps()
	}
	for i := range es {
		e := es[i]
		s.producers[e.ProducerID] = &e
		if e.TxnStartOffset >= 0 {
			s.ongoing[e.ProducerID] = e.TxnStartOffset
		}
	}
}

// Expire forgets producers with no open transaction whose last timestamp is at least
// expMs before nowMs; expMs <= 0 keeps them forever. It returns how many went.
func (s *State) Expire(nowMs, expMs int64) int {
	if expMs <= 0 {
		return 0
	}
	n := 0
	for id, e := range s.producers {
		if e.TxnStartOffset < 0 && nowMs-e.LastTimestamp >= expMs {
			delete(s.producers, id)
			n++
		}
	}
	return n
}

// TruncateHead forgets what lies wholly below the log start offset: producers whose
// last batch or marker is below it (with their open transaction, as Kafka does) and
// aborted transactions whose marker is below it.
func (s *State) TruncateHead(logStart int64) {
	for id, e := range s.producers {
		if e.LastOffset < logStart {
			delete(s.producers, id)
			delete(s.ongoing, id)
		}
	}
	i := sort.Search(len(s.aborted), func(i int) bool { return s.aborted[i].LastOffset >= logStart })
	if i > 0 {
		s.aborted = append(s.aborted[:0], s.aborted[i:]...)
	}
}

// ForgetAborted drops the aborted transactions whose ABORT marker offset is in
// markers: the cleaner removed those markers (and, before them, every batch of the
// transactions), so a read_committed reader must not be told to skip the producer.
func (s *State) ForgetAborted(markers map[int64]bool) {
	if len(markers) == 0 {
		return
	}
	s.aborted = slices.DeleteFunc(s.aborted, func(a Aborted) bool { return markers[a.LastOffset] })
}

// LastDataOffsets returns, per producer, the last offset of its last data batch (the
// batch whose sequence range the log must keep for deduplication after a replay).
func (s *State) LastDataOffsets() map[int64]int64 {
	out := make(map[int64]int64, len(s.producers))
	for id, e := range s.producers {
		if e.N > 0 {
			out[id] = e.Batches[e.N-1].LastOffset
		}
	}
	return out
}

// TruncateAborted drops the aborted transactions whose marker is at or after offset
// (the replay from a snapshot re-derives them).
func (s *State) TruncateAborted(offset int64) {
	i := sort.Search(len(s.aborted), func(i int) bool { return s.aborted[i].LastOffset >= offset })
	s.aborted = s.aborted[:i]
}

// Apply applies one batch without checks (recovery replay, follower appends).
func (s *State) Apply(b Batch) {
	p := s.Begin()
	_, _, _ = p.Check(b, Follower)
	p.Commit()
}

// Pending accumulates the effects of one append's batches; nothing reaches the State
// before Commit. Begin returns one; it is meant to be short-lived and reused for a
// single append.
type Pending struct {
	s       *State
	buf     [2]Entry
	ents    []Entry
	known   []bool
	kbuf    [2]bool
	aborted []Aborted
}

// Begin starts an append. The Pending is the State's own, reused: it is valid until
// the next Begin (the owning log's lock serializes appends).
func (s *State) Begin() *Pending {
	p := &s.scratch
	p.s = s
	p.ents, p.known, p.aborted = p.buf[:0], p.kbuf[:0], p.aborted[:0]
	return p
}

// get returns the pending copy of a producer's entry, creating it from the State.
func (p *Pending) get(pid int64, epoch int16) (*Entry, bool) {
	for i := range p.ents {
		if p.ents[i].ProducerID == pid {
			return &p.ents[i], p.known[i]
		}
	}
	e, ok := p.s.producers[pid]
	if ok {
		p.ents = append(p.ents, *e)
	} else {
		p.ents = append(p.ents, newEntry(pid, epoch))
	}
	p.known = append(p.known, ok)
	return &p.ents[len(p.ents)-1], ok
}

// Check validates batch b against the state (as changed by this append's earlier
// batches) and records its effects in p. A duplicate (Client mode, the same epoch and
// sequence range as one of the producer's last batches) returns the original batch
// and ok, and records nothing. Errors are kernel.ErrInvalidProducerEpoch,
// ErrOutOfOrderSequence, ErrInvalidTxnState and ErrTxnCoordinatorFenced; after an
// error the Pending must be dropped.
func (p *Pending) Check(b Batch, mode Mode) (dup SeqBatch, isDup bool, err error) {
	if b.ProducerID < 0 {
		return dup, false, nil
	}
	e, known := p.get(b.ProducerID, b.Epoch)
	if mode == Client && known && b.Epoch == e.Epoch && b.FirstSeq >= 0 {
		if d, ok := e.findDup(b.FirstSeq, b.LastSeq); ok {
			return d, true, nil
		}
	}
	older := known && b.Epoch < e.Epoch
	if mode != Follower && older {
		return dup, false, fmt.Errorf("%w: producer %d epoch %d, current %d", kernel.ErrInvalidProducerEpoch, b.ProducerID, b.Epoch, e.Epoch)
	}
	if b.Control {
		if mode != Follower && b.Marker.CoordinatorEpoch < e.CoordinatorEpoch {
			return dup, false, fmt.Errorf("%w: producer %d marker coordinator epoch %d, last %d", kernel.ErrTxnCoordinatorFenced, b.ProducerID, b.Marker.CoordinatorEpoch, e.CoordinatorEpoch)
		}
		if !older {
			e.setEpoch(b.Epoch)
		}
		e.CoordinatorEpoch = b.Marker.CoordinatorEpoch
		if e.TxnStartOffset >= 0 {
			if !b.Marker.Commit {
				a := Aborted{AbortedTxn: kernel.AbortedTxn{ProducerID: b.ProducerID, FirstOffset: e.TxnStartOffset, LastOffset: b.BaseOffset}}
				e.TxnStartOffset = -1
				a.LastStable = p.firstUnstable(b.BaseOffset + 1)
				p.aborted = append(p.aborted, a)
			}
			e.TxnStartOffset = -1
		}
		e.LastTimestamp, e.LastOffset = b.MaxTimestamp, b.LastOffset
		return dup, false, nil
	}
	if mode == Client && b.FirstSeq >= 0 && known {
		if err := checkSeq(e, b); err != nil {
			return dup, false, err
		}
	}
	if b.Transactional {
		if e.TxnStartOffset < 0 {
			e.TxnStartOffset = b.BaseOffset
		}
	} else if e.TxnStartOffset >= 0 && mode != Follower {
		return dup, false, fmt.Errorf("%w: producer %d sent a non-transactional batch inside its transaction", kernel.ErrInvalidTxnState, b.ProducerID)
	}
	if !older {
		e.setEpoch(b.Epoch)
		if b.FirstSeq >= 0 {
			e.addBatch(SeqBatch{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq, BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, AppendMs: b.AppendMs})
		}
	}
	e.LastTimestamp, e.LastOffset = b.MaxTimestamp, b.LastOffset
	return dup, false, nil
}

// checkSeq applies the sequence rules to a known producer.
func checkSeq(e *Entry, b Batch) error {
	if b.Epoch != e.Epoch {
		if b.FirstSeq != 0 {
			return fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0", kernel.ErrOutOfOrderSequence, b.ProducerID, b.Epoch, b.FirstSeq)
		}
		return nil
	}
	last := e.LastSequence
	if b.FirstSeq == last+1 || (last == math.MaxInt32 && b.FirstSeq == 0) {
		return nil
	}
	return fmt.Errorf("%w: producer %d epoch %d sequence %d, expected %d", kernel.ErrOutOfOrderSequence, b.ProducerID, b.Epoch, b.FirstSeq, LastSeq(last, 1))
}

// firstUnstable is the first unstable offset the State would have after this
// append's effects so far, or def if no transaction would be open.
func (p *Pending) firstUnstable(def int64) int64 {
	first, ok := int64(0), false
	for id, off := range p.s.ongoing {
		if slices.ContainsFunc(p.ents, func(e Entry) bool { return e.ProducerID == id }) {
			continue
		}
		if !ok || off < first {
			first, ok = off, true
		}
	}
	for i := range p.ents {
		if off := p.ents[i].TxnStartOffset; off >= 0 && (!ok || off < first) {
			first, ok = off, true
		}
	}
	if !ok {
		return def
	}
	return first
}

// Aborted returns the aborted transactions this append adds (for the .txnindex).
func (p *Pending) Aborted() []Aborted { return p.aborted }

// Commit applies the pending effects to the State.
func (p *Pending) Commit() {
	s := p.s
	if len(p.ents) > 0 {
		s.ensureMaps()
	}
	for i := range p.ents {
		pe := &p.ents[i]
		if cur, ok := s.producers[pe.ProducerID]; ok {
			*cur = *pe
		} else {
			e := new(Entry)
			*e = *pe
			s.producers[pe.ProducerID] = e
		}
		if pe.TxnStartOffset >= 0 {
			s.ongoing[pe.ProducerID] = pe.TxnStartOffset
		} else {
			delete(s.ongoing, pe.ProducerID)
		}
	}
	s.AddAborted(p.aborted...)
}

// RecordEmpty is Log.AppendProducer with an empty batch (a produce transform dropped
// every record): it checks seq as a client batch at the log end leo and records it
// without appending anything; a retry is answered as a duplicate. logStart and nowMs
// fill the result. The caller holds the log's lock.
func (s *State) RecordEmpty(seq kernel.SeqRange, leo, logStart, nowMs int64) (kernel.AppendResult, error) {
	res := kernel.AppendResult{BaseOffset: leo, LastOffset: leo, LogAppendTime: nowMs, LogStartOffset: logStart}
	if seq.ProducerID < 0 {
		return res, nil
	}
	pend := s.Begin()
	d, dup, err := pend.Check(Batch{
		ProducerID: seq.ProducerID, Epoch: seq.Epoch, FirstSeq: seq.First, LastSeq: seq.Last,
		BaseOffset: leo, LastOffset: leo, MaxTimestamp: nowMs, AppendMs: nowMs,
	}, Client)
	if err != nil {
		return kernel.AppendResult{}, err
	}
	if dup {
		return kernel.AppendResult{BaseOffset: d.BaseOffset, LastOffset: d.LastOffset, LogAppendTime: d.AppendMs, LogStartOffset: logStart, Duplicate: true}, nil
	}
	pend.Commit()
	return res, nil
}
