// The share-partition leader (KIP-932): for each partition this broker leads and each
// share group that fetches it, the in-flight record states (sharepart.Partition),
// loaded from and written to the group's durable share state (share_state.go);
// ShareFetch (78_share_fetch.go) and ShareAcknowledge (79_share_acknowledge.go) work
// on them, and the sweep releases expired locks, closes idle share sessions and
// drops the share-partitions of partitions led elsewhere.
//
// Invariants:
//   - A share-partition is served only at the leader epoch it was loaded at: a
//     leadership change (seen by the next request or the sweep) reloads it from the
//     durable state, which the load's read fences the previous leader out of.
//   - Acknowledgements are answered after the state they change is durable: ack
//     writes the snapshot (when its Version moved) before returning. A write the
//     coordinator refuses (FENCED_*) unloads the share-partition and answers its code.
//   - Acquisitions are not written (Kafka writes them neither): a crash redelivers
//     acquired records with the delivery count of the last write.
//   - Records archived at the delivery limit go to the group's dead-letter topic, if
//     it has one, before the state that archived them is written.

package groups

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/interbroker"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
	"github.com/sluicehq/sluice/modules/groups/sharepart"
)

// sharePartKey names a share-partition: a share group on one topic partition.
type sharePartKey struct {
	group string
	tp    kernel.TopicPartition
}

// sharePart is one loaded share-partition.
type sharePart struct {
	key     sharePartKey
	topicID [16]byte
	epoch   int32 // the data partition's leader epoch it was loaded at

	mu         sync.Mutex // held by load, persist and the DLQ flush
	p          *sharepart.Partition
	stateEpoch int32
	written    uint64 // p.Version() of the last state written
	dead       bool   // unloaded: a new sharePart replaces it
}

// shareLeader serves the share-partitions of the partitions this broker leads.
type shareLeader struct {
	m        *Module
	sessions *shareSessions

	mu    sync.Mutex
	parts map[sharePartKey]*sharePart

	remote shareRemote // reaches other brokers' group coordinators
}

func newShareLeader(m *Module) *shareLeader {
	set := m.settings.Load().share
	return &shareLeader{
		m:        m,
		sessions: newShareSessions(shareMaxSessions, set.session),
		parts:    map[sharePartKey]*sharePart{},
		remote: shareRemote{m: m, peers: interbroker.NewPeers(m.interbroker, m.meta.Image,
			fmt.Sprintf("sluice-share-%d", m.broker.NodeID))},
	}
}

// shareMaxSessions bounds the share sessions of one broker (Kafka's
// group.share.max.share.sessions default).
const shareMaxSessions = 2000

