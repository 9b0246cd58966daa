package segmentlog

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// fakeContext is the part of kernel.Context the module uses.
type fakeContext struct {
	dataDir  string
	configs  map[string]string // the broker's static configs
	handlers map[int16]kernel.Handler
	versions map[int16][2]int16
	metrics  *kernel.Metrics // what the module registered (made at the first call)
}

func (c *fakeContext) Logger() *slog.Logger { return slog.New(slog.DiscardHandler) }
func (c *fakeContext) Broker() kernel.BrokerInfo {
	return kernel.BrokerInfo{NodeID: 1, DataDir: c.dataDir, StaticConfigs: c.configs}
}
func (c *fakeContext) Lookup(string) (kernel.Module, error) { return nil, nil }
func (c *fakeContext) HandleHTTP(string, http.Handler)      {}
func (c *fakeContext) Metrics() *kernel.Metrics {
	if c.metrics == nil {
		c.metrics = kernel.NewMetrics()
	}
	return c.metrics
}
func (c *fakeContext) Handle(key, minV, maxV int16, h kernel.Handler) error {
	if c.handlers == nil {
		c.handlers = map[int16]kernel.Handler{}
		c.versions = map[int16][2]int16{}
	}
	c.handlers[key] = h
	c.versions[key] = [2]int16{minV, maxV}
	return nil
}

type denyAll struct{}

func (denyAll) Authorize(context.Context, kernel.Principal, string, kernel.Operation, kernel.Resource) bool {
	return false
}

func startModule(t *testing.T, m *Module, dataDir string) *fakeContext {
	t.Helper()
	return startModuleWith(t, m, &fakeContext{dataDir: dataDir})
}

func startModuleWith(t *testing.T, m *Module, fc *fakeContext) *fakeContext {
	t.Helper()
	if err := m.Provision(fc); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := m.Cleanup(); err != nil {
			t.Error(err)
		}
	})
	return fc
}

func waitFor(t *testing.T, d time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestModuleLifecycle(t *testing.T) {
	dataDir := t.TempDir()
	m := Info().New().(*Module)
	m.RetentionCheckIntervalMs = 10
	m.FlushCheckIntervalMs = 10
	// The recovery point can reach 5 after the flush pass that wrote the moved log
	// start; a recovery point that moved alone waits for this interval.
	m.RecoveryCheckpointIntervalMs = 10
	fc := startModule(t, m, dataDir)
	if len(m.paths) != 1 || m.paths[0] != dataDir {
		t.Fatalf("log dirs %q, want the data dir %q", m.paths, dataDir)
	}
	if v := fc.versions[35]; v != [2]int16{1, 4} {
		t.Fatalf("DescribeLogDirs claimed %v", v)
	}
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = int64(len(storagetest.Batch(0, 0, 1, 10)))
	cfg.RetentionBytes = 2 * cfg.SegmentBytes
	cfg.FlushMs = 1
	l, err := m.Open(rtp, [16]byte{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := l.AppendLeader(storagetest.Batch(0, time.Now().UnixMilli(), 1, 10)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "size retention by the loop", func() bool { return l.LogStartOffset() == 3 })
	waitFor(t, 5*time.Second, "flush.ms by the loop", func() bool {
		rp, _ := l.(*handle).cur.Load().offsets()
		return rp == 5
	})
	waitFor(t, 5*time.Second, "checkpoint by the loop", func() bool {
		b, _ := os.ReadFile(filepath.Join(dataDir, recoveryCheckpointFile))
		return string(b) == "0\n1\nrecover 3 5\n"
	})

	h := fc.handlers[35]
	for _, tc := range []struct {
		name    string
		version int16
		topics  []kmsg.DescribeLogDirsRequestTopic
		auth    kernel.Authorizer
		wantErr int16
		wantTPs int
	}{
		{"all topics", 4, nil, kernel.AllowAll{}, 0, 1},
		{"requested partition", 1, []kmsg.DescribeLogDirsRequestTopic{{Topic: rtp.Topic, Partitions: []int32{3}}}, kernel.AllowAll{}, 0, 1},
		{"unknown partition", 3, []kmsg.DescribeLogDirsRequestTopic{{Topic: rtp.Topic, Partitions: []int32{4}}}, kernel.AllowAll{}, 0, 0},
		{"not authorized", 4, nil, denyAll{}, kerr.ClusterAuthorizationFailed.Code, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Version = tc.version
			req.Topics = tc.topics
			resp, err := h(context.Background(), &kernel.Request{Key: 35, Version: tc.version, Body: req, Conn: &kernel.ConnInfo{Principal: kernel.Anonymous}, Authorizer: tc.auth})
			if err != nil {
				t.Fatal(err)
			}
			r := resp.Msg.(*kmsg.DescribeLogDirsResponse)
			if r.ErrorCode != tc.wantErr {
				t.Fatalf("error code %d, want %d", r.ErrorCode, tc.wantErr)
			}
			if tc.wantErr != 0 {
				if len(r.Dirs) != 0 {
					t.Fatal("dirs in a refused response")
				}
				return
			}
			if len(r.Dirs) != 1 || r.Dirs[0].Dir != dataDir || r.Dirs[0].TotalBytes <= 0 || r.Dirs[0].UsableBytes <= 0 {
				t.Fatalf("dirs %+v", r.Dirs)
			}
			n := 0
			for _, tp := range r.Dirs[0].Topics {
				for _, p := range tp.Partitions {
					n++
					if p.Size != l.Size() || p.IsFuture || p.OffsetLag != 0 {
						t.Fatalf("partition %+v, log size %d", p, l.Size())
					}
				}
			}
			if n != tc.wantTPs {
				t.Fatalf("%d partitions, want %d", n, tc.wantTPs)
			}
		})
	}
}

func TestModuleStopIsCleanShutdown(t *testing.T) {
	dataDir := t.TempDir()
	m := New()
	fc := &fakeContext{dataDir: dataDir}
	if err := m.Provision(fc); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, err := m.Open(rtp, [16]byte{}, storagetest.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 3)
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean shutdown marker: %v", err)
	}
	// Cleanup after a failed Provision.
	bad := New()
	bad.FlushCheckIntervalMs = -1
	if err := bad.Provision(&fakeContext{dataDir: t.TempDir()}); err == nil {
		t.Fatal("provision with a bad interval succeeded")
	}
	if err := bad.Cleanup(); err != nil {
		t.Fatal(err)
	}
}

func TestFlushMessagesAndSegmentMs(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	now := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { return now }
	cfg := storagetest.DefaultConfig()
	cfg.FlushMessages = 4
	cfg.SegmentMs = 1000
	l := mustOpen(t, s, rtp, [16]byte{}, cfg)
	lg := l.(*Log)
	for _, tc := range []struct {
		name     string
		ts       int64 // batch timestamp
		wantRP   int64
		wantSegs int
	}{
		{"below flush.messages", 5000, 0, 1},
		{"reaches flush.messages", 5100, 4, 1},
		{"segment.ms from the first batch's timestamp", 6200, 4, 2},
		{"flush again", 6300, 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := l.AppendLeader(storagetest.Batch(0, tc.ts, 2, 1)); err != nil {
				t.Fatal(err)
			}
			rp, _ := lg.offsets()
			lg.mu.RLock()
			segs := len(lg.segs)
			lg.mu.RUnlock()
			if rp != tc.wantRP || segs != tc.wantSegs {
				t.Fatalf("recovery point %d, %d segments; want %d, %d", rp, segs, tc.wantRP, tc.wantSegs)
			}
		})
	}
	cfg.FlushMessages = math.MaxInt64
	l.SetConfig(cfg)
	fill(t, l, 3)
	if rp, _ := lg.offsets(); rp != 8 {
		t.Fatalf("page-cache mode flushed: recovery point %d", rp)
	}
}

