package groups

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447).
//
// A TxnOffsetCommit is appended to the group's __consumer_offsets partition as one
// transactional batch of the producer (its id and epoch, base sequence -1: a
// coordinator write the Log checks only for the epoch), holding offset commit records
// in the format of plain commits. Its offsets are pending, per producer, until the
// producer's marker is appended to the partition: a COMMIT makes them visible, an
// ABORT drops them. The replication module tells the coordinator of markers through
// kernel.TxnMarkerHook; the shard's writer applies them (queueMarker, drainMarkers),
// so the store is only ever written by one goroutine.
//
// Which offset wins (Kafka's rule: the most recent commit record in the log): a
// pending offset of key k written at log offset T is applied at its COMMIT marker
// unless a plain commit or a tombstone of k was appended after T (it is then
// "superseded": the plain commit, later in the log, stays). Plain records are
// appended only by the shard's writer, in log order, so "after T" is "applied while
// the pending offset existed". A plain commit after the marker is simply applied
// after it.
//
// Replay (restart, new leader): transactional batches become pending, plain records
// supersede, markers apply or drop, exactly as live. The store's applied offset may
// pass a pending transactional batch (later plain commits are applied), so a second
// persisted offset, offsets.Store.TxnReplayStart, holds the first offset of the
// earliest transactional batch whose marker was not applied yet; the replay starts at
// min(AppliedOffset+1, TxnReplayStart) and re-applies everything from there in log
// order (offsets.Store.Reapply), which leaves every key as the log says.
//
// Invariant (txnStart): whenever the store's applied offset is at or past the first
// offset T of a transactional batch whose marker has not been applied to the store,
// the persisted TxnReplayStart is <= T. Kept by: the writer persists
// TxnReplayStart = T (when none is persisted) right after T's append commits and
// before it applies anything else; the replay does the same when it meets T; a marker
// writes the new minimum over the still-open transactions in the same badger
// transaction that applies its offsets (offsets.Store.ApplyMarker). Persisted values
// only rise at a marker, and never above an open transaction's first batch.

// pendingTxns are the open transactions of one shard's partition. Guarded by the
// shard's txnMu; changed only by the replay and the writer.
type pendingTxns struct {
	byProducer map[int64]*openTxn
	// byKey lists the pending offsets of each offset key (the canonical version 1
	// key bytes), across producers: OffsetFetch's require_stable, deletes, expiry.
	byKey map[string][]*pendingOffset
	// persisted is the TxnReplayStart this shard last wrote or loaded, -1 if none.
	persisted int64
}

// openTxn is one producer's open transaction in the partition.
type openTxn struct {
	// entries by key: a later commit of a key in the transaction replaces the
	// earlier (whose batch then no longer counts for first: replaying from the
	// later batch rebuilds the same pending state).
	entries map[string]*pendingOffset
}

// pendingOffset is one offset commit record of a transactional batch.
type pendingOffset struct {
	producerID int64
	group      string
	topic      string
	partition  int32
	key, value []byte
	pos        int64 // the record's log offset
	batch      int64 // its batch's base offset
	// superseded: a plain commit or tombstone of the key was appended after it; it
	// is not applied at COMMIT.
	superseded bool
}

func newPendingTxns() *pendingTxns {
	return &pendingTxns{byProducer: map[int64]*openTxn{}, byKey: map[string][]*pendingOffset{}, persisted: -1}
}

// first returns the first offset of the earliest open transaction, or -1.
func (p *pendingTxns) first() int64 {
	f := int64(-1)
	for _, t := range p.byProducer {
		for _, e := range t.entries {
			if f < 0 || e.batch < f {
				f = e.batch
			}
		}
	}
	return f
}

// add records a transactional offset commit of producer id.
func (p *pendingTxns) add(e *pendingOffset) {
	t := p.byProducer[e.producerID]
	if t == nil {
		t = &openTxn{entries: map[string]*pendingOffset{}}
		p.byProducer[e.producerID] = t
	}
	k := string(e.key)
	if old := t.entries[k]; old != nil {
		p.unindex(old)
	}
	t.entries[k] = e
	p.byKey[k] = append(p.byKey[k], e)
}

func (p *pendingTxns) unindex(e *pendingOffset) {
	k := string(e.key)
	l := slices.DeleteFunc(p.byKey[k], func(x *pendingOffset) bool { return x == e })
	if len(l) == 0 {
		delete(p.byKey, k)
	} else {
		p.byKey[k] = l
	}
}

// supersede marks the pending offsets of key as overwritten by a later plain record.
func (p *pendingTxns) supersede(key []byte) {
	for _, e := range p.byKey[string(key)] {
		e.superseded = true
	}
}