// part returns the share-partition of group on tp, loading it if needed. It answers
// NOT_LEADER_OR_FOLLOWER when this broker does not lead tp.
func (l *shareLeader) part(ctx context.Context, group string, tp kernel.TopicPartition) (*sharePart, *kerr.Error) {
	epoch, ok := l.m.parts.Leader(tp)
	if !ok {
		return nil, kerr.NotLeaderForPartition
	}
	ti := l.m.meta.Image().Topic(tp.Topic)
	if ti == nil || tp.Partition < 0 || int(tp.Partition) >= len(ti.Partitions) {
		return nil, kerr.UnknownTopicOrPartition
	}
	k := sharePartKey{group, tp}
	l.mu.Lock()
	sp := l.parts[k]
	var old *sharePart
	if sp == nil || sp.epoch != epoch || sp.topicID != ti.ID {
		old = sp
		sp = &sharePart{key: k, topicID: ti.ID, epoch: epoch}
		l.parts[k] = sp
	}
	l.mu.Unlock()
	if old != nil {
		old.unload() // lock order: sp.mu before l.mu (drop), so not under l.mu
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.dead {
		return nil, kerr.NotLeaderForPartition
	}
	if sp.p != nil {
		return sp, nil
	}
	if e := l.load(ctx, sp); e != nil {
		return nil, e
	}
	return sp, nil
}

// load reads sp's durable state, or initializes it (share.auto.offset.reset) and
// writes it. Called with sp.mu held.
func (l *shareLeader) load(ctx context.Context, sp *sharePart) *kerr.Error {
	cfg := l.m.shareConfig(sp.key.group)
	sk := shareStateKey{sp.key.group, sp.topicID, sp.key.tp.Partition}
	st, found, e := l.readState(ctx, sk, sp.epoch)
	if e != nil {
		return e
	}
	if found && st.StartOffset >= 0 {
		snap := sharepart.Snapshot{StartOffset: st.StartOffset}
		for _, b := range st.Batches {
			snap.Batches = append(snap.Batches, sharepart.StateBatch{First: b.FirstOffset, Last: b.LastOffset,
				State: sharepart.State(b.DeliveryState), DeliveryCount: b.DeliveryCount})
		}
		p, err := sharepart.Restore(cfg.part, snap)
		if err != nil {
			l.m.log.Warn("share state does not restore; starting from its start offset", "group", sp.key.group,
				"topic", sp.key.tp.Topic, "partition", sp.key.tp.Partition, "err", err)
			p = sharepart.New(cfg.part, st.StartOffset)
		}
		sp.p, sp.stateEpoch, sp.written = p, st.StateEpoch, p.Version()
		return nil
	}
	start, e := l.initialOffset(ctx, sp.key.tp, cfg)
	if e != nil {
		return e
	}
	sp.p = sharepart.New(cfg.part, start)
	sp.stateEpoch = st.StateEpoch
	if e := l.writeState(ctx, sp); e != nil {
		sp.p = nil
		return e
	}
	return nil
}

// initialOffset is where a share-partition without state starts, per
// share.auto.offset.reset: the high watermark (latest, the default), the log start
// (earliest), or the first offset at or after now minus a duration (by_duration).
func (l *shareLeader) initialOffset(ctx context.Context, tp kernel.TopicPartition, cfg shareGroupConfig) (int64, *kerr.Error) {
	logStart, hw, ok := l.m.poffs.Offsets(tp)
	if !ok {
		return 0, kerr.NotLeaderForPartition
	}
	switch {
	case cfg.earliest:
		return logStart, nil
	case cfg.byDuration > 0:
		return l.offsetForTime(ctx, tp, logStart, hw, l.m.now().Add(-cfg.byDuration).UnixMilli()), nil
	}
	return hw, nil
}

// offsetForTime returns the base offset of the first batch whose max timestamp is at
// or after ts, scanning from logStart (hw if none).
func (l *shareLeader) offsetForTime(ctx context.Context, tp kernel.TopicPartition, logStart, hw, ts int64) int64 {
	found := hw
	errFound := errors.New("found")
	_ = l.m.parts.ReadCommitted(ctx, tp, logStart, func(batch []byte) error {
		h, err := recordbatch.ParseHeader(batch)
		if err != nil {
			return err
		}
		if h.MaxTimestamp >= ts {
			found = h.BaseOffset
			return errFound
		}
		return nil
	})
	return found
}

// writeState writes sp's snapshot if its Version moved. Called with sp.mu held. A
// fenced write unloads sp.
func (l *shareLeader) writeState(ctx context.Context, sp *sharePart) *kerr.Error {
	v := sp.p.Version()
	snap := sp.p.Snapshot()
	st := offsets.ShareState{StateEpoch: sp.stateEpoch, LeaderEpoch: sp.epoch, StartOffset: snap.StartOffset}
	for _, b := range snap.Batches {
		st.Batches = append(st.Batches, offsets.ShareStateBatch{FirstOffset: b.First, LastOffset: b.Last,
			DeliveryState: int8(b.State), DeliveryCount: b.DeliveryCount})
	}
	e := l.writeStateOf(ctx, shareStateKey{sp.key.group, sp.topicID, sp.key.tp.Partition}, st)
	switch e {
	case nil:
		sp.written = v
	case kerr.FencedLeaderEpoch, kerr.FencedStateEpoch:
		l.drop(sp)
	}
	return e
}

// persist writes sp's state if it changed since the last write, after sending what
// reached the delivery limit to the dead-letter topic. Called with sp.mu held.
func (l *shareLeader) persist(ctx context.Context, sp *sharePart) *kerr.Error {
	l.flushDLQ(ctx, sp)
	if sp.p.Version() == sp.written {
		return nil
	}
	return l.writeState(ctx, sp)
}

// refreshIfIdle unloads group's share-partition on tp when no record of it is
// acquired, after writing what changed, so a new share session reads the durable
// state again: the state may have been reset (AlterShareGroupOffsets,
// DeleteShareGroupOffsets) through the group's coordinator on another broker.
func (l *shareLeader) refreshIfIdle(ctx context.Context, group string, tp kernel.TopicPartition) {
	l.mu.Lock()
	sp := l.parts[sharePartKey{group, tp}]
	l.mu.Unlock()
	if sp == nil {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.dead || sp.p == nil {
		return
	}
	if acquired, _, _ := sp.p.Stats(); acquired > 0 {
		return
	}
	if l.persist(ctx, sp) == nil {
		l.drop(sp)
	}
}

// drop unloads sp (leadership moved or its state was fenced).
func (l *shareLeader) drop(sp *sharePart) {
	sp.dead = true
	l.mu.Lock()
	if l.parts[sp.key] == sp {
		delete(l.parts, sp.key)
	}
	l.mu.Unlock()
}

func (sp *sharePart) unload() {
	sp.mu.Lock()
	sp.dead = true
	sp.mu.Unlock()
}

// release releases what member holds on the session partitions tps of group, and
// writes the resulting states.
func (l *shareLeader) release(ctx context.Context, group, member string, tps []kernel.TopicPartition) {
	now := l.m.now()
	for _, tp := range tps {
		l.mu.Lock()
		sp := l.parts[sharePartKey{group, tp}]
		l.mu.Unlock()
		if sp == nil {
			continue
		}
		sp.mu.Lock()
		if !sp.dead && sp.p != nil {
			sp.p.ReleaseMember(member, now)
			_ = l.persist(ctx, sp)
		}
		sp.mu.Unlock()
	}
}

// run sweeps every interval until ctx ends, then closes done.
func (l *shareLeader) run(ctx context.Context, interval time.Duration, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.sweep(ctx, l.m.now())
		}
	}
}