func TestConfigDecodesStrictly(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		ok   bool
	}{
		{"all keys", "dir: /x\nretention_check_interval_ms: 5\nflush_check_interval_ms: 7\nhigh_watermark_checkpoint_interval_ms: 9\n", true},
		{"unknown key", "retention_ms: 5\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			dec := yaml.NewDecoder(strings.NewReader(tc.yaml))
			dec.KnownFields(true)
			err := dec.Decode(m)
			if (err == nil) != tc.ok {
				t.Fatalf("decode: %v", err)
			}
			if tc.ok && (m.Dir != "/x" || m.RetentionCheckIntervalMs != 5 || m.FlushCheckIntervalMs != 7 || m.HighWatermarkCheckpointIntervalMs != 9) {
				t.Fatalf("decoded %+v", m)
			}
		})
	}
}

// TestModuleHighWatermarkLoop: the module writes the high watermarks every
// replica.high.watermark.checkpoint.interval.ms (a broker config, overridden by the
// module's own setting), and at Stop.
func TestModuleHighWatermarkLoop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		override int64
		configs  map[string]string
		want     int64
	}{
		{"default", 0, nil, 5000},
		{"broker config", 0, map[string]string{"replica.high.watermark.checkpoint.interval.ms": "20"}, 20},
		{"module setting wins", 30, map[string]string{"replica.high.watermark.checkpoint.interval.ms": "20"}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			m := New()
			m.HighWatermarkCheckpointIntervalMs = tc.override
			startModuleWith(t, m, &fakeContext{dataDir: dataDir, configs: tc.configs})
			if m.HighWatermarkCheckpointIntervalMs != tc.want {
				t.Fatalf("interval %d, want %d", m.HighWatermarkCheckpointIntervalMs, tc.want)
			}
			l, err := m.Open(rtp, [16]byte{}, storagetest.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			fill(t, l, 3)
			l.SetHighWatermark(4)
			if tc.want < 1000 {
				waitFor(t, 5*time.Second, "high watermark checkpoint by the loop", func() bool {
					b, _ := os.ReadFile(filepath.Join(dataDir, hwCheckpointFile))
					return string(b) == "0\n1\nrecover 3 4\n"
				})
			}
			l.SetHighWatermark(6)
			if err := m.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dataDir, hwCheckpointFile)); err != nil || string(b) != "0\n1\nrecover 3 6\n" {
				t.Fatalf("checkpoint after Stop %q, %v", b, err)
			}
		})
	}
	bad := New()
	bad.HighWatermarkCheckpointIntervalMs = -1
	if err := bad.Provision(&fakeContext{dataDir: t.TempDir()}); err == nil {
		t.Fatal("provision with a negative interval succeeded")
	}
	if err := bad.Cleanup(); err != nil {
		t.Fatal(err)
	}
}
