// ListTransactions: v0-v2 (KIP-664): state and producer-id filters, v1 the duration
// filter (KIP-994), v2 the transactional-id pattern (re2 syntax, KIP-1152).

package txn

import (
	"context"
	"regexp"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// listTransactionsClaim claims the versions this file's header lists.
func listTransactionsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ListTransactions, Min: 0, Max: 2, Handler: kernel.Typed(m.handleListTransactions)}
}

func (m *Module) handleListTransactions(ctx context.Context, req *kernel.Request, r *kmsg.ListTransactionsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[txnState]bool{}
	for _, name := range r.StateFilters {
		s, ok := parseState(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states[s] = true
	}
	var re *regexp.Regexp
	if r.Version >= 2 && r.TransactionalIDPattern != nil && *r.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile(*r.TransactionalIDPattern); err != nil {
			m.log.Debug("ListTransactions with an invalid pattern", "pattern", *r.TransactionalIDPattern, "err", err)
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return kernel.Reply(resp), nil
		}
	}
	if m.loading() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return kernel.Reply(resp), nil
	}
	// Unknown state names filter nothing in, as in Kafka: with only unknown names the
	// list is empty.
	stateFilter := len(r.StateFilters) > 0
	nowMs := m.now().UnixMilli()
	duration := int64(-1)
	if r.Version >= 1 {
		duration = r.DurationFilterMillis
	}
	for _, s := range m.readyShards() {
		s.each(func(id string, d *txnData) {
			switch {
			case d.State == stDead:
				return
			case stateFilter && !states[d.State]:
				return
			case len(r.ProducerIDFilters) > 0 && !slices.Contains(r.ProducerIDFilters, d.ProducerID):
				return
			case duration >= 0 && nowMs-d.StartMs <= duration:
				return
			case re != nil && !re.MatchString(id):
				return
			}
			ts := kmsg.NewListTransactionsResponseTransactionState()
			ts.TransactionalID, ts.ProducerID, ts.TransactionState = id, d.ProducerID, d.State.String()
			resp.TransactionStates = append(resp.TransactionStates, ts)
		})
	}
	// Authorization outside the shard locks: the authorizer may block.
	out := resp.TransactionStates[:0]
	for _, ts := range resp.TransactionStates {
		if req.Allowed(ctx, kernel.OpDescribe, kernel.ResTransactionalID, ts.TransactionalID) {
			out = append(out, ts)
		}
	}
	resp.TransactionStates = out
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return kernel.Reply(resp), nil
}