// sweep releases expired locks (persisting what changed), closes idle sessions and
// unloads share-partitions of partitions this broker no longer leads.
func (l *shareLeader) sweep(ctx context.Context, now time.Time) {
	for k, tps := range l.sessions.expire(now) {
		l.release(ctx, k.group, k.member, tps)
	}
	l.mu.Lock()
	parts := make([]*sharePart, 0, len(l.parts))
	for _, sp := range l.parts {
		parts = append(parts, sp)
	}
	l.mu.Unlock()
	for _, sp := range parts {
		if epoch, ok := l.m.parts.Leader(sp.key.tp); !ok || epoch != sp.epoch {
			sp.mu.Lock()
			l.drop(sp)
			sp.mu.Unlock()
			continue
		}
		sp.mu.Lock()
		if !sp.dead && sp.p != nil {
			if d, ok := sp.p.NextDeadline(); ok && !d.After(now) {
				sp.p.Tick(now)
			}
			_ = l.persist(ctx, sp)
		}
		sp.mu.Unlock()
	}
}

// flushDLQ writes the records archived at the delivery limit to the group's
// dead-letter topic (errors.deadletterqueue.topic.name), if it has one. A failed write
// is logged (rate-limited) and the records stay archived: the dead-letter topic is
// best effort, as Kafka's is. Called with sp.mu held.
func (l *shareLeader) flushDLQ(ctx context.Context, sp *sharePart) {
	ranges := sp.p.TakeArchivedAtLimit()
	if len(ranges) == 0 {
		return
	}
	l.m.shareDLQ.Add(int64(rangeCount(ranges)))
	cfg := l.m.shareConfig(sp.key.group)
	if cfg.dlqTopic == "" {
		return
	}
	if err := l.writeDLQ(ctx, sp, cfg, ranges); err != nil {
		l.m.log.Warn("share group dead-letter write failed", "group", sp.key.group, "topic", sp.key.tp.Topic,
			"partition", sp.key.tp.Partition, "dlq", cfg.dlqTopic, "err", err)
	}
}

