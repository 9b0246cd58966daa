package metadata

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func TestStartRegistersBroker(t *testing.T) {
	start := time.Now()
	m, _ := startModule(t, t.TempDir())
	if d := time.Since(start); d > 2*time.Second { // ~0.1s when idle; slack for loaded CI
		t.Errorf("start took %v", d)
	}
	im := m.Image()
	if len(im.ClusterID) != 22 {
		t.Errorf("cluster id %q", im.ClusterID)
	}
	if im.ControllerID != 1 || im.Brokers[1] == nil || !m.Ready() {
		t.Errorf("controller %d brokers %v ready %v", im.ControllerID, im.Brokers, m.Ready())
	}
}

func TestCreateTopicsHandler(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, name := range []string{"a", "bad/name", "a"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 3, 1
		req.Topics = append(req.Topics, rt)
	}
	ok := kmsg.NewCreateTopicsRequestTopic()
	ok.Topic, ok.NumPartitions, ok.ReplicationFactor = "b", -1, -1
	req.Topics = append(req.Topics, ok)
	resp := call[*kmsg.CreateTopicsResponse](t, fc, nil, req)
	want := []int16{kerr.InvalidRequest.Code, kerr.InvalidTopicException.Code, kerr.InvalidRequest.Code, 0}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != want[i] {
			t.Errorf("topic %d %s: code %d, want %d (%v)", i, rt.Topic, rt.ErrorCode, want[i], rt.ErrorMessage)
		}
	}
	b := m.Image().Topic("b")
	if b == nil || len(b.Partitions) != 1 || resp.Topics[3].TopicID != b.ID {
		t.Fatalf("topic b: %+v", b)
	}
}

func TestRestartKeepsMetadata(t *testing.T) {
	dir := t.TempDir()
	m, fc := startModule(t, dir, func(m *Module, _ *fakeContext) { m.SnapshotThreshold = 1 })
	createTopic(t, fc, "before-snapshot", 2, map[string]string{"retention.ms": "1000"})
	takeSnapshot(t, m)
	createTopic(t, fc, "after-snapshot", 1, nil)
	before := m.Image()
	stopModule(t, m)

	m2, _ := startModule(t, dir)
	after := m2.Image()
	if after.ClusterID != before.ClusterID {
		t.Errorf("cluster id %s, was %s", after.ClusterID, before.ClusterID)
	}
	if after.Version <= before.Version {
		t.Errorf("version %d, was %d", after.Version, before.Version)
	}
	for name, t0 := range before.Topics() {
		t1 := after.Topic(name)
		if t1 == nil || t1.ID != t0.ID || len(t1.Partitions) != len(t0.Partitions) || !maps.Equal(t1.Configs, t0.Configs) {
			t.Errorf("topic %s: %+v, was %+v", name, t1, t0)
		}
	}
	if m2.node.hub.state().Regs[1].Incarnation == m.node.hub.state().Regs[1].Incarnation {
		t.Error("restart kept the incarnation id")
	}
}

func TestSubscribeThroughModule(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	got := make(chan *kernel.Image, 100)
	cancel := m.Subscribe(func(im *kernel.Image) { got <- im })
	defer cancel()
	first := <-got
	if first != m.Image() && first.Version > m.Image().Version {
		t.Fatalf("first image %d", first.Version)
	}
	createTopic(t, fc, "x", 1, nil)
	for im := range got {
		if im.Topic("x") != nil {
			break
		}
	}
}

