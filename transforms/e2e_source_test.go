package transforms_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
)

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestStampProducer: the stamp-producer example, deployed inline, stamps every record
// produced over a real socket with the connection's principal (ANONYMOUS: this
// listener does not authenticate) and the client id kgo sent, replacing a forged
// header; deployed in derived mode on the same topic it sees no source and stamps
// empty values. Then the seam is called directly with a principal the kernel of this
// branch cannot authenticate yet (SASL is elsewhere).
func TestStampProducer(t *testing.T) {
	b := startBroker(t, "", "")
	createTopic(t, b, "events", 1)
	createTopic(t, b, "events-copy", 1)
	mustDeploy(t, b, "stamp", "stamp-producer", url.Values{"input": {"events"}})
	mustDeploy(t, b, "stamp-derived", "stamp-producer", url.Values{"input": {"events"}, "mode": {"derived"}, "output": {"events-copy"}})
	for _, id := range []string{"billing-svc", "audit"} {
		cl := b.Client(t, kgo.ClientID(id))
		if err := produce(t, cl,
			&kgo.Record{Topic: "events", Value: []byte(id + "-1")},
			&kgo.Record{Topic: "events", Value: []byte(id + "-2"), Headers: []kgo.RecordHeader{{Key: "sluice.principal", Value: []byte("User:admin")}}},
		); err != nil {
			t.Fatal(err)
		}
	}
	got := consume(t, b, "events", 4)
	if len(got) != 4 {
		t.Fatalf("%d records, want 4", len(got))
	}
	for i, r := range got {
		wantID := "billing-svc"
		if i >= 2 {
			wantID = "audit"
		}
		p, _ := header(r, "sluice.principal")
		c, _ := header(r, "sluice.client_id")
		if p != "User:ANONYMOUS" || c != wantID || len(r.Headers) != 2 {
			t.Errorf("record %q: principal %q, client id %q, headers %v", r.Value, p, c, r.Headers)
		}
	}
	copies := consume(t, b, "events-copy", 4)
	if len(copies) != 4 {
		t.Fatalf("derived output has %d records, want 4", len(copies))
	}
	for _, r := range copies {
		p, okP := header(r, "sluice.principal")
		c, okC := header(r, "sluice.client_id")
		if !okP || !okC || p != "" || c != "" {
			t.Errorf("derived record %q: principal %q, client id %q", r.Value, p, c)
		}
	}
	checkSeamSource(t, b, "events")
}

// checkSeamSource calls TransformProduce of b's transforms module for topic, whose
// inline transform is stamp-producer, with chosen sources: the transform sees them.
func checkSeamSource(t *testing.T, b *testbroker.Broker, topic string) {
	t.Helper()
	pt, ok := b.Kernel.Module("transforms").(kernel.ProduceTransformer)
	if !ok || !pt.Bound(topic) {
		t.Fatalf("the transforms module is not a ProduceTransformer bound to %s", topic)
	}
	in := recordbatch.Build(recordbatch.Options{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		recordbatch.Record{Value: []byte("a")}, recordbatch.Record{Value: []byte("b"), TimestampDelta: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := kernel.TopicPartition{Topic: topic}
	for _, tc := range []struct {
		src                       kernel.ProduceSource
		wantPrincipal, wantClient string
	}{
		{kernel.ProduceSource{Principal: kernel.Principal{Type: "User", Name: "alice"}, ClientID: "app-1"}, "User:alice", "app-1"},
		{kernel.ProduceSource{Principal: kernel.Anonymous}, "User:ANONYMOUS", ""},
		{kernel.ProduceSource{}, "", ""},
	} {
		out, err := pt.TransformProduce(ctx, tp, tc.src, in)
		if err != nil {
			t.Fatal(err)
		}
		var dec recordbatch.Decoder
		var n int
		if _, err := dec.Records(out, func(r *recordbatch.Record) error {
			n++
			hs := map[string]string{}
			for _, h := range r.Headers {
				hs[string(h.Key)] = string(h.Value)
			}
			if hs["sluice.principal"] != tc.wantPrincipal || hs["sluice.client_id"] != tc.wantClient {
				t.Errorf("%+v: headers %v", tc.src, hs)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Fatalf("%+v: %d records out, want 2", tc.src, n)
		}
	}
}
