// Package configs holds runnable broker config profiles; this test starts a broker from
// each and produces and consumes through it, so the examples keep working.
package configs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

func TestProfiles(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no profiles: %v", err)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			yaml, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b := testbroker.Start(t, testbroker.WithConfig(string(yaml)))
			cl := b.Client(t, kgo.DefaultProduceTopic("profile-test"), kgo.ConsumeTopics("profile-test"),
				kgo.AllowAutoTopicCreation())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
				t.Fatal(err)
			}
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			recs := fs.Records()
			if len(recs) != 1 || string(recs[0].Value) != "hello" {
				t.Fatalf("got %d records", len(recs))
			}
		})
	}
}
