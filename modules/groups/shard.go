package groups

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/coordinator"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/classic"
	"github.com/sluicehq/sluice/modules/groups/consumer"
	"github.com/sluicehq/sluice/modules/groups/offsets"
	"github.com/sluicehq/sluice/modules/groups/share"
)

// A shard is one __consumer_offsets partition this broker leads, with the groups that
// hash to it (offsets.PartitionFor): the state machine the coordinator skeleton
// (internal/coordinator) loads, writes for and sweeps. Its life:
//
//	load: replay the partition's log into the store from AppliedOffset+1 (Replay),
//	      restore its classic groups from their group metadata (Loaded, restore.go)
//	─► ready (the writer applies what it appends: Appended) ─► Unload (leadership
//	      lost, failure, Stop): groups marked Dead
//
// Invariants:
//   - Records reach the store only through the shard's single writer (after load)
//     or the replay (before), in log order, so AppliedOffset is exact and a restart
//     replays exactly what the store lacks. Transactional offsets reach it at their
//     marker, which the writer may see after later plain records; txn.go explains
//     why the result is still the log's (the latest commit record wins) and how the
//     replay start stays at or below every open transaction (TxnReplayStart).
//   - A commit is acknowledged only after its records are committed in the log
//     (kernel.Partitions.Append waits for the high watermark) and applied to the
//     store: an acknowledged commit survives a crash (the log replays it) and is
//     visible to every later OffsetFetch (the store has it).
//   - One leader epoch, one shard: a new epoch means a new shard that replays the
//     log again; the old one is unloaded.
type shard struct {
	*coordinator.Shard // partition, leader epoch, writer; its Context ends at unload
	m                  *Module
	tp                 kernel.TopicPartition // Shard.TP()

	mu     sync.Mutex
	groups map[string]*group
	dead   bool

	// metaMu orders group metadata records: it is held from a group's snapshot
	// (metadataRecord) until its record is queued to the writer, so the records of
	// one group reach the log in the order of their snapshots whether the sweeper
	// or a SyncGroup handler writes them.
	metaMu sync.Mutex

	// shareMu serializes the fencing checks and writes of share-partition states
	// (share_state.go).
	shareMu sync.Mutex

	// Transactional offset commits (txn.go). txnMu guards txns; only the replay and
	// the writer change them.
	txnMu sync.Mutex
	txns  *pendingTxns
	// markerQ holds markers reported by the replication module for the writer,
	// which Wake wakes. Guarded by markerMu.
	markerMu sync.Mutex
	markerQ  []markerEvent
	// replayedThrough is the last log offset the replay handed to the shard (-1 if
	// none beyond its start); queued markers at or below it were replayed. Written
	// by the load before ready closes, read by the writer.
	replayedThrough int64
	replayBuf       []offsets.Record // the loader's
}

type kv struct{ key, value []byte }

func toKV(recs []kv) []coordinator.KV {
	out := make([]coordinator.KV, len(recs))
	for i, r := range recs {
		out[i] = coordinator.KV{Key: r.key, Value: r.value}
	}
	return out
}

// maxFlushRecords bounds the records of one append (and badger transaction).
const maxFlushRecords = 4096

func newShard(m *Module, sh *coordinator.Shard) *shard {
	return &shard{
		Shard: sh, m: m, tp: sh.TP(),
		groups:          map[string]*group{},
		txns:            newPendingTxns(),
		replayedThrough: -1,
	}
}

// ReplayFrom is the store's applied offset + 1, or the earliest transactional batch
// still pending at the last stop if that is below (the txnStart invariant, txn.go)
// (coordinator.State).
func (s *shard) ReplayFrom() int64 {
	from := s.m.store.AppliedOffset(s.tp.Partition) + 1
	if ts, ok := s.m.store.TxnReplayStart(s.tp.Partition); ok {
		s.txns.persisted = ts
		from = min(from, ts)
	}
	s.replayedThrough = from - 1
	return from
}