func rangeCount(rs []sharepart.Range) int64 {
	var n int64
	for _, r := range rs {
		n += r.Last - r.First + 1
	}
	return n
}

// writeDLQ copies the records of ranges to the dead-letter topic, with headers
// saying where they came from and why (the transforms module's dead-letter format:
// sluice.error, sluice.source.topic, sluice.source.partition; plus
// sluice.source.offset, sluice.share.group and sluice.delivery.count). Without
// errors.deadletterqueue.copy.record.enable only the headers are written (Kafka's
// default), key and value left null.
func (l *shareLeader) writeDLQ(ctx context.Context, sp *sharePart, cfg shareGroupConfig, ranges []sharepart.Range) error {
	ti := l.m.meta.Image().Topic(cfg.dlqTopic)
	if ti == nil && l.m.creator != nil {
		var err error
		if ti, err = l.m.creator.CreateTopic(ctx, cfg.dlqTopic, -1, -1, nil); err != nil {
			return err
		}
	}
	if ti == nil || len(ti.Partitions) == 0 {
		return errors.New("dead-letter topic " + cfg.dlqTopic + " does not exist")
	}
	in := func(off int64) (int16, bool) {
		for _, r := range ranges {
			if off >= r.First && off <= r.Last {
				return r.DeliveryCount, true
			}
		}
		return 0, false
	}
	var recs []recordbatch.Record
	var d recordbatch.Decoder
	first, last := ranges[0].First, ranges[len(ranges)-1].Last
	stop := errors.New("past the ranges")
	err := l.m.parts.ReadCommitted(ctx, sp.key.tp, first, func(batch []byte) error {
		h, err := recordbatch.ParseHeader(batch)
		if err != nil {
			return err
		}
		if h.BaseOffset > last {
			return stop
		}
		if h.IsControl() {
			return nil
		}
		_, err = d.Records(batch, func(r *recordbatch.Record) error {
			off := h.BaseOffset + int64(r.OffsetDelta)
			count, ok := in(off)
			if !ok {
				return nil
			}
			c := recordbatch.Record{Headers: []recordbatch.RecordHeader{
				{Key: []byte("sluice.error"), Value: []byte("delivery count limit reached")},
				{Key: []byte("sluice.share.group"), Value: []byte(sp.key.group)},
				{Key: []byte("sluice.source.topic"), Value: []byte(sp.key.tp.Topic)},
				{Key: []byte("sluice.source.partition"), Value: []byte(strconv.Itoa(int(sp.key.tp.Partition)))},
				{Key: []byte("sluice.source.offset"), Value: []byte(strconv.FormatInt(off, 10))},
				{Key: []byte("sluice.delivery.count"), Value: []byte(strconv.Itoa(int(count)))},
			}}
			if cfg.dlqCopy {
				c.Key = append([]byte(nil), r.Key...)
				c.Value = append([]byte(nil), r.Value...)
				c.Headers = append(append([]recordbatch.RecordHeader(nil), r.Headers...), c.Headers...)
			}
			recs = append(recs, c)
			return nil
		})
		return err
	})
	if err != nil && !errors.Is(err, stop) {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	out := recordbatch.Build(recordbatch.Options{BaseTimestamp: l.m.now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs...)
	dtp := kernel.TopicPartition{Topic: cfg.dlqTopic, Partition: sp.key.tp.Partition % int32(len(ti.Partitions))}
	_, err = l.m.parts.Append(ctx, dtp, out)
	return err
}
