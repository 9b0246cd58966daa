// DescribeClientQuotas: v0-v1. Needs DESCRIBE_CONFIGS on the cluster. Filters by entity
// components with Kafka's match types (exact name, default, any) and strictness
// (quota.Set.Describe). Not implemented: nothing known.

package quotas

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/quotas/quota"
)

func describeClientQuotasClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeClientQuotas, Min: 0, Max: 1, Handler: kernel.Typed(m.handleDescribeClientQuotas)}
}

func (m *Module) handleDescribeClientQuotas(ctx context.Context, req *kernel.Request, r *kmsg.DescribeClientQuotasRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(e *kerr.Error, msg string) (kernel.Response, error) {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return kernel.Reply(resp), nil
	}
	if !req.Allowed(ctx, kernel.OpDescribeConfigs, kernel.ResCluster, kernel.ClusterResourceName) {
		return fail(kerr.ClusterAuthorizationFailed, "")
	}
	filter := make([]quota.FilterComponent, 0, len(r.Components))
	for _, c := range r.Components {
		fc := quota.FilterComponent{Type: c.EntityType, MatchType: int8(c.MatchType)}
		if c.Match != nil {
			fc.Match = *c.Match
		}
		filter = append(filter, fc)
	}
	entries, err := m.quotaSet().Describe(filter, r.Strict)
	if err != nil {
		return fail(errorCode(err), err.Error())
	}
	resp.Entries = make([]kmsg.DescribeClientQuotasResponseEntry, 0, len(entries))
	for _, e := range entries {
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, c := range e.Entity.Components() {
			rc := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			rc.Type = c.Type
			if !c.Default {
				name := c.Name
				rc.Name = &name
			}
			re.Entity = append(re.Entity, rc)
		}
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, e.Values[k]
			re.Values = append(re.Values, v)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return kernel.Reply(resp), nil
}

// errorCode maps the quota package's errors to Kafka's code (INVALID_REQUEST, as Kafka
// answers bad entities, keys, values and filters).
func errorCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, quota.ErrInvalidEntity), errors.Is(err, quota.ErrInvalidQuota), errors.Is(err, quota.ErrInvalidRequest):
		return kerr.InvalidRequest
	}
	return kerr.UnknownServerError
}