// ending returns what a marker at log offset marker ends of producer id's
// transaction, without changing anything: the pending offsets written before the
// marker (those written after it, the producer's next transaction appended before the
// marker was handed to the writer, stay), for a COMMIT the records to apply (not
// superseded) in log order, and the first offset of the open transactions left.
func (p *pendingTxns) ending(id int64, commit bool, marker int64) (ended []*pendingOffset, apply []offsets.Record, first int64) {
	t := p.byProducer[id]
	if t == nil {
		return nil, nil, p.first()
	}
	for _, e := range t.entries {
		if e.pos > marker {
			continue
		}
		ended = append(ended, e)
		if commit && !e.superseded {
			apply = append(apply, offsets.Record{Key: e.key, Value: e.value, Offset: e.pos})
		}
	}
	slices.SortFunc(apply, func(a, b offsets.Record) int { return cmp.Compare(a.Offset, b.Offset) })
	first = -1
	for pid, o := range p.byProducer {
		for _, e := range o.entries {
			if pid == id && e.pos <= marker {
				continue
			}
			if first < 0 || e.batch < first {
				first = e.batch
			}
		}
	}
	return ended, apply, first
}

// end removes the pending offsets ending returned.
func (p *pendingTxns) end(id int64, ended []*pendingOffset) {
	t := p.byProducer[id]
	if t == nil {
		return
	}
	for _, e := range ended {
		if t.entries[string(e.key)] == e {
			delete(t.entries, string(e.key))
		}
		p.unindex(e)
	}
	if len(t.entries) == 0 {
		delete(p.byProducer, id)
	}
}

// has reports whether group has a pending offset for topic/partition.
func (p *pendingTxns) has(group, topic string, partition int32) bool {
	return len(p.byKey[string(offsets.EncodeOffsetKey(group, topic, partition))]) > 0
}

// groupKeys returns the partitions of group with pending offsets.
func (p *pendingTxns) groupKeys(group string) []offsets.TopicPartition {
	var out []offsets.TopicPartition
	for _, l := range p.byKey {
		if len(l) > 0 && l[0].group == group {
			out = append(out, offsets.TopicPartition{Topic: l[0].topic, Partition: l[0].partition})
		}
	}
	return out
}

// hasPending reports whether group has a pending transactional offset for
// topic/partition in this shard.
func (s *shard) hasPending(group, topic string, partition int32) bool {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	return s.txns.has(group, topic, partition)
}

// hasOpenTxn reports whether producer id has pending offsets in this shard (its
// transaction is open in the partition).
func (s *shard) hasOpenTxn(id int64) bool {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	return s.txns.byProducer[id] != nil
}

// pendingPartitions returns the partitions of group with pending transactional
// offsets in this shard.
func (s *shard) pendingPartitions(group string) []offsets.TopicPartition {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	return s.txns.groupKeys(group)
}

// supersedePlain marks pending offsets overwritten by plain records (commits and
// tombstones) that were just appended or replayed.
func (s *shard) supersedePlain(recs []offsets.Record) {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	if len(s.txns.byKey) == 0 {
		return
	}
	for _, r := range recs {
		if k, err := offsets.DecodeKey(r.Key); err == nil && k.IsOffset() {
			s.txns.supersede(offsets.EncodeOffsetKey(k.Group, k.Topic, k.Partition))
		}
	}
}

// addPending records the offset commit records of a transactional batch with base
// offset base of producer id (recs carry their log offsets), and keeps the txnStart
// invariant: TxnReplayStart is persisted before the caller applies anything past base.
func (s *shard) addPending(id int64, base int64, recs []offsets.Record) error {
	s.txnMu.Lock()
	for _, r := range recs {
		k, err := offsets.DecodeKey(r.Key)
		if err != nil || !k.IsOffset() {
			continue // not an offset commit: nothing to make visible later
		}
		e := &pendingOffset{
			producerID: id, group: k.Group, topic: k.Topic, partition: k.Partition,
			key: offsets.EncodeOffsetKey(k.Group, k.Topic, k.Partition), value: r.Value,
			pos: r.Offset, batch: base,
		}
		if r.Value == nil {
			// A transactional tombstone (Sluice never writes one) drops the
			// producer's pending offset of the key, as Kafka's load does.
			if t := s.txns.byProducer[id]; t != nil {
				if old := t.entries[string(e.key)]; old != nil {
					s.txns.end(id, []*pendingOffset{old})
				}
			}
			continue
		}
		if _, err := offsets.DecodeOffsetValue(r.Value); err != nil {
			// Applying it at COMMIT would fail, and the reload would fail again.
			s.m.log.Warn("skipping unreadable transactional offset commit", "partition", s.tp.Partition, "offset", r.Offset, "err", err)
			continue
		}
		s.txns.add(e)
	}
	// Persisted values are at or below every open transaction's first batch; only
	// a first transaction (none persisted) or, defensively, an older batch lowers it.
	need := len(s.txns.byProducer) > 0 && (s.txns.persisted < 0 || base < s.txns.persisted)
	s.txnMu.Unlock()
	if !need {
		return nil
	}
	if err := s.m.store.SetTxnReplayStart(s.tp.Partition, base); err != nil {
		return err
	}
	s.txnMu.Lock()
	s.txns.persisted = base
	s.txnMu.Unlock()
	return nil
}

