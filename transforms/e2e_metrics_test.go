package transforms_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// scrape returns the broker's /metrics text.
func scrape(t *testing.T, b *testbroker.Broker) string {
	t.Helper()
	resp, err := http.Get("http://" + b.AdminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestTransformMetrics: a deployed transform's counters are Prometheus metrics,
// labelled by transform and mode, and disappear when it is deleted.
func TestTransformMetrics(t *testing.T) {
	b, cl := startHeaderFilter(t, "filt", "m")
	var recs []*kgo.Record
	for i := range 6 {
		r := &kgo.Record{Topic: "m", Value: []byte{byte('a' + i)}}
		if i%3 == 0 {
			r.Headers = []kgo.RecordHeader{{Key: "drop"}}
		}
		recs = append(recs, r)
	}
	if err := produce(t, cl, recs...); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, b)
	for _, want := range []string{
		"# TYPE sluice_transform_records_in_total counter",
		`sluice_transform_records_in_total{mode="inline",transform="filt"} 6`,
		`sluice_transform_records_out_total{mode="inline",transform="filt"} 4`,
		`sluice_transform_running{mode="inline",transform="filt"} 1`,
		`sluice_transform_failures_total{mode="inline",transform="filt"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Fatalf("/metrics lacks %q:\n%s", want, text)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+b.AdminAddr+"/v1/transforms/filt", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(scrape(t, b), `transform="filt"`) {
		if time.Now().After(deadline) {
			t.Fatal("metrics of a deleted transform still exported")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
