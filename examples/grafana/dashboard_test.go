// Package grafana holds an example Grafana dashboard for Sluice's /metrics; this test
// checks that every metric its queries name is one a broker serves, so the dashboard
// does not drift from the code.
package grafana

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/metricstest"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// needsSetup are families a plain broker has no sample of: they need an assignor
// plugin, a deployed transform or a compacted log with data. Their names are checked
// against the code by the tests of those modules.
var needsSetup = []string{
	"sluice_assignor_plugin_up", "sluice_assignor_plugin_fallbacks_total",
	"sluice_transform_records_in_total", "sluice_transform_failures_total",
	"sluice_log_cleaner_dirty_ratio",
}

func TestDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile("sluice-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // metric -> a panel using it
	re := regexp.MustCompile(`sluice_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range re.FindAllString(tg.Expr, -1) {
				names[n] = p.Title
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d metrics in the dashboard's queries", len(names))
	}

	// A broker with traffic, a live group, a group with lag and a connection.
	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.Client(t, kgo.DefaultProduceTopic("dash"), kgo.AllowAutoTopicCreation())
	for range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := b.Client(t, kgo.ConsumerGroup("dash-live"), kgo.ConsumeTopics("dash"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 3; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	var o kadm.Offsets
	o.AddOffset("dash", 0, 1, -1)
	if _, err := b.Admin(t).CommitOffsets(ctx, "dash-readers", o); err != nil {
		t.Fatal(err)
	}
	s := metricstest.Scrape(t, b.AdminAddr)
	for n, panel := range names {
		family := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if f, ok := strings.CutSuffix(n, suf); ok && s[f] != nil {
				family = f
			}
		}
		if s[family] == nil && !slices.Contains(needsSetup, n) {
			t.Errorf("panel %q queries %s, which the broker does not serve", panel, n)
		}
	}
}
