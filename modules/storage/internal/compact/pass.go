package compact

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// ErrMapTooSmall: the first dirty batch alone has more records than the offset map
// can hold (log.cleaner.dedupe.buffer.size is too small for the log): the log is
// skipped and reported, never partly cleaned.
var ErrMapTooSmall = errors.New("compact: the offset map cannot hold one batch of the dirty section")

// Txns answers whether a transactional batch belongs to an aborted transaction.
type Txns struct {
	byProducer map[int64][]kernel.AbortedTxn // each in marker order
}

// NewTxns indexes the aborted transactions of the log (from its producer state).
func NewTxns(aborted []kernel.AbortedTxn) *Txns {
	t := &Txns{byProducer: map[int64][]kernel.AbortedTxn{}}
	for _, a := range aborted {
		t.byProducer[a.ProducerID] = append(t.byProducer[a.ProducerID], a)
	}
	return t
}

// Aborted reports whether a transactional data batch of producer pid at offset lies in
// one of its aborted transactions: FirstOffset <= offset < LastOffset (the marker).
func (t *Txns) Aborted(pid, offset int64) bool {
	as := t.byProducer[pid]
	i := sort.Search(len(as), func(i int) bool { return as[i].LastOffset > offset })
	return i < len(as) && as[i].FirstOffset <= offset
}

// Mapper fills an OffsetMap from the dirty section of a log, batch by batch in offset
// order. Control batches and batches of aborted transactions are not mapped: an
// aborted value never supersedes a committed one.
type Mapper struct {
	Map  *OffsetMap
	Txns *Txns
	// From is the first dirty offset: records below it are not mapped.
	From int64
	// End is the offset after the last mapped batch: the map covers [From, End).
	End int64

	dec recordbatch.Decoder
}

