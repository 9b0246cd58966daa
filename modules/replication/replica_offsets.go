package replication

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// openReplica returns tp's partition if this broker holds it open, without opening it
// (a scrape must not open partitions).
func (m *Module) openReplica(tp kernel.TopicPartition) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[tp]
}

// ReplicaOffsets implements kernel.ReplicaOffsets.
func (m *Module) ReplicaOffsets(tp kernel.TopicPartition) (logStart, highWatermark int64, ok bool) {
	p := m.openReplica(tp)
	if p == nil || p.offline.Load() {
		return 0, 0, false
	}
	return p.log.LogStartOffset(), p.HighWatermark(), true
}

// BatchTimestamp implements kernel.ReplicaOffsets: the header of the batch holding
// offset, read through the log's index (Read with a header-sized budget returns the
// first batch whole, as a file range or the in-memory tail; only its header is
// copied).
func (m *Module) BatchTimestamp(tp kernel.TopicPartition, offset int64) (int64, bool) {
	p := m.openReplica(tp)
	if p == nil || p.offline.Load() {
		return 0, false
	}
	hw := p.HighWatermark()
	offset = max(offset, p.log.LogStartOffset())
	if offset >= hw {
		return 0, false
	}
	rr, err := p.log.Read(offset, recordbatch.HeaderSize, hw, true)
	if err != nil {
		return 0, false
	}
	defer rr.Release()
	var hdr [recordbatch.HeaderSize]byte
	if n := copyPrefix(hdr[:], &rr); n < len(hdr) {
		return 0, false
	}
	if binary.BigEndian.Uint16(hdr[recordbatch.OffAttributes:])&recordbatch.AttrLogAppendTime != 0 {
		return int64(binary.BigEndian.Uint64(hdr[recordbatch.OffMaxTimestamp:])), true
	}
	return int64(binary.BigEndian.Uint64(hdr[recordbatch.OffBaseTimestamp:])), true
}

// copyPrefix copies the first len(dst) bytes of rr into dst and returns how many it
// copied (fewer when rr is shorter or a file read fails).
func copyPrefix(dst []byte, rr *kernel.ReadResult) int {
	n := 0
	for i := range rr.Chunks {
		if n == len(dst) {
			break
		}
		c := &rr.Chunks[i]
		if c.File == nil {
			n += copy(dst[n:], c.Bytes)
			continue
		}
		want := min(int64(len(dst)-n), c.N)
		got, err := c.File.ReadAt(dst[n:n+int(want)], c.Off)
		n += got
		if err != nil {
			break
		}
	}
	return n
}

var _ kernel.ReplicaOffsets = (*Module)(nil)