// Replay applies a committed batch in log order, re-applying records at or below the
// store's applied offset (Reapply: the replay may start below it, see txn.go).
// Transactional batches become pending and markers apply or drop them, as live
// (coordinator.State).
func (s *shard) Replay(b coordinator.Batch) error {
	h := b.Header
	s.replayedThrough = max(s.replayedThrough, h.LastOffset())
	if h.IsControl() {
		return s.replayMarker(h, b.Raw)
	}
	recs := s.replayBuf[:0]
	for _, r := range b.Records {
		if _, err := offsets.DecodeKey(r.Key); err != nil && !errors.Is(err, offsets.ErrUnsupportedVersion) {
			s.m.log.Warn("skipping unreadable __consumer_offsets record", "partition", s.tp.Partition, "offset", r.Offset, "err", err)
			continue
		}
		rec := offsets.Record{Key: append([]byte(nil), r.Key...), Offset: r.Offset}
		if r.Value != nil {
			rec.Value = append([]byte{}, r.Value...)
		}
		recs = append(recs, rec)
	}
	s.replayBuf = recs
	if len(recs) == 0 {
		return nil
	}
	if h.IsTransactional() && h.ProducerID >= 0 {
		return s.addPending(h.ProducerID, h.BaseOffset, recs)
	}
	s.supersedePlain(recs)
	if err := s.m.store.Reapply(s.tp.Partition, recs); err != nil {
		if errors.Is(err, kernel.ErrDiskFull) {
			return err // nothing applied: the load fails, a later one replays it all
		}
		// A record the store cannot decode: skip it (logged) rather than wedge
		// the partition; the rest of the batch still applies.
		s.m.log.Warn("applying replayed batch failed; applying record by record", "partition", s.tp.Partition, "err", err)
		for _, r := range recs {
			if err := s.m.store.Reapply(s.tp.Partition, []offsets.Record{r}); err != nil {
				s.m.log.Warn("skipping unappliable __consumer_offsets record", "partition", s.tp.Partition, "offset", r.Offset, "err", err)
			}
		}
	}
	return nil
}

// Loaded raises (or clears) the persisted replay start to the open transactions'
// first batch, the replay having seen every transaction that started at or after
// its start and those before having ended (the txnStart invariant), then restores
// the classic groups (coordinator.State).
func (s *shard) Loaded() ([]any, error) {
	s.replayBuf = nil
	s.txnMu.Lock()
	first, persisted := s.txns.first(), s.txns.persisted
	s.txnMu.Unlock()
	if first != persisted {
		if err := s.m.store.SetTxnReplayStart(s.tp.Partition, first); err != nil {
			return nil, err
		}
		s.txnMu.Lock()
		s.txns.persisted = first
		s.txnMu.Unlock()
	}
	return []any{"restored_groups", s.restoreGroups()}, nil
}

// Appended applies committed records to the store: a transactional batch's offsets
// become pending, plain records supersede pending ones and apply (coordinator.State).
func (s *shard) Appended(recs []coordinator.Record, p *coordinator.Producer) error {
	ors := make([]offsets.Record, len(recs))
	for i, r := range recs {
		ors[i] = offsets.Record{Key: r.Key, Value: r.Value, Offset: r.Offset}
	}
	if p != nil {
		// On failure the batch is committed but its pending state may not survive a
		// crash: the reload makes it pending again (the applied offset is below it).
		if err := s.addPending(p.ID, ors[0].Offset, ors); err != nil {
			return fmt.Errorf("persist the transactional replay start: %w", err)
		}
		return nil
	}
	s.supersedePlain(ors)
	// On failure the records are committed in the log, so the write succeeded; the
	// store missed them, so the reload replays them.
	return s.m.store.ApplyBatch(s.tp.Partition, ors)
}

// Sweep fires due group timers and forgets groups empty for longer than
// EmptyGroupIdleMs (coordinator.State).
func (s *shard) Sweep(now time.Time) {
	s.tick(now, time.Duration(s.m.EmptyGroupIdleMs)*time.Millisecond)
}

// Woken applies the queued transaction markers (coordinator.Waker).
func (s *shard) Woken() { s.drainMarkers() }

// Unload marks every group dead with code (waiting joins and syncs are answered with
// it) (coordinator.State).
func (s *shard) Unload(code *kerr.Error) {
	s.mu.Lock()
	s.dead = true
	gs := s.groups
	s.groups = map[string]*group{}
	s.mu.Unlock()
	for _, g := range gs {
		g.markDead(code)
	}
}

