package metadata_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// An unknown or invalid Kafka broker config in the file's `configs:` section stops the
// broker at startup with a message naming it.
func TestStaticBrokerConfigsValidatedAtStartup(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown name", "configs: {auto.create.topic.enable: \"true\"}\n", "auto.create.topic.enable"},
		{"bad value", "configs: {num.partitions: \"many\"}\n", "num.partitions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := testbroker.StartError(t, tc.yaml)
			if err == nil {
				t.Fatal("broker started with a bad static config")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
}
