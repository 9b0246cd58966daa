// AlterClientQuotas: v0-v1. Needs ALTER_CONFIGS on the cluster. Each entry is validated
// whole (entity, keys, values: quota.Set.Apply) and written as one metadata extension
// record (store.go), so every broker applies it; validate_only checks without writing.
// Not implemented: nothing known.

package quotas

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/quotas/quota"
)

func alterClientQuotasClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterClientQuotas, Min: 0, Max: 1, Handler: kernel.Typed(m.handleAlterClientQuotas)}
}

// maxAlterEntries bounds the entries of one AlterClientQuotas: each is a metadata write.
const maxAlterEntries = 1000

func (m *Module) handleAlterClientQuotas(ctx context.Context, req *kernel.Request, r *kmsg.AlterClientQuotasRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := req.Allowed(ctx, kernel.OpAlterConfigs, kernel.ResCluster, kernel.ClusterResourceName)
	for i, re := range r.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		out.Entity = make([]kmsg.AlterClientQuotasResponseEntryEntity, 0, len(re.Entity))
		for _, c := range re.Entity {
			oc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oc.Type, oc.Name = c.Type, c.Name
			out.Entity = append(out.Entity, oc)
		}
		set := func(e *kerr.Error, msg string) {
			out.ErrorCode = e.Code
			if msg != "" {
				out.ErrorMessage = &msg
			}
		}
		switch {
		case !allowed:
			set(kerr.ClusterAuthorizationFailed, "")
		case i >= maxAlterEntries:
			set(kerr.InvalidRequest, "too many entries in one request")
		default:
			if e, msg := m.alterOne(ctx, re, r.ValidateOnly); e != nil {
				set(e, msg)
			}
		}
		resp.Entries = append(resp.Entries, out)
	}
	return kernel.Reply(resp), nil
}

// alterOne applies one entry (or only checks it, with validateOnly).
func (m *Module) alterOne(ctx context.Context, re kmsg.AlterClientQuotasRequestEntry, validateOnly bool) (*kerr.Error, string) {
	cs := make([]quota.Component, 0, len(re.Entity))
	for _, c := range re.Entity {
		qc := quota.Component{Type: c.Type, Default: c.Name == nil}
		if c.Name != nil {
			qc.Name = *c.Name
		}
		cs = append(cs, qc)
	}
	e, err := quota.NewEntity(cs...)
	if err != nil {
		return errorCode(err), err.Error()
	}
	ops := make([]quota.Op, 0, len(re.Ops))
	for _, o := range re.Ops {
		ops = append(ops, quota.Op{Key: o.Key, Value: o.Value, Remove: o.Remove})
	}
	// Check against the current set: Apply validates every op and gives the entity's
	// resulting values. Two concurrent alters of one entity: the later write wins whole.
	_, vals, err := m.quotaSet().Apply(e, ops)
	if err != nil {
		return errorCode(err), err.Error()
	}
	if validateOnly {
		return nil, ""
	}
	var value []byte
	if len(vals) > 0 {
		if value, err = encodeStored(e, vals); err != nil {
			return kerr.UnknownServerError, err.Error()
		}
	}
	if err := m.ext.PutExtension(ctx, Namespace, storageKey(e), value); err != nil {
		m.log.Warn("writing a client quota failed", "entity", e.String(), "err", err)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return kerr.RequestTimedOut, ""
		}
		return kerr.UnknownServerError, "the metadata log did not take the change: " + err.Error()
	}
	// PutExtension returns once this broker's image has the change: rebuild from it
	// now, so a DescribeClientQuotas to this broker after the answer sees it.
	m.refresh(m.meta.Image())
	return nil, ""
}