// write appends recs through the writer and waits for the outcome: nil once they are
// committed and applied.
func (s *shard) write(ctx context.Context, recs []kv) *kerr.Error {
	return s.Write(ctx, toKV(recs))
}

// writeChunked writes recs in chunks of at most maxFlushRecords (so one huge commit
// does not exceed one badger transaction); each chunk is atomic, the whole is not.
func (s *shard) writeChunked(ctx context.Context, recs []kv) *kerr.Error {
	for len(recs) > 0 {
		n := min(len(recs), maxFlushRecords)
		if e := s.write(ctx, recs[:n]); e != nil {
			return e
		}
		recs = recs[n:]
	}
	return nil
}

// lookup returns the group, or nil.
func (s *shard) lookup(id string) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups[id]
}

// allGroups returns the shard's groups as they are now, so callers can work on them
// without s.mu.
func (s *shard) allGroups() []*group {
	s.mu.Lock()
	defer s.mu.Unlock()
	gs := make([]*group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	return gs
}

// classicGroup returns the classic group id, creating it if create is set. A group of
// the other protocol answers INCONSISTENT_GROUP_PROTOCOL.
func (s *shard) classicGroup(id string, create bool) (*classic.Group, *kerr.Error) {
	g, e := s.groupOf(id, create, kindClassic, kerr.InconsistentGroupProtocol, kerr.UnknownMemberID, func() *group {
		cfg := s.m.settings.Load().classic
		cfg.Server = classicAssigner{s}
		return &group{id: id, classic: classic.New(id, cfg, s.m.now())}
	})
	if e != nil {
		return nil, e
	}
	return g.classic, nil
}

// consumerGroup returns the KIP-848 group id, creating it if create is set. An empty
// classic group is converted (its offsets stay); a classic group with members
// answers GROUP_ID_NOT_FOUND (the heartbeat handler then tries an upgrade,
// migration.go).
func (s *shard) consumerGroup(id string, create bool) (*consumer.Group, *kerr.Error) {
	g, e := s.groupOf(id, create, kindConsumer, kerr.GroupIDNotFound, kerr.GroupIDNotFound, func() *group {
		cfg := s.consumerConfig()
		// A group forgotten while empty (or never loaded) comes back with its
		// epochs from its records, so they never go back.
		if g := s.restoreConsumer(id, cfg, s.m.now()); g != nil {
			return g
		}
		return &group{id: id, consumer: consumer.New(id, cfg, s.m.now())}
	})
	if e != nil {
		return nil, e
	}
	return g.consumer, nil
}

// shareGroup returns the share group id, creating it if create is set. An empty group
// of another protocol becomes a share group on a join; one with members answers
// GROUP_ID_NOT_FOUND (a group id holds one protocol's members).
func (s *shard) shareGroup(id string, create bool) (*share.Group, *kerr.Error) {
	g, e := s.groupOf(id, create, kindShare, kerr.GroupIDNotFound, kerr.GroupIDNotFound, func() *group {
		cfg := s.shareConfig()
		if g := s.restoreShare(id, cfg, s.m.now()); g != nil {
			return g
		}
		return &group{id: id, share: share.New(id, cfg, s.m.now())}
	})
	if e != nil {
		return nil, e
	}
	return g.share, nil
}

// shareConfig is the configuration of the shard's share groups.
func (s *shard) shareConfig() share.Config {
	set := s.m.settings.Load().share
	return share.Config{SessionTimeout: set.session, HeartbeatInterval: set.heartbeat, MaxSize: set.maxSize}
}

// consumerConfig is the configuration of the shard's KIP-848 groups.
func (s *shard) consumerConfig() consumer.Config {
	set := s.m.settings.Load()
	return consumer.Config{
		SessionTimeout:    set.consumerSession,
		HeartbeatInterval: set.consumerHeartbeat,
		MaxSize:           set.consumerMaxSize,
		Assignors:         s.m.assignors,
		OnAssignorChosen:  s.m.logAssignorChosen,

		ClassicMinSessionTimeout: set.classic.MinSessionTimeout,
		ClassicMaxSessionTimeout: set.classic.MaxSessionTimeout,
		ClassicMaxProtocols:      set.classic.MaxProtocols,
		ClassicMaxMetadataBytes:  set.classic.MaxMetadataBytes,
	}
}

// groupOf returns group id of protocol kind, creating it with newGroup (called with
// s.mu held) if create is set. A group of another protocol answers other, unless
// create is set and it is empty: it then becomes a group of this protocol on the
// join, as in Kafka, and its committed offsets stay. Without create a missing group
// answers missing.
func (s *shard) groupOf(id string, create bool, kind groupKind, other, missing *kerr.Error, newGroup func() *group) (*group, *kerr.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil, kerr.NotCoordinator
	}
	if g := s.groups[id]; g != nil {
		if g.kind() == kind {
			return g, nil
		}
		if !create || !g.isEmpty() {
			return nil, other
		}
		g.markDead(kerr.CoordinatorNotAvailable)
		delete(s.groups, id)
	}
	if !create {
		return nil, missing
	}
	g := newGroup()
	s.groups[id] = g
	return g, nil
}

