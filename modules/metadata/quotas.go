package metadata

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// Controller mutation quotas (KIP-599, controller_mutation_rate): CreateTopics,
// CreatePartitions and DeleteTopics charge the partitions they create or delete to the
// client's quota. The quota module registers itself (kernel.QuotasHook: it depends on
// this module for its store, so this module cannot look it up). Requests at versions
// that know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+, DeleteTopics v5+,
// CreatePartitions v3+) are strict: once the client is over its quota, each further
// topic of the request is refused with that error, as Kafka's controller does, topic
// by topic; older versions are admitted and only throttled. validate_only requests are
// not charged.

// SetQuotas implements kernel.QuotasHook. It is called during Provision, before any
// request is served.
func (m *Module) SetQuotas(q kernel.Quotas) { m.quotas = q }

// mutationCharge charges one request's mutations and keeps the largest throttle.
type mutationCharge struct {
	q        kernel.Quotas
	client   kernel.QuotaClient
	strict   bool
	throttle time.Duration
}

func (m *Module) mutationCharge(req *kernel.Request, strict bool) *mutationCharge {
	return &mutationCharge{q: m.quotas, client: kernel.QuotaClientOf(req), strict: strict}
}

// admit charges cost partitions; a refused strict mutation is THROTTLING_QUOTA_EXCEEDED.
func (c *mutationCharge) admit(cost int) error {
	if c.q == nil || cost <= 0 {
		return nil
	}
	ok, t := c.q.AdmitMutation(c.client, cost, c.strict, time.Now())
	c.throttle = max(c.throttle, t)
	if !ok {
		return opErr(kerr.ThrottlingQuotaExceeded, "controller_mutation_rate quota exceeded; retry in %d ms", t.Milliseconds())
	}
	return nil
}

// millis is the throttle as throttle_time_ms.
func (c *mutationCharge) millis() int32 { return int32(min(c.throttle, time.Hour).Milliseconds()) }

var _ kernel.QuotasHook = (*Module)(nil)
