// EndTxn: v0-v4. v2+ answers PRODUCER_FENCED where older versions get
// INVALID_PRODUCER_EPOCH. Not implemented: v5 (KIP-890 part 2, an epoch bump per
// transaction), so it is not advertised and clients keep their epoch across
// transactions.

package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// endTxnClaim claims the versions this file's header lists.
func endTxnClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.EndTxn, Min: 0, Max: 4, Handler: kernel.Typed(m.handleEndTxn)}
}

func (m *Module) handleEndTxn(ctx context.Context, req *kernel.Request, r *kmsg.EndTxnRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = fencedCode(m.endTxn(ctx, req, r), r.Version, 2)
	return kernel.Reply(resp), nil
}

func (m *Module) endTxn(ctx context.Context, req *kernel.Request, r *kmsg.EndTxnRequest) *kerr.Error {
	if !req.Allowed(ctx, kernel.OpWrite, kernel.ResTransactionalID, r.TransactionalID) {
		return kerr.TransactionalIDAuthorizationFailed
	}
	if r.TransactionalID == "" {
		return kerr.InvalidRequest
	}
	return m.onCoordinator(ctx, m.coordinatorFor, r.TransactionalID, func(s *shard) *kerr.Error {
		return s.endTxn(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
	})
}
