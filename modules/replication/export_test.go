package replication

import (
	"slices"

	"github.com/sluicehq/sluice/kernel"
)

// Test hooks for the external test package (the multi-broker tests).

// ProducerBatch is pidBatch: one batch of an idempotent (or transactional) producer.
func ProducerBatch(pid int64, epoch int16, seq int32, txn bool, values ...string) []byte {
	return pidBatch(pid, epoch, seq, txn, values...)
}

// PauseFetching idles (true) or resumes this broker's replica fetchers, as if it
// stopped fetching (a follower that stalls without leaving the cluster).
func (m *Module) PauseFetching(on bool) { m.pauseFetching(on) }

// ReplicaView is what one broker's replica of a partition looks like.
type ReplicaView struct {
	Log      kernel.Log
	HW       int64
	Leader   int32
	Epoch    int32
	ISR      []int32 // the committed ISR as this broker applied it
	Follower bool    // a fetcher follows it
}

// Replica returns this broker's replica of tp (ok false: none).
func (m *Module) Replica(tp kernel.TopicPartition) (ReplicaView, bool) {
	m.mu.RLock()
	p := m.parts[tp]
	m.mu.RUnlock()
	if p == nil {
		return ReplicaView{}, false
	}
	pl := p.place.Load()
	v := ReplicaView{Log: p.log, HW: p.hw.Load(), Leader: pl.leader, Epoch: pl.epoch, ISR: slices.Clone(pl.isr)}
	m.fetchers.mu.Lock()
	for _, f := range m.fetchers.by {
		f.mu.Lock()
		if fl := f.parts[tp]; fl != nil && fl.p == p {
			v.Follower = true
		}
		f.mu.Unlock()
	}
	m.fetchers.mu.Unlock()
	return v, true
}

// Fetchers returns how many fetchers run and how many partitions they follow.
func (m *Module) Fetchers() (fetchers, partitions int) {
	parts, n := m.fetchers.partitions()
	return n, parts
}

// FetchBytes is the record bytes this broker's Fetch answers carried
// (sluice_fetch_bytes_total).
func (m *Module) FetchBytes() int64 { return m.fetchBytes.Value() }
