package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/metricstest"
)

// setSubscription sets a CLIENT_METRICS subscription (KIP-714) on the broker at addr.
func setSubscription(t *testing.T, addr, name string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	for i := 0; i < len(kv); i += 2 {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = kv[i], kmsg.StringPtr(kv[i+1])
		r.Configs = append(r.Configs, rc)
	}
	req.Resources = append(req.Resources, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, newClient(t, addr))
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("subscription %s: %v %+v", name, err, resp)
	}
}

// TestLibrdkafkaTelemetry: a librdkafka 2.11 producer (confluent-kafka-go, which
// bundles it: interop/rdkafkago) pushes the metrics a subscription asks for, and the
// broker exposes them in /metrics under the producer's client id and software.
func TestLibrdkafkaTelemetry(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	bin := buildRdkafkago(t)
	createTopic(t, b.addr, "tele", 1)
	setSubscription(t, b.addr, "rdk", "metrics", "org.apache.kafka.producer.", "interval.ms", "1000",
		"match", "client_id=rdk-.*")

	cmd := exec.Command(bin, "-bootstrap", b.addr, "-topic", "tele", "-client-id", "rdk-tele", "-n", "50")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Output to a file, not a pipe: Wait then has no copying of its own to wait for.
	outPath := filepath.Join(t.TempDir(), "rdkafkago.out")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	out := fileText(outPath)
	cmd.Stdout, cmd.Stderr = outFile, outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed once Wait returned (waitErr set)
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Logf("the producer is still running 20 s after its stdin closed; killing it\n%s", out.String())
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	var last string
	ok := pollUntil(60*time.Second, func() bool {
		ms, err := metricstest.TryScrape(b.adminAddr)
		if err != nil {
			last = err.Error()
			return false
		}
		n := ms.Count("sluice_client_metric", "client_id", "rdk-tele")
		last = fmt.Sprintf("%d series of rdk-tele", n)
		if n == 0 {
			return false
		}
		for _, m := range ms["sluice_client_metric"].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["client_id"] != "rdk-tele" {
				continue
			}
			if !strings.HasPrefix(labels["metric"], "org.apache.kafka.producer.") || !strings.HasPrefix(labels["client_software"], "confluent-kafka-go") {
				t.Errorf("series %v: outside the subscription's prefix, or not the client's software", labels)
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("no pushed metrics of the librdkafka producer in /metrics (%s)\nclient output:\n%s", last, out.String())
	}
	_ = stdin.Close()
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("the producer exited: %v\n%s", waitErr, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the producer did not exit 30 s after its stdin closed\n%s", out.String())
	}
	if !strings.Contains(out.String(), "produced 50") {
		t.Errorf("producer output:\n%s", out.String())
	}
	_ = os.Remove(bin)
}

// fileText reads a file for a failure message.
type fileText string

func (f fileText) String() string {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// buildRdkafkago builds interop/rdkafkago (a librdkafka 2.11 client) and returns the
// binary; it skips the test (or fails it where required) when cgo cannot build it.
func buildRdkafkago(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rdkafkago")
	build := exec.Command("go", "build", "-o", bin, "./interop/rdkafkago")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		need(t, "building interop/rdkafkago (confluent-kafka-go needs cgo and gcc): %v\n%s", err, out)
	}
	return bin
}