// endTxn applies (COMMIT) or drops (ABORT) producer id's pending offsets at a marker
// at log offset marker, and persists the new TxnReplayStart with them. The offsets
// stay pending until the store has them, so an OffsetFetch with require_stable never
// sees the old offset as stable in between. Writer or replay only.
func (s *shard) endTxn(id int64, commit bool, marker int64) error {
	s.txnMu.Lock()
	if s.txns.byProducer[id] == nil {
		s.txnMu.Unlock()
		return nil // a retried marker, or a transaction with no offsets here
	}
	ended, recs, first := s.txns.ending(id, commit, marker)
	s.txnMu.Unlock()
	if len(ended) == 0 {
		return nil
	}
	if err := s.m.store.ApplyMarker(s.tp.Partition, recs, marker, first); err != nil {
		return err
	}
	s.txnMu.Lock()
	s.txns.end(id, ended)
	s.txns.persisted = first
	s.txnMu.Unlock()
	if commit {
		s.m.commits.Add(int64(len(recs)))
	}
	return nil
}

// markerEvent is a marker the replication module reported for this partition.
type markerEvent struct {
	m      kernel.TxnMarker
	offset int64
}

// onTxnMarker is the kernel.TxnMarkerHook listener: a marker was appended and
// committed to tp at offset. Markers of __consumer_offsets partitions this broker
// coordinates are queued to the partition's shard; its writer applies them. A
// partition without a shard needs nothing: its next load replays the marker.
func (m *Module) onTxnMarker(tp kernel.TopicPartition, mk kernel.TxnMarker, offset int64) {
	if tp.Topic != OffsetsTopic {
		return
	}
	if s, ok := m.coord.Get(tp.Partition); ok {
		s.queueMarker(markerEvent{m: mk, offset: offset})
	}
}

// queueMarker hands a marker to the writer without blocking the caller (the goroutine
// that wrote the marker).
func (s *shard) queueMarker(ev markerEvent) {
	s.markerMu.Lock()
	s.markerQ = append(s.markerQ, ev)
	s.markerMu.Unlock()
	s.Wake()
}

// drainMarkers applies the queued markers (writer goroutine). Markers at or below
// replayedThrough were already handled by the replay. On a failure it drops the shard
// (the reload replays the markers) and returns false.
func (s *shard) drainMarkers() bool {
	s.markerMu.Lock()
	q := s.markerQ
	s.markerQ = nil
	s.markerMu.Unlock()
	for _, ev := range q {
		if ev.offset <= s.replayedThrough {
			continue
		}
		if err := s.endTxn(ev.m.ProducerID, ev.m.Commit, ev.offset); err != nil {
			s.m.log.Error("applying a transaction marker failed; reloading the partition", "partition", s.tp.Partition,
				"offset", ev.offset, "producer_id", ev.m.ProducerID, "err", err)
			s.Drop(kerr.NotCoordinator)
			return false
		}
	}
	return true
}

// replayMarker handles a control batch met by the replay.
func (s *shard) replayMarker(h recordbatch.Header, batch []byte) error {
	if h.ProducerID < 0 {
		return nil
	}
	mk, err := recordbatch.ParseMarker(batch)
	if err != nil {
		s.m.log.Warn("skipping unreadable control batch", "partition", s.tp.Partition, "offset", h.BaseOffset, "err", err)
		return nil
	}
	return s.endTxn(h.ProducerID, mk.Commit, h.BaseOffset)
}

// writeTxn appends recs as producer id's transactional batch through the writer and
// waits: nil once they are committed and pending.
func (s *shard) writeTxn(ctx context.Context, id int64, epoch int16, recs []kv) *kerr.Error {
	return s.WriteTxn(ctx, coordinator.Producer{ID: id, Epoch: epoch}, toKV(recs))
}
