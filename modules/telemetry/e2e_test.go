package telemetry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/metricstest"
	"github.com/sluicehq/sluice/internal/testbroker"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// subscribe sets a CLIENT_METRICS subscription.
func subscribe(t *testing.T, adm *kgo.Client, name string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	for i := 0; i < len(kv); i += 2 {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = kv[i], kmsgStr(kv[i+1])
		r.Configs = append(r.Configs, rc)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(testCtx(t), adm)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("subscribe %s: %v %+v", name, err, resp)
	}
}

func kmsgStr(s string) *string { return &s }

// waitFor polls cond until it returns "" or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s (%s)", d, what, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A franz-go client pushes the metrics a subscription asks for; they show up in
// /metrics with the client's id and software, and a client the subscription does
// not select pushes nothing.
func TestKgoPushesMetrics(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Client(t)
	if _, err := b.Admin(t).CreateTopic(testCtx(t), 1, 1, nil, "tele"); err != nil {
		t.Fatal(err)
	}
	subscribe(t, adm, "producers", "metrics", "org.apache.kafka.producer.", "interval.ms", "1000", "match", "client_id=tele-.*")
	cl := b.Client(t, kgo.ClientID("tele-producer"), kgo.DefaultProduceTopic("tele"))
	other := b.Client(t, kgo.ClientID("quiet"), kgo.DefaultProduceTopic("tele"))
	// Both keep producing, so that every push has latencies to report.
	var ms metricstest.Samples
	i := 0
	waitFor(t, 30*time.Second, "the producer's pushed metrics in /metrics", func() string {
		for _, c := range []*kgo.Client{cl, other} {
			if err := c.ProduceSync(testCtx(t), &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
				return err.Error()
			}
		}
		i++
		var err error
		if ms, err = metricstest.TryScrape(b.AdminAddr); err != nil {
			return err.Error()
		}
		if ms.Count("sluice_client_metric", "client_id", "tele-producer", "metric", "org.apache.kafka.producer.node.request.latency.avg") == 0 {
			return fmt.Sprintf("%d series", ms.Count("sluice_client_metric"))
		}
		return ""
	})
	if n := ms.Count("sluice_client_metric", "client_id", "quiet"); n != 0 {
		t.Errorf("a client no subscription selects has %d series", n)
	}
	if n := ms.Count("sluice_client_metric", "client_software", "kgo"); n != 0 {
		t.Errorf("client_software should carry the version too; got %d series labelled just kgo", n)
	}
	for _, m := range ms["sluice_client_metric"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "metric" && len(l.GetValue()) > 0 && l.GetValue()[:len("org.apache.kafka.producer.")] != "org.apache.kafka.producer." {
				t.Errorf("a metric outside the subscription's prefix: %s", l.GetValue())
			}
		}
	}
	if v, ok := ms.Value("sluice_client_telemetry_pushes_total"); !ok || v < 1 {
		t.Errorf("pushes counted: %v %v", v, ok)
	}
}

// The protocol's refusals, by hand.
func TestTelemetryRequests(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Client(t)
	cl := b.Client(t, kgo.ClientID("raw-1"), kgo.DisableClientMetrics())
	ctx := testCtx(t)
	subscribe(t, adm, "all", "metrics", "*", "interval.ms", "60000")

	get := func(id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
		t.Helper()
		req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		req.ClientInstanceID = id
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	push := func(id [16]byte, sub int32, codec int8, metrics []byte, terminating bool) int16 {
		t.Helper()
		req := kmsg.NewPtrPushTelemetryRequest()
		req.ClientInstanceID, req.SubscriptionID, req.CompressionType, req.Metrics, req.Terminating = id, sub, codec, metrics, terminating
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	g := get([16]byte{})
	if g.ErrorCode != 0 || g.ClientInstanceID == ([16]byte{}) || g.PushIntervalMillis != 60000 ||
		len(g.RequestedMetrics) != 1 || g.RequestedMetrics[0] != "" || g.DeltaTemporality || g.TelemetryMaxBytes != 1<<20 {
		t.Fatalf("first GetTelemetrySubscriptions: %+v", g)
	}
	id := g.ClientInstanceID
	if r := get(id); r.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Errorf("asked again at once: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	for _, tc := range []struct {
		name    string
		id      [16]byte
		sub     int32
		codec   int8
		metrics []byte
		want    *kerr.Error
	}{
		{"zero instance", [16]byte{}, g.SubscriptionID, 0, nil, kerr.InvalidRequest},
		{"other subscription", id, g.SubscriptionID + 1, 0, nil, kerr.UnknownSubscriptionID},
	} {
		if c := push(tc.id, tc.sub, tc.codec, tc.metrics, false); c != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(c), tc.want)
		}
	}
	// After UNKNOWN_SUBSCRIPTION_ID the client may ask again at once.
	if g = get(id); g.ErrorCode != 0 {
		t.Fatalf("GetTelemetrySubscriptions after an outdated push: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	if c := push(id, g.SubscriptionID, 7, []byte{1}, false); c != kerr.UnsupportedCompressionType.Code {
		t.Errorf("unknown codec: %v", kerr.ErrorForCode(c))
	}
	if c := push(id, g.SubscriptionID, 0, make([]byte, 1<<20+1), false); c != kerr.TelemetryTooLarge.Code {
		t.Errorf("too large: %v", kerr.ErrorForCode(c))
	}
	// Admitted, then undecodable: it counts as the interval's push.
	if c := push(id, g.SubscriptionID, 0, []byte{0xff, 0xff, 0xff}, false); c != kerr.InvalidRecord.Code {
		t.Errorf("garbage: %v", kerr.ErrorForCode(c))
	}
	if c := push(id, g.SubscriptionID, 0, nil, false); c != kerr.ThrottlingQuotaExceeded.Code {
		t.Errorf("a push right after another: %v", kerr.ErrorForCode(c))
	}
	// Another instance: a push, a terminating one at once (allowed), and nothing after.
	g2 := get([16]byte{})
	id2 := g2.ClientInstanceID
	if c := push(id2, g2.SubscriptionID, 0, nil, false); c != 0 {
		t.Errorf("an empty push: %v", kerr.ErrorForCode(c))
	}
	if c := push(id2, g2.SubscriptionID, 0, nil, true); c != 0 {
		t.Errorf("terminating push: %v", kerr.ErrorForCode(c))
	}
	if c := push(id2, g2.SubscriptionID, 0, nil, false); c != kerr.InvalidRequest.Code {
		t.Errorf("a push after the terminating one: %v", kerr.ErrorForCode(c))
	}
	// A changed subscription changes the id: the old one is refused.
	subscribe(t, adm, "all", "interval.ms", "30000")
	other := get([16]byte{})
	if other.SubscriptionID == g.SubscriptionID || other.PushIntervalMillis != 30000 {
		t.Errorf("after the change: id %d (was %d), interval %d", other.SubscriptionID, g.SubscriptionID, other.PushIntervalMillis)
	}
	if c := push(other.ClientInstanceID, g.SubscriptionID, 0, nil, false); c != kerr.UnknownSubscriptionID.Code {
		t.Errorf("the old subscription id: %v", kerr.ErrorForCode(c))
	}
}