func TestTCPTransport(t *testing.T) {
	m, fc := startModule(t, t.TempDir(), func(m *Module, _ *fakeContext) { m.RaftListen = "127.0.0.1:0" })
	if rt := createTopic(t, fc, "tcp", 1, nil); rt.ErrorCode != 0 || !m.Ready() {
		t.Fatalf("create over a TCP-transport raft: %d", rt.ErrorCode)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		voters []string
		listen string
		hb     time.Duration
	}{
		{"bad voter", []string{"x@host:1"}, "", 0},
		{"no port", []string{"1@host"}, "", 0},
		{"duplicate", []string{"1@a:1", "1@b:1"}, "", 0},
		{"not a voter", []string{"2@a:1"}, "", 0},
		{"timeouts", nil, "", time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Info().New().(*Module)
			m.Voters, m.RaftListen, m.HeartbeatTimeout = tc.voters, tc.listen, tc.hb
			err := m.Provision(newFakeContext(t, 1, t.TempDir()))
			if err == nil {
				err = m.Validate()
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("err = %v", err)
			}
			if err := m.Cleanup(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	// Cleanup after a Provision that failed before opening anything.
	m := Info().New().(*Module)
	if err := m.Provision(newFakeContext(t, 1, "")); !errors.Is(err, ErrConfig) {
		t.Errorf("empty data dir: %v", err)
	}
	if err := m.Cleanup(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	// Cleanup of a module that was never provisioned.
	if err := Info().New().(*Module).Cleanup(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

func TestImageBeforeStart(t *testing.T) {
	m := Info().New().(*Module)
	if err := m.Provision(newFakeContext(t, 1, t.TempDir())); err != nil {
		t.Fatal(err)
	}
	defer m.Cleanup()
	if im := m.Image(); im == nil || im.ControllerID != -1 || m.Ready() {
		t.Fatalf("image before start: %+v", im)
	}
}

func TestCreateTopicForModules(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	topic, err := m.CreateTopic(ctx, "__consumer_offsets", 5, 1, map[string]string{"cleanup.policy": "compact"})
	if err != nil || len(topic.Partitions) != 5 || !topic.Internal || topic.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("create: %+v %v", topic, err)
	}
	again, err := m.CreateTopic(ctx, "__consumer_offsets", 7, 1, nil)
	if err != nil || again.ID != topic.ID {
		t.Fatalf("create again: %+v %v", again, err)
	}
	if _, err := m.CreateTopic(ctx, "bad name", 1, 1, nil); err == nil {
		t.Fatal("bad name accepted")
	}
	// Clients cannot auto-create internal topics through Metadata.
	resp := call[*kmsg.MetadataResponse](t, fc, nil, req2(12, "__transaction_state"))
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || m.Image().Topic("__transaction_state") != nil {
		t.Errorf("auto-created an internal topic: %d", resp.Topics[0].ErrorCode)
	}
}

// TestStopLeavesNoGoroutines starts and stops modules (in-memory and TCP transports,
// with a subscriber left subscribed) and checks every goroutine is gone.
func TestStopLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, listen := range []string{"", "127.0.0.1:0"} {
		fc := newFakeContext(t, 1, t.TempDir())
		m := Info().New().(*Module)
		m.RaftListen = listen
		if err := m.Provision(fc); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		m.Subscribe(func(*kernel.Image) {}) // never cancelled: Stop must end it
		createTopic(t, fc, "g", 1, nil)
		stopModule(t, m)
	}
	var now int
	deadline := time.Now().Add(5 * time.Second)
	for now = runtime.NumGoroutine(); now > before && time.Now().Before(deadline); now = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if now > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, now, buf[:runtime.Stack(buf, true)])
	}
}

func TestClaimedVersions(t *testing.T) {
	m := Info().New().(*Module)
	fc := newFakeContext(t, 1, t.TempDir())
	if err := m.Provision(fc); err != nil {
		t.Fatal(err)
	}
	defer m.Cleanup()
	want := map[int16][2]int16{3: {0, 13}, 19: {0, 7}, 20: {0, 6}, 32: {0, 4}, 33: {0, 2}, 37: {0, 3}, 43: {0, 2}, 44: {0, 1}, 45: {0, 1}, 46: {0, 0}, 55: {0, 2}, 57: {0, 2}, 60: {0, 2}, 64: {0, 0}, 74: {0, 1}, 75: {0, 0}, 80: {0, 1}, 81: {0, 0}, 82: {0, 0}}
	if !maps.Equal(fc.versions, want) {
		t.Errorf("claimed %v, want %v", fc.versions, want)
	}
	var buf strings.Builder
	fc.metrics.WriteText(&buf)
	if !strings.Contains(buf.String(), "sluice_metadata_image_version 0") {
		t.Errorf("metrics:\n%s", buf.String())
	}
}