// Add maps one whole batch. It returns false, mapping nothing, when the batch may not
// fit (the map is full for this pass: End stays where it was).
func (p *Mapper) Add(batch []byte) (bool, error) {
	h, err := recordbatch.ParseHeader(batch)
	if err != nil {
		return false, err
	}
	if h.LastOffset() < p.From {
		return true, nil
	}
	if h.IsControl() || (h.IsTransactional() && p.Txns.Aborted(h.ProducerID, h.BaseOffset)) {
		p.End = h.LastOffset() + 1
		return true, nil
	}
	if int(h.RecordCount) > p.Map.Room() {
		if p.Map.Len() == 0 {
			return false, fmt.Errorf("%w: %d records at offset %d, room for %d", ErrMapTooSmall, h.RecordCount, h.BaseOffset, p.Map.Room())
		}
		return false, nil
	}
	p.dec.Compacted = true
	if _, err := p.dec.Records(batch, func(r *recordbatch.Record) error {
		if r.Key != nil && r.Offset >= p.From {
			p.Map.Put(r.Key, r.Offset)
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("map batch at %d: %w", h.BaseOffset, err)
	}
	p.End = h.LastOffset() + 1
	return true, nil
}

// Stats counts what a pass did.
type Stats struct {
	BatchesRead, BatchesWritten int64
	BytesRead, BytesWritten     int64
	RecordsRead, RecordsRemoved int64
	TombstonesRemoved           int64
	MarkersRemoved              int64
	// Changed counts the batches dropped or rebuilt: a run of batches with none
	// changed is the same bytes as before, and a storage need not rewrite it.
	Changed int64
}

// Add sums two Stats.
func (s *Stats) Add(o Stats) {
	s.BatchesRead += o.BatchesRead
	s.BatchesWritten += o.BatchesWritten
	s.BytesRead += o.BytesRead
	s.BytesWritten += o.BytesWritten
	s.RecordsRead += o.RecordsRead
	s.RecordsRemoved += o.RecordsRemoved
	s.TombstonesRemoved += o.TombstonesRemoved
	s.MarkersRemoved += o.MarkersRemoved
	s.Changed += o.Changed
}

// Filter rewrites the batches of a log from its start, in offset order, keeping what
// Kafka's cleaner keeps. For a batch wholly below End (the part the offset map covers):
//
//   - a record whose key maps to a later offset is removed (superseded);
//   - a record of an aborted transaction is removed;
//   - a tombstone (a keyed record with a null value) is kept until the batch's delete
//     horizon has passed: the first pass that keeps it stamps the horizon, now +
//     delete.retention.ms, in the batch (KIP-534: AttrDeleteHorizon, BaseTimestamp =
//     horizon, record timestamps unchanged); a later pass after the horizon removes it;
//   - a transaction marker is kept while any batch of its transaction is kept in this
//     pass (so a replay never sees a transaction without its end); once none is, it
//     gets a delete horizon the same way and goes after it;
//   - records without a key are kept (Kafka drops them; they can only be there from a
//     time the topic was not compacted, and dropping data silently is worse);
//   - a batch left with no records goes, unless it is the last data batch of its
//     producer (LastData), which stays as an empty batch so that the producer's epoch
//     and sequence survive a replay of the log (idempotent deduplication).
//
// Kept batches keep their base offset, offset range, max timestamp, producer fields
// and codec; records keep their offsets. Batches from End on are copied as they are.
type Filter struct {
	Map               *OffsetMap
	Txns              *Txns
	End               int64
	NowMs             int64
	DeleteRetentionMs int64
	// LastData returns the last offset of producer pid's last data batch in the log.
	LastData func(pid int64) (int64, bool)

	// RemovedAborts collects the offsets of removed ABORT markers: their .txnindex
	// entries (and the producer state's aborted transactions) must go with them.
	RemovedAborts map[int64]bool
	Stats         Stats

	open map[int64]bool // producer -> a batch of its current transaction was kept
	dec  recordbatch.Decoder
	b    recordbatch.Builder
}

// Batch appends the cleaned form of batch (a whole batch, in offset order after the
// previous call) to dst: the same bytes, a rebuilt batch, or nothing.
func (f *Filter) Batch(dst, batch []byte) ([]byte, error) {
	yield()
	h, err := recordbatch.ParseHeader(batch)
	if err != nil {
		return dst, err
	}
	f.Stats.BatchesRead++
	f.Stats.BytesRead += int64(len(batch))
	if f.open == nil {
		f.open = map[int64]bool{}
	}
	if h.BaseOffset >= f.End {
		return f.keep(dst, batch), nil
	}
	horizonSet := h.Attributes&recordbatch.AttrDeleteHorizon != 0
	horizonPassed := horizonSet && f.NowMs >= h.BaseTimestamp
	if h.IsControl() {
		kept := f.open[h.ProducerID]
		delete(f.open, h.ProducerID)
		f.Stats.RecordsRead++
		switch {
		case kept || (horizonSet && !horizonPassed):
			return f.keep(dst, batch), nil
		case horizonPassed:
			f.Stats.MarkersRemoved++
			f.Stats.RecordsRemoved++
			if m, err := recordbatch.ParseMarker(batch); err == nil && !m.Commit {
				if f.RemovedAborts == nil {
					f.RemovedAborts = map[int64]bool{}
				}
				f.RemovedAborts[h.BaseOffset] = true
			}
			f.Stats.Changed++
			return dst, nil
		}
		return f.rebuild(dst, batch, &h, nil, true)
	}
	aborted := h.IsTransactional() && f.Txns.Aborted(h.ProducerID, h.BaseOffset)
	// drop decides one record. It is pure (the map and the horizon do not change
	// during a batch), so the rebuild below can ask it again instead of this pass
	// keeping copies of the records.
	drop := func(r *recordbatch.Record) bool {
		if aborted {
			return true
		}
		if r.Key == nil {
			return false
		}
		if o, ok := f.Map.Get(r.Key); ok && o > r.Offset {
			return true
		}
		return r.Value == nil && horizonPassed
	}
	needHorizon := false
	n, removed, tombstones := 0, 0, 0
	f.dec.Compacted = true
	if _, err := f.dec.Records(batch, func(r *recordbatch.Record) error {
		n++
		switch {
		case drop(r):
			removed++
			if !aborted && r.Value == nil {
				if o, ok := f.Map.Get(r.Key); !ok || o <= r.Offset {
					tombstones++ // expired, not superseded
				}
			}
		case r.Key != nil && r.Value == nil && !horizonSet:
			needHorizon = true
		}
		return nil
	}); err != nil {
		return dst, fmt.Errorf("clean batch at %d: %w", h.BaseOffset, err)
	}
	f.Stats.RecordsRead += int64(n)
	f.Stats.RecordsRemoved += int64(removed)
	f.Stats.TombstonesRemoved += int64(tombstones)
	lastData := false
	if h.ProducerID >= 0 && f.LastData != nil {
		if o, ok := f.LastData(h.ProducerID); ok && o == h.LastOffset() {
			lastData = true
		}
	}
	if removed == n && !lastData {
		f.Stats.Changed++
		return dst, nil
	}
	if h.IsTransactional() {
		f.open[h.ProducerID] = true
	}
	if removed == 0 && !needHorizon {
		return f.keep(dst, batch), nil
	}
	return f.rebuild(dst, batch, &h, drop, needHorizon)
}

func (f *Filter) keep(dst, batch []byte) []byte {
	f.Stats.BatchesWritten++
	f.Stats.BytesWritten += int64(len(batch))
	return append(dst, batch...)
}

// rebuild encodes the records of batch (header h) that drop (nil: none) does not
// remove as the new form of the batch, decoding it again rather than keeping copies of
// its records; stamp sets a delete horizon of now + delete.retention.ms (a horizon
// already in the batch is kept either way).
func (f *Filter) rebuild(dst, batch []byte, h *recordbatch.Header, drop func(*recordbatch.Record) bool, stamp bool) ([]byte, error) {
	opts := recordbatch.OptionsFrom(*h)
	opts.Keep = &recordbatch.Kept{LastOffsetDelta: h.LastOffsetDelta, MaxTimestamp: h.MaxTimestamp}
	base := h.BaseTimestamp
	opts.DeleteHorizon = h.Attributes&recordbatch.AttrDeleteHorizon != 0
	if stamp && !opts.DeleteHorizon {
		opts.DeleteHorizon = true
		opts.BaseTimestamp = f.NowMs + min(f.DeleteRetentionMs, math.MaxInt64-f.NowMs)
	}
	if err := f.b.Reset(opts); err != nil {
		return dst, err
	}
	if _, err := f.dec.Records(batch, func(r *recordbatch.Record) error {
		if drop == nil || !drop(r) {
			r.TimestampDelta = base + r.TimestampDelta - opts.BaseTimestamp
			f.b.Add(r) // copies what it needs
		}
		return nil
	}); err != nil {
		return dst, fmt.Errorf("rebuild batch at %d: %w", h.BaseOffset, err)
	}
	start := len(dst)
	dst, err := f.b.AppendTo(dst)
	if err != nil {
		return dst[:start], err
	}
	f.Stats.BatchesWritten++
	f.Stats.BytesWritten += int64(len(dst) - start)
	f.Stats.Changed++
	return dst, nil
}
