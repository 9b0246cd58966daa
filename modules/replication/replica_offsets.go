package replication

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kclient"
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
	return batchTimestamp(hdr[:], offset)
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

// LeaderHighWatermarks implements kernel.LeaderOffsets: one ListOffsets (latest,
// read_uncommitted: the high watermark) to each leader of tps, over a connection
// dialed for it and closed after.
func (m *Module) LeaderHighWatermarks(ctx context.Context, tps []kernel.TopicPartition) map[kernel.TopicPartition]int64 {
	at := make(map[kernel.TopicPartition]int64, len(tps))
	for _, tp := range tps {
		at[tp] = 0
	}
	return m.askLeaders(ctx, at, m.askHighWatermarks)
}

// askLeaders groups the partitions of at (partition -> offset) by their leader in the
// current image, leaving out those this broker leads or that have none, and runs ask
// for each leader concurrently, merging what they answer.
func (m *Module) askLeaders(ctx context.Context, at map[kernel.TopicPartition]int64,
	ask func(ctx context.Context, cfg *replicaConfig, leader int32, parts map[kernel.TopicPartition]int64) map[kernel.TopicPartition]int64,
) map[kernel.TopicPartition]int64 {
	im := m.meta.Image()
	byLeader := map[int32]map[kernel.TopicPartition]int64{}
	for tp, off := range at {
		t := im.Topic(tp.Topic)
		if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		l := t.Partitions[tp.Partition].Leader
		if l < 0 || l == m.broker.NodeID {
			continue
		}
		if byLeader[l] == nil {
			byLeader[l] = map[kernel.TopicPartition]int64{}
		}
		byLeader[l][tp] = off
	}
	out := map[kernel.TopicPartition]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	cfg := m.rcfg.Load()
	for leader, parts := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := ask(ctx, cfg, leader, parts)
			mu.Lock()
			maps.Copy(out, got)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// askHighWatermarks is one leader's ListOffsets for topics' partitions; errors leave
// partitions out (the caller keeps what it knew).
func (m *Module) askHighWatermarks(ctx context.Context, cfg *replicaConfig, leader int32, parts map[kernel.TopicPartition]int64) map[kernel.TopicPartition]int64 {
	conn, vers, err := m.dialBroker(ctx, cfg, leader, fmt.Sprintf("sluice-lag-%d", m.broker.NodeID), kclient.DefaultMaxResponseBytes)
	if err != nil {
		m.log.Debug("asking a leader for high watermarks", "leader", leader, "err", err)
		return nil
	}
	defer conn.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	v, ok := vers[kmsg.ListOffsets.Int16()]
	if !ok || v < 1 {
		return nil
	}
	req.SetVersion(min(req.MaxVersion(), v))
	req.ReplicaID = -1
	topics := map[string]int{}
	for tp := range parts {
		i, ok := topics[tp.Topic]
		if !ok {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			topics[tp.Topic] = i
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.Partition, -1, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := conn.Request(ctx, req)
	if err != nil {
		m.log.Debug("asking a leader for high watermarks", "leader", leader, "err", err)
		return nil
	}
	resp, ok := kresp.(*kmsg.ListOffsetsResponse)
	if !ok {
		return nil
	}
	out := map[kernel.TopicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				out[kernel.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
			}
		}
	}
	return out
}

var _ kernel.LeaderOffsets = (*Module)(nil)

// timestampFetchBytes bounds what a LeaderBatchTimestamps fetch asks per partition,
// and timestampFetchMax the whole answer.
const (
	timestampFetchBytes = 64 << 10
	timestampFetchMax   = 8 << 20
)

// LeaderBatchTimestamps implements kernel.LeaderOffsets: one Fetch (as a consumer,
// read_uncommitted, no wait) to each leader of the partitions in at, each from its
// offset; the first batch of each answer gives the timestamp.
func (m *Module) LeaderBatchTimestamps(ctx context.Context, at map[kernel.TopicPartition]int64) map[kernel.TopicPartition]int64 {
	return m.askLeaders(ctx, at, m.askBatchTimestamps)
}

// askBatchTimestamps is one leader's Fetch for parts (partition -> offset).
func (m *Module) askBatchTimestamps(ctx context.Context, cfg *replicaConfig, leader int32, parts map[kernel.TopicPartition]int64) map[kernel.TopicPartition]int64 {
	conn, vers, err := m.dialBroker(ctx, cfg, leader, fmt.Sprintf("sluice-lag-%d", m.broker.NodeID), 2*timestampFetchMax)
	if err != nil {
		m.log.Debug("asking a leader for batch timestamps", "leader", leader, "err", err)
		return nil
	}
	defer conn.Close()
	req := kmsg.NewPtrFetchRequest()
	v, ok := vers[kmsg.Fetch.Int16()]
	if !ok || v < 4 {
		return nil
	}
	req.SetVersion(min(req.MaxVersion(), v))
	req.ReplicaID, req.ReplicaState.ID = -1, -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, timestampFetchMax
	req.SessionID, req.SessionEpoch = 0, -1
	im := m.meta.Image()
	topics := map[string]int{}
	ids := map[[16]byte]string{} // v13+ answers name topics by id
	for tp, off := range parts {
		i, ok := topics[tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = tp.Topic
			if ti := im.Topic(tp.Topic); ti != nil {
				t.TopicID = ti.ID
				ids[ti.ID] = tp.Topic
			}
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[tp.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.Partition, off, timestampFetchBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := conn.Request(ctx, req)
	if err != nil {
		m.log.Debug("asking a leader for batch timestamps", "leader", leader, "err", err)
		return nil
	}
	resp, ok := kresp.(*kmsg.FetchResponse)
	if !ok {
		return nil
	}
	out := map[kernel.TopicPartition]int64{}
	for _, t := range resp.Topics {
		name := t.Topic
		if name == "" {
			name = ids[t.TopicID]
		}
		for _, p := range t.Partitions {
			tp := kernel.TopicPartition{Topic: name, Partition: p.Partition}
			off, asked := parts[tp]
			if !asked || p.ErrorCode != 0 {
				continue
			}
			if ts, ok := batchTimestamp(p.RecordBatches, off); ok {
				out[tp] = ts
			}
		}
	}
	return out
}

// batchTimestamp reads the timestamp of the first batch of b, if it is whole enough
// to have a header and holds offset (or starts after it: offset fell in a gap).
func batchTimestamp(b []byte, offset int64) (int64, bool) {
	h, err := recordbatch.ParseHeader(b)
	if err != nil || h.LastOffset() < offset {
		return 0, false
	}
	if h.Attributes&recordbatch.AttrLogAppendTime != 0 {
		return h.MaxTimestamp, true
	}
	return h.BaseTimestamp, true
}
