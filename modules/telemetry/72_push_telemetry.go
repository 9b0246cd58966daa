// PushTelemetry: v0. KIP-714: a client pushes the metrics its subscription asked for,
// OTLP MetricsData compressed with one of the accepted codecs. No ACL is asked, as in
// Kafka. The refusals and their order are doc.go's; the metrics are decoded outside
// the client table's lock and their latest values kept for /metrics.

package telemetry

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/telemetry/otlp"
)

// pushTelemetryClaim claims the versions this file's header lists.
func pushTelemetryClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.PushTelemetry, Min: 0, Max: 0, Handler: kernel.Replying(m.pushTelemetry)}
}

func (m *Module) pushTelemetry(_ context.Context, req *kernel.Request, r *kmsg.PushTelemetryRequest) *kmsg.PushTelemetryResponse {
	resp := r.ResponseKind().(*kmsg.PushTelemetryResponse)
	code := m.push(req, r)
	resp.ErrorCode = code
	if code == 0 {
		m.pushes.Add(1)
	} else {
		m.refused.Add(1)
	}
	return resp
}

// push checks and applies one push and returns its code.
func (m *Module) push(req *kernel.Request, r *kmsg.PushTelemetryRequest) int16 {
	if r.ClientInstanceID == ([16]byte{}) {
		return kerr.InvalidRequest.Code
	}
	info := clientInfo(req, r.ClientInstanceID)
	current := m.subscriptions().subscriptionFor(info)
	now := m.now()
	m.mu.Lock()
	c, created := m.lookupLocked(r.ClientInstanceID, info, now)
	if created {
		// A client that asked another broker: the subscriptions are the cluster's.
		c.sub = current
	}
	code := m.checkPushLocked(c, r, current, now)
	c.lastErr = code
	if code == 0 {
		c.lastPush = now
		c.terminated = r.Terminating
	}
	m.mu.Unlock()
	if code != 0 || len(r.Metrics) == 0 {
		return code
	}
	data := r.Metrics
	if r.CompressionType != 0 {
		var err error
		if data, err = recordbatch.Decompress(int(r.CompressionType), r.Metrics, m.MaxDecompressedBytes); err != nil {
			m.warn("client telemetry push does not decompress", "client_id", req.ClientID, "codec", r.CompressionType, "err", err)
			return kerr.InvalidRecord.Code
		}
	}
	pts, truncated, err := otlp.Decode(data, m.MaxSeries)
	if err != nil {
		m.warn("client telemetry push is not OTLP metrics", "client_id", req.ClientID, "err", err)
		return kerr.InvalidRecord.Code
	}
	if truncated {
		m.dropped.Add(1)
	}
	m.record(r.ClientInstanceID, pts)
	return 0
}

// checkPushLocked is a push's admission, in Kafka's order. Call with m.mu held.
func (m *Module) checkPushLocked(c *client, r *kmsg.PushTelemetryRequest, current subscription, now time.Time) int16 {
	interval := time.Duration(c.sub.intervalMs) * time.Millisecond
	switch {
	case c.terminated:
		return kerr.InvalidRequest.Code // pushed after its terminating push
	case r.SubscriptionID != current.id || r.SubscriptionID != c.sub.id:
		c.sub = current
		return kerr.UnknownSubscriptionID.Code
	case !r.Terminating && !c.lastPush.IsZero() && now.Sub(c.lastPush) < interval/2:
		return kerr.ThrottlingQuotaExceeded.Code
	case r.CompressionType != 0 && !slices.Contains(acceptedCompression, r.CompressionType):
		return kerr.UnsupportedCompressionType.Code
	case int64(len(r.Metrics)) > m.maxBytes():
		return kerr.TelemetryTooLarge.Code
	}
	return 0
}

// record keeps the pushed points' latest values, within MaxSeries.
func (m *Module) record(id [16]byte, pts []otlp.Point) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.clients[id]
	if c == nil {
		return // evicted meanwhile
	}
	dropped := false
	for _, p := range pts {
		k := seriesKey{metric: p.Metric, attrs: p.Attrs}
		if _, ok := c.series[k]; !ok {
			if m.series >= m.MaxSeries {
				dropped = true
				continue
			}
			m.series++
		}
		c.series[k] = p.Value
	}
	if dropped {
		m.dropped.Add(1)
	}
}
