package offsets

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
)

// Memory is a View that keeps everything in memory. Nothing survives the process: after
// a start every partition's AppliedOffset is -1, so the coordinator's load replays each
// __consumer_offsets partition it leads from the log's start and the view is rebuilt
// from the log alone. It trades a full replay per load for no disk of its own; the log
// stays the durable truth, so an acknowledged commit survives a restart either way.
//
// It applies records exactly as Store does (see Store.Apply): the same decoding, the
// same skip of records at or below the applied offset, the same all-or-none batches.
type Memory struct {
	// mu guards everything below. Applies hold it exclusively from the applied-offset
	// check to the last write, so a batch is one step; reads hold it shared.
	mu       sync.RWMutex
	closed   bool
	offsets  map[string]map[TopicPartition]Committed // by group; no empty inner maps
	meta     map[string][]byte                       // group metadata values, by group (decodable)
	consumer map[string]map[string][]byte            // group record values (decodable), by group, then Kafka key; no empty inner maps
	applied  map[int32]int64
	txnStart map[int32]int64
}

// NewMemory returns an empty in-memory view.
func NewMemory() *Memory {
	return &Memory{
		offsets:  make(map[string]map[TopicPartition]Committed),
		meta:     make(map[string][]byte),
		consumer: make(map[string]map[string][]byte),
		applied:  make(map[int32]int64),
		txnStart: make(map[int32]int64),
	}
}

// Close drops the view; later reads and applies fail with ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.offsets, m.meta, m.consumer = nil, nil, nil
	return nil
}

// Fetch implements View.
func (m *Memory) Fetch(group, topic string, partition int32) (Committed, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Committed{}, false, fmt.Errorf("fetch %s/%s/%d: %w", group, topic, partition, ErrClosed)
	}
	c, ok := m.offsets[group][TopicPartition{Topic: topic, Partition: partition}]
	return c, ok, nil
}

// FetchGroup implements View.
func (m *Memory) FetchGroup(group string) (map[TopicPartition]Committed, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("fetch group %s: %w", group, ErrClosed)
	}
	out := make(map[TopicPartition]Committed, len(m.offsets[group]))
	for tp, c := range m.offsets[group] {
		out[tp] = c
	}
	return out, nil
}

// GroupMetadata implements View.
func (m *Memory) GroupMetadata(group string) (GroupMetadata, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return GroupMetadata{}, false, fmt.Errorf("group metadata %s: %w", group, ErrClosed)
	}
	v, ok := m.meta[group]
	if !ok {
		return GroupMetadata{}, false, nil
	}
	// Decoded per read, so callers never share the stored member slices.
	g, err := DecodeGroupMetadataValue(v)
	if err != nil {
		return GroupMetadata{}, false, fmt.Errorf("group metadata %s: %w", group, err)
	}
	return g, true, nil
}

// GroupRecords implements View.
func (m *Memory) GroupRecords(group string) ([]KV, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("group records %s: %w", group, ErrClosed)
	}
	recs := m.consumer[group]
	out := make([]KV, 0, len(recs))
	for k, v := range recs {
		out = append(out, KV{Key: []byte(k), Value: slices.Clone(v)})
	}
	slices.SortFunc(out, func(a, b KV) int { return bytes.Compare(a.Key, b.Key) })
	return out, nil
}

// GroupRecord implements View.
func (m *Memory) GroupRecord(key []byte) ([]byte, bool, error) {
	k, err := DecodeKey(key)
	if err == nil && !k.IsGroupRecord() {
		err = fmt.Errorf("key version %d: not a group record: %w", k.Version, ErrUnsupportedVersion)
	}
	if err != nil {
		return nil, false, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, false, fmt.Errorf("group record %s: %w", k.Group, ErrClosed)
	}
	v, ok := m.consumer[k.Group][string(key)]
	return slices.Clone(v), ok, nil
}

// Groups implements View.
func (m *Memory) Groups() ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("list groups: %w", ErrClosed)
	}
	out := make([]string, 0, len(m.offsets)+len(m.meta)+len(m.consumer))
	for g := range m.offsets {
		out = append(out, g)
	}
	for g := range m.meta {
		if _, dup := m.offsets[g]; !dup {
			out = append(out, g)
		}
	}
	for g := range m.consumer {
		_, dupOffsets := m.offsets[g]
		if _, dupMeta := m.meta[g]; !dupOffsets && !dupMeta {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ApplyBatch implements View.
func (m *Memory) ApplyBatch(partition int32, recs []Record) error {
	return m.apply(partition, recs, applyOpts{skipApplied: true})
}

// Reapply implements View.
func (m *Memory) Reapply(partition int32, recs []Record) error {
	return m.apply(partition, recs, applyOpts{})
}

// ApplyMarker implements View.
func (m *Memory) ApplyMarker(partition int32, recs []Record, marker, txnStart int64) error {
	return m.apply(partition, recs, applyOpts{through: marker, setTxn: true, txnStart: txnStart})
}

// SetTxnReplayStart implements View.
func (m *Memory) SetTxnReplayStart(partition int32, off int64) error {
	return m.apply(partition, nil, applyOpts{setTxn: true, txnStart: off})
}

// AppliedOffset implements View.
func (m *Memory) AppliedOffset(partition int32) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if o, ok := m.applied[partition]; ok {
		return o
	}
	return -1
}

// TxnReplayStart implements View.
func (m *Memory) TxnReplayStart(partition int32) (int64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	o, ok := m.txnStart[partition]
	return o, ok
}

func (m *Memory) apply(partition int32, recs []Record, o applyOpts) error {
	ops, err := decodeApply(partition, recs)
	if err != nil {
		return err
	}
	if len(recs) == 0 && !o.setTxn {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("apply %d: %w", partition, ErrClosed)
	}
	applied, ok := m.applied[partition]
	if !ok {
		applied = -1
	}
	last := o.last(recs)
	if o.skipApplied && last <= applied {
		return nil
	}
	for i, op := range ops {
		if (o.skipApplied && recs[i].Offset <= applied) || op.skip {
			continue
		}
		m.put(op)
	}
	if o.setTxn {
		if o.txnStart < 0 {
			delete(m.txnStart, partition)
		} else {
			m.txnStart[partition] = o.txnStart
		}
	}
	if last > applied {
		m.applied[partition] = last
	}
	return nil
}

// put applies one decoded record; m.mu is held.
func (m *Memory) put(op applyOp) {
	g := op.key.Group
	switch {
	case op.key.IsGroupRecord():
		k := string(encodeGroupRecordKey(op.key))
		if op.delete {
			delete(m.consumer[g], k)
			if len(m.consumer[g]) == 0 {
				delete(m.consumer, g)
			}
			return
		}
		recs := m.consumer[g]
		if recs == nil {
			recs = make(map[string][]byte)
			m.consumer[g] = recs
		}
		recs[k] = slices.Clone(op.value)
		return
	case !op.key.IsOffset(): // group metadata
		if op.delete {
			delete(m.meta, g)
		} else {
			m.meta[g] = slices.Clone(op.value)
		}
		return
	}
	tp := TopicPartition{Topic: op.key.Topic, Partition: op.key.Partition}
	if op.delete {
		delete(m.offsets[g], tp)
		if len(m.offsets[g]) == 0 {
			delete(m.offsets, g)
		}
		return
	}
	offs := m.offsets[g]
	if offs == nil {
		offs = make(map[TopicPartition]Committed)
		m.offsets[g] = offs
	}
	offs[tp] = op.c
}
