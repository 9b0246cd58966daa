// DescribeTransactions: v0 (KIP-664). A transaction in Prepare* lists the partitions
// whose marker is not written yet, as Kafka.

package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// describeTransactionsClaim claims the versions this file's header lists.
func describeTransactionsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeTransactions, Min: 0, Max: 0, Handler: kernel.Typed(m.handleDescribeTransactions)}
}

func (m *Module) handleDescribeTransactions(ctx context.Context, req *kernel.Request, r *kmsg.DescribeTransactionsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		resp.TransactionStates = append(resp.TransactionStates, m.describeTxn(ctx, req, id))
	}
	return kernel.Reply(resp), nil
}

func (m *Module) describeTxn(ctx context.Context, req *kernel.Request, id string) kmsg.DescribeTransactionsResponseTransactionState {
	st := kmsg.NewDescribeTransactionsResponseTransactionState()
	st.TransactionalID = id
	st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
	fail := func(e *kerr.Error) kmsg.DescribeTransactionsResponseTransactionState {
		st.ErrorCode = e.Code
		return st
	}
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTransactionalID, id) {
		return fail(kerr.TransactionalIDAuthorizationFailed)
	}
	if id == "" {
		return fail(kerr.InvalidRequest)
	}
	s, e := m.coordinatorFor(ctx, id)
	if e != nil {
		return fail(e)
	}
	d, ok, e := s.snapshot(id)
	if e != nil {
		return fail(e)
	}
	if !ok {
		return fail(kerr.TransactionalIDNotFound)
	}
	st.State = d.State.String()
	st.TimeoutMillis = d.TimeoutMs
	st.StartTimestamp = d.StartMs
	st.ProducerID, st.ProducerEpoch = d.ProducerID, d.Epoch
	allowed := map[string]bool{}
	for _, tp := range d.Partitions {
		ok, seen := allowed[tp.Topic]
		if !seen {
			ok = req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, tp.Topic)
			allowed[tp.Topic] = ok
		}
		if !ok {
			continue
		}
		if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic = tp.Topic
			st.Topics = append(st.Topics, t)
		}
		last := &st.Topics[len(st.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return st
}
