// EndTxn: v0-v5. v2+ answers PRODUCER_FENCED where older versions get
// INVALID_PRODUCER_EPOCH. v5 is KIP-890 part 2 (transaction version 2): the
// coordinator bumps the producer epoch at every EndTxn, writes the markers at the
// bumped epoch and answers the producer id and epoch of the next transaction; an
// abort with no ongoing transaction is legal. Clients send v5 only once the cluster
// finalized transaction.version 2; as in Kafka, the request's version decides.

package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// endTxnClaim claims the versions this file's header lists.
func endTxnClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.EndTxn, Min: 0, Max: 5, Handler: kernel.Typed(m.handleEndTxn)}
}

func (m *Module) handleEndTxn(ctx context.Context, req *kernel.Request, r *kmsg.EndTxnRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	answer, e := m.endTxn(ctx, req, r)
	resp.ErrorCode = fencedCode(e, r.Version, 2)
	resp.ProducerID, resp.ProducerEpoch = answer.id, answer.epoch
	return kernel.Reply(resp), nil
}

// endTxnTV is the transaction version of an EndTxn of version v.
func endTxnTV(v int16) int16 {
	if v >= 5 {
		return 2
	}
	return 0
}

func (m *Module) endTxn(ctx context.Context, req *kernel.Request, r *kmsg.EndTxnRequest) (pidEpoch, *kerr.Error) {
	answer := pidEpoch{id: -1, epoch: -1}
	if !req.Allowed(ctx, kernel.OpWrite, kernel.ResTransactionalID, r.TransactionalID) {
		return answer, kerr.TransactionalIDAuthorizationFailed
	}
	if r.TransactionalID == "" {
		return answer, kerr.InvalidRequest
	}
	e := m.onCoordinator(ctx, m.coordinatorFor, r.TransactionalID, func(s *shard) *kerr.Error {
		var e *kerr.Error
		answer, e = s.endTxn(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit, endTxnTV(r.Version))
		return e
	})
	if e != nil {
		return pidEpoch{id: -1, epoch: -1}, e
	}
	return answer, nil
}
