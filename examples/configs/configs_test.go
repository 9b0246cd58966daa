// Package configs holds runnable broker config profiles; this test starts a broker from
// each and produces and consumes through it, so the examples keep working.
package configs

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/standard"
)

// TestSecureProfile checks that secure.yaml is a valid config for the standard
// modules (the shape issue 17 shows: a SASL_SSL listener, PEM stores, auth.acl with a
// bootstrap user). Starting it needs the certificates its comment makes.
func TestSecureProfile(t *testing.T) {
	yaml, err := os.ReadFile("secure.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kernel.ParseConfig(yaml)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Name != "SASL_SSL" || cfg.Configs["ssl.keystore.location"] != "./certs/server.pem" {
		t.Fatalf("unexpected config: %+v", cfg)
	}
	reg := kernel.NewRegistry()
	standard.Register(reg)
	cfg.DataDir = t.TempDir()
	if _, err := kernel.New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
}

func TestProfiles(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no profiles: %v", err)
	}
	for _, f := range files {
		if f == "secure.yaml" {
			continue // needs certificates on disk: TestSecureProfile
		}
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