// tick fires due group timers and forgets groups empty for longer than idle.
func (s *shard) tick(now time.Time, idle time.Duration) {
	gs := s.allGroups()
	for _, g := range gs {
		g.tick(now)
	}
	s.persist(s.Context(), gs...)
	for _, g := range gs {
		s.maybeDowngrade(s.Context(), g) // an expiry may have removed the last KIP-848 member
	}
	for _, g := range gs {
		if !g.isEmpty() {
			g.emptySince = time.Time{}
			continue
		}
		if g.emptySince.IsZero() {
			g.emptySince = now
		} else if now.Sub(g.emptySince) >= idle {
			s.mu.Lock()
			forget := s.groups[g.id] == g && g.isEmpty()
			if forget {
				delete(s.groups, g.id)
			}
			s.mu.Unlock()
			if forget {
				// A join that looked the group up just before it was forgotten
				// gets COORDINATOR_NOT_AVAILABLE and retries on a fresh group.
				g.markDead(kerr.CoordinatorNotAvailable)
			}
		}
	}
}

// expireOffsets writes tombstones for the expired offsets of empty groups of this
// shard (offsets.retention.minutes): through the log, so a replay agrees.
func (s *shard) expireOffsets(ctx context.Context, now time.Time, retention time.Duration) {
	gs, err := s.m.store.Groups()
	if err != nil {
		return
	}
	n := s.m.offsetsPartitions()
	var recs []kv
	for _, id := range gs {
		if n <= 0 || offsets.PartitionFor(id, n) != s.tp.Partition {
			continue
		}
		if g := s.lookup(id); g != nil && !g.isEmpty() {
			continue
		}
		base := time.Time{}
		if g := s.lookup(id); g != nil && !g.emptySince.IsZero() {
			base = g.emptySince
		} else if md, ok, _ := s.m.store.GroupMetadata(id); ok && len(md.Members) == 0 && md.CurrentStateTimestamp > 0 {
			base = time.UnixMilli(md.CurrentStateTimestamp) // empty since then
		}
		offs, err := s.m.store.FetchGroup(id)
		if err != nil {
			continue
		}
		for tp, c := range offs {
			expired := false
			switch {
			case c.ExpireTimestamp > 0:
				expired = c.ExpireTimestamp <= now.UnixMilli()
			case !base.IsZero():
				expired = now.Sub(base) >= retention
			default:
				expired = now.UnixMilli()-c.CommitTimestamp >= retention.Milliseconds()
			}
			// An offset with a pending transactional commit does not expire (as
			// Kafka): the transaction is about to replace it.
			if expired && !s.hasPending(id, tp.Topic, tp.Partition) {
				recs = append(recs, kv{key: offsets.EncodeOffsetKey(id, tp.Topic, tp.Partition)})
			}
		}
	}
	if len(recs) == 0 {
		return
	}
	if e := s.writeChunked(ctx, recs); e != nil {
		s.m.log.Warn("expiring offsets failed", "partition", s.tp.Partition, "err", e)
		return
	}
	s.m.log.Info("expired committed offsets", "partition", s.tp.Partition, "offsets", len(recs))
}

// offsetsPartitions returns the partition count of __consumer_offsets, or 0.
func (m *Module) offsetsPartitions() int32 {
	t := m.meta.Image().Topic(OffsetsTopic)
	if t == nil {
		return 0
	}
	return int32(len(t.Partitions))
}
