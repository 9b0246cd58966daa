// GetTelemetrySubscriptions: v0. KIP-714: a client learns which of its metrics the
// broker wants, how often, and its client instance id (a new random one when it sends
// none). No ACL is asked, as in Kafka. Asked again before the push interval passed:
// THROTTLING_QUOTA_EXCEEDED, unless the client's last push was refused for an outdated
// subscription or an unsupported compression. See doc.go.

package telemetry

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// getTelemetrySubscriptionsClaim claims the versions this file's header lists.
func getTelemetrySubscriptionsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.GetTelemetrySubscriptions, Min: 0, Max: 0, Handler: kernel.Replying(m.getTelemetrySubscriptions)}
}

// acceptedCompression are the codecs a push may use besides none, Kafka's order.
var acceptedCompression = []int8{recordbatch.CodecZstd, recordbatch.CodecLZ4, recordbatch.CodecGzip, recordbatch.CodecSnappy}

func (m *Module) getTelemetrySubscriptions(_ context.Context, req *kernel.Request, r *kmsg.GetTelemetrySubscriptionsRequest) *kmsg.GetTelemetrySubscriptionsResponse {
	resp := r.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	id := r.ClientInstanceID
	if id == ([16]byte{}) {
		_, _ = rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40 // a version 4 UUID
		id[8] = id[8]&0x3f | 0x80
	}
	resp.ClientInstanceID = id
	subs := m.subscriptions()
	info := clientInfo(req, id)
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	c, _ := m.lookupLocked(id, info, now)
	c.info = info
	next := subs.subscriptionFor(info)
	interval := time.Duration(c.sub.intervalMs) * time.Millisecond
	early := !c.lastGet.IsZero() && now.Sub(c.lastGet) < interval && next.id == c.sub.id &&
		c.lastErr != kerr.UnknownSubscriptionID.Code && c.lastErr != kerr.UnsupportedCompressionType.Code
	if early {
		// (ThrottleMillis stays the request quota's: the kernel mutes a connection
		// for what it says.)
		resp.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
		return resp
	}
	c.sub, c.lastGet, c.lastErr, c.terminated = next, now, 0, false
	resp.SubscriptionID = next.id
	resp.AcceptedCompressionTypes = acceptedCompression
	resp.PushIntervalMillis = next.intervalMs
	resp.TelemetryMaxBytes = int32(min(m.maxBytes(), 1<<31-1))
	resp.DeltaTemporality = false // cumulative sums: the latest value is the total
	resp.RequestedMetrics = next.metrics
	if resp.RequestedMetrics == nil {
		resp.RequestedMetrics = []string{}
	}
	return resp
}
