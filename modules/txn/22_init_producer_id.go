// InitProducerId: v0-v5. v3+ carries the producer's id and epoch (KIP-360); v4+
// answers PRODUCER_FENCED where older versions get INVALID_PRODUCER_EPOCH (KIP-588).
// Not implemented: v6 (KIP-939 two-phase commit).

package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// initProducerIDClaim claims the versions this file's header lists.
func initProducerIDClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.InitProducerID, Min: 0, Max: 5, Handler: kernel.Typed(m.handleInitProducerID)}
}

func (m *Module) handleInitProducerID(ctx context.Context, req *kernel.Request, r *kmsg.InitProducerIDRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	pid, epoch, e := m.initProducerID(ctx, req, r)
	if e != nil {
		resp.ErrorCode = fencedCode(e, r.Version, 4)
		return kernel.Reply(resp), nil
	}
	resp.ProducerID, resp.ProducerEpoch = pid, epoch
	return kernel.Reply(resp), nil
}

func (m *Module) initProducerID(ctx context.Context, req *kernel.Request, r *kmsg.InitProducerIDRequest) (int64, int16, *kerr.Error) {
	if r.TransactionalID == nil {
		// An idempotent producer: always a fresh id with epoch 0, whatever id and
		// epoch it says it had (Kafka does not track idempotent producers here).
		if !mayWriteIdempotently(ctx, req) {
			return -1, -1, kerr.ClusterAuthorizationFailed
		}
		id, e := m.newProducerID(ctx)
		if e != nil {
			return -1, -1, e
		}
		return id, 0, nil
	}
	id := *r.TransactionalID
	if !req.Allowed(ctx, kernel.OpWrite, kernel.ResTransactionalID, id) {
		return -1, -1, kerr.TransactionalIDAuthorizationFailed
	}
	if id == "" {
		m.log.Debug("InitProducerId with an empty transactional id", "client_id", req.ClientID)
		return -1, -1, kerr.InvalidRequest
	}
	if r.TransactionTimeoutMillis <= 0 || int64(r.TransactionTimeoutMillis) > m.settings.Load().maxTimeoutMs {
		m.log.Debug("InitProducerId with an invalid transaction timeout", "transactional_id", id,
			"timeout_ms", r.TransactionTimeoutMillis, "client_id", req.ClientID)
		return -1, -1, kerr.InvalidTransactionTimeout
	}
	var expected *pidEpoch
	switch {
	case r.ProducerID == -1 && r.ProducerEpoch == -1:
	case r.ProducerID < 0 || r.ProducerEpoch < 0:
		return -1, -1, kerr.InvalidRequest
	default:
		expected = &pidEpoch{id: r.ProducerID, epoch: r.ProducerEpoch}
	}
	pid, epoch := int64(-1), int16(-1)
	e := m.onCoordinator(ctx, m.coordinatorFor, id, func(s *shard) *kerr.Error {
		var e *kerr.Error
		pid, epoch, e = s.initProducerID(ctx, id, r.TransactionTimeoutMillis, expected)
		return e
	})
	return pid, epoch, e
}

// mayWriteIdempotently is Kafka's rule for an idempotent InitProducerId (since 2.8,
// KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on any topic. An authorizer
// that cannot answer "any topic" (no kernel.ResourceTypeAuthorizer) is asked only for
// IDEMPOTENT_WRITE on the cluster.
func mayWriteIdempotently(ctx context.Context, req *kernel.Request) bool {
	if req.Allowed(ctx, kernel.OpIdempotentWrite, kernel.ResCluster, kernel.ClusterResourceName) {
		return true
	}
	a, ok := req.Authorizer.(kernel.ResourceTypeAuthorizer)
	return ok && a.AuthorizeByResourceType(ctx, req.Conn.Principal, req.Conn.Host(), kernel.OpWrite, kernel.ResTopic)
}
