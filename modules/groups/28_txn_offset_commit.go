// TxnOffsetCommit: v0-v6 (v3+ member id, generation and instance id, KIP-447; v5
// KIP-890 part 2: the group coordinator has the transaction coordinator add the
// group's partition to the transaction, as the client sends no AddOffsetsToTxn; v6
// names topics by id, as OffsetCommit v10 does: an unknown id is UNKNOWN_TOPIC_ID).
// See txn.go for how the offsets stay pending until the producer's marker.

package groups

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// txnOffsetCommitClaim claims the versions this file's header lists.
func txnOffsetCommitClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.TxnOffsetCommit, Min: 0, Max: 6, Handler: kernel.Typed(m.handleTxnOffsetCommit)}
}

func (m *Module) handleTxnOffsetCommit(ctx context.Context, req *kernel.Request, r *kmsg.TxnOffsetCommitRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	im := m.meta.Image()
	// codes[i][j] answers r.Topics[i].Partitions[j]; 0 means "commit it".
	codes := make(commitCodes, len(r.Topics))
	names := make([]string, len(r.Topics))
	for i := range r.Topics {
		t := &r.Topics[i]
		codes[i] = make([]int16, len(t.Partitions))
		names[i] = t.Topic
		if r.Version >= 6 {
			names[i] = ""
			if ti := im.TopicByID(t.TopicID); ti != nil {
				names[i] = ti.Name
			}
		}
	}
	// Kafka's order: the transactional id (WRITE), then the group (READ), then each
	// topic (READ) and its existence.
	var s *shard
	var e *kerr.Error
	switch {
	case !req.Allowed(ctx, kernel.OpWrite, kernel.ResTransactionalID, r.TransactionalID):
		e = kerr.TransactionalIDAuthorizationFailed
	case !req.Allowed(ctx, kernel.OpRead, kernel.ResGroup, r.Group):
		e = kerr.GroupAuthorizationFailed
	case r.Group == "":
		e = kerr.InvalidGroupID
	case r.ProducerID < 0 || r.ProducerEpoch < 0:
		e = kerr.InvalidProducerIDMapping
	default:
		s, e = m.coordinatorFor(ctx, r.Group)
	}
	if e == nil {
		e = m.validateTxnCommit(s, r)
	}
	if e == nil {
		e = m.commitSpace()
	}
	if e != nil {
		if e != kerr.TransactionalIDAuthorizationFailed && e != kerr.GroupAuthorizationFailed && m.log.Enabled(ctx, slog.LevelDebug) {
			m.log.Debug("TxnOffsetCommit refused", "group", r.Group, "transactional_id", r.TransactionalID, "producer_id", r.ProducerID, "err", e)
		}
		codes.failUnanswered(e)
	}
	set := m.settings.Load()
	now := m.now().UnixMilli()
	var recs []kv
	for i := range r.Topics {
		t := &r.Topics[i]
		ti := im.Topic(names[i])
		topicCode := kerr.UnknownTopicID.Code
		if names[i] != "" || r.Version < 6 {
			topicCode = commitTopicCode(ctx, req, names[i], ti)
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if !codes.commits(i, j, topicCode, ti, p.Partition, p.Metadata, set.metadataMax) {
				continue
			}
			c := offsets.Committed{Offset: p.Offset, LeaderEpoch: offsets.NoLeaderEpoch, CommitTimestamp: now}
			if r.Version >= 2 {
				c.LeaderEpoch = p.LeaderEpoch
			}
			recs = append(recs, commitRecord(r.Group, names[i], p.Partition, c, p.Metadata))
		}
	}
	// One transactional batch, all or nothing (maxFlushRecords does not apply: a
	// transaction's offsets are one append, as in Kafka).
	if len(recs) > 0 {
		e := m.verifyTxn(ctx, s, r)
		if e == nil {
			e = s.writeTxn(ctx, r.ProducerID, r.ProducerEpoch, recs)
		}
		if e != nil {
			if e == kerr.InvalidProducerEpoch {
				m.log.Debug("TxnOffsetCommit fenced", "group", r.Group, "transactional_id", r.TransactionalID,
					"producer_id", r.ProducerID, "producer_epoch", r.ProducerEpoch)
			}
			codes.failUnanswered(e)
		}
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for j := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = t.Partitions[j].Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return kernel.Reply(resp), nil
}

// verifyTxn asks the transaction coordinator (kernel.TxnVerifier, KIP-890 part 1, as
// Kafka 3.6+ does for TxnOffsetCommit) whether the producer's ongoing transaction
// includes the group's __consumer_offsets partition, before the producer's first
// transactional batch in it: a commit arriving after its transaction ended (a zombie,
// a late retry) would otherwise open a transaction no marker ends, leaving the offsets
// pending (UNSTABLE_OFFSET_COMMIT) forever. Skipped when the producer's transaction is
// already open in the partition, when there is no verifier, and when no coordinator
// can verify. From v5 (KIP-890 part 2) the coordinator adds the partition itself (the
// client sends no AddOffsetsToTxn), for every commit: the open transaction may be the
// previous one, whose marker at the bumped epoch has not arrived yet. The check and
// the append are not atomic (no verification guard in the Log): a marker written in
// between still lets the batch open a transaction.
func (m *Module) verifyTxn(ctx context.Context, s *shard, r *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	add := r.Version >= 5
	if m.txnVerifier == nil || (!add && s.hasOpenTxn(r.ProducerID)) {
		return nil
	}
	err := m.txnVerifier.VerifyTxnPartition(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, s.tp, add)
	if err == nil || (!add && errors.Is(err, kernel.ErrNotCoordinator)) {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if m.log.Enabled(ctx, slog.LevelDebug) {
			m.log.Debug("TxnOffsetCommit refused by the transaction coordinator", "group", r.Group,
				"transactional_id", r.TransactionalID, "producer_id", r.ProducerID, "err", err)
		}
		switch ke {
		case kerr.NotCoordinator, kerr.ConcurrentTransactions:
			// The transaction coordinator's answers, not the group's: a client
			// would look up the group's coordinator again, or (Java) give up on
			// CONCURRENT_TRANSACTIONS, where retrying is what it takes.
			return kerr.CoordinatorLoadInProgress
		}
		return ke
	}
	m.log.Warn("verifying a transactional offset commit failed", "group", r.Group, "transactional_id", r.TransactionalID, "err", err)
	return kerr.CoordinatorNotAvailable
}

// validateTxnCommit checks a TxnOffsetCommit against the group, as Kafka: an unknown
// group accepts commits with generation < 0 (simple consumers and v0-v2, which carry
// no member) and answers ILLEGAL_GENERATION otherwise; a classic group checks the
// member and generation when the request names them (classic.ValidateTxnCommit); a
// KIP-848 group checks the member and its epoch (UNKNOWN_MEMBER_ID,
// STALE_MEMBER_EPOCH) unless it is empty and the request names no epoch.
func (m *Module) validateTxnCommit(s *shard, r *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	g := s.lookup(r.Group)
	if g == nil {
		if r.Generation >= 0 {
			return kerr.IllegalGeneration
		}
		return nil
	}
	if g.share != nil {
		return kerr.GroupIDNotFound // a share group commits nothing
	}
	if g.consumer != nil {
		return g.consumer.ValidateCommit(r.MemberID, r.Generation)
	}
	return g.classic.ValidateTxnCommit(r.MemberID, r.InstanceID, r.Generation, m.now())
}
