package metadata_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/standard"
)

// An unknown or invalid Kafka broker config in the file's `configs:` section stops the
// broker at startup with a message naming it.
func TestStaticBrokerConfigsValidatedAtStartup(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown name", "configs: {auto.create.topic.enable: \"true\"}\n", "auto.create.topic.enable"},
		{"bad value", "configs: {num.partitions: \"many\"}\n", "num.partitions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := kernel.ParseConfig([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = t.TempDir()
			cfg.Listeners = []kernel.ListenerConfig{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}}
			cfg.AdminListen = "127.0.0.1:0"
			reg := kernel.NewRegistry()
			standard.Register(reg)
			k, err := kernel.New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			err = k.Start(context.Background())
			if err == nil {
				_ = k.Shutdown(context.Background())
				t.Fatal("broker started with a bad static config")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
}
