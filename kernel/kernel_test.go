package kernel_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// echoModule claims a couple of API keys so the kernel's dispatch, ordering and
// zero-copy writer can be tested without the real modules.
type echoModule struct {
	Greeting string `yaml:"greeting"`
	file     *os.File
	calls    atomic.Int64
	started  bool
	stopped  bool
	// slow is how long ListGroups takes (a long-running handler, like a fetch long-poll).
	slow time.Duration
}

func (m *echoModule) Provision(ctx kernel.Context) error {
	// DescribeCluster answers with the handler's call number in ClusterID, to check order.
	if err := ctx.Handle(kmsg.DescribeCluster.Int16(), 0, 1, func(_ context.Context, r *kernel.Request) (kernel.Response, error) {
		n := m.calls.Add(1)
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.ClusterID = m.Greeting + ":" + itoa(n)
		return kernel.Reply(resp), nil
	}); err != nil {
		return err
	}
	if err := ctx.Handle(kmsg.ListGroups.Int16(), 0, 4, func(ctx context.Context, r *kernel.Request) (kernel.Response, error) {
		select {
		case <-time.After(m.slow):
		case <-ctx.Done():
		}
		return kernel.Reply(kmsg.NewPtrListGroupsResponse()), nil
	}); err != nil {
		return err
	}
	// Produce v3+ is claimed so v0-v2 get UNSUPPORTED_VERSION from the kernel.
	if err := ctx.Handle(kmsg.Produce.Int16(), 3, 9, func(context.Context, *kernel.Request) (kernel.Response, error) {
		return kernel.Response{NoResponse: true}, nil
	}); err != nil {
		return err
	}
	// Fetch answers with a pre-encoded body whose middle comes from a file (sendfile).
	return ctx.Handle(kmsg.Fetch.Int16(), 4, 4, func(_ context.Context, r *kernel.Request) (kernel.Response, error) {
		if m.file == nil {
			return kernel.Response{}, errors.New("no file")
		}
		return kernel.Response{Body: &kernel.Body{Chunks: []kernel.Chunk{
			{Bytes: []byte("<<")}, {File: m.file, Off: 2, N: 5}, {Bytes: []byte(">>")},
		}}}, nil
	})
}

func (m *echoModule) Start(context.Context) error { m.started = true; return nil }
func (m *echoModule) Stop(context.Context) error  { m.stopped = true; return nil }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// unstartedKernel builds a kernel from yaml and reg on loopback ports with kernel-chosen
// numbers and a temporary data dir; the caller starts it.
func unstartedKernel(t *testing.T, reg *kernel.Registry, yaml string) *kernel.Kernel {
	t.Helper()
	cfg, err := kernel.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	cfg.Listeners = []kernel.ListenerConfig{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}}
	cfg.AdminListen = "127.0.0.1:0"
	k, err := kernel.New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newKernel(t *testing.T, yaml string) (*kernel.Kernel, *echoModule) {
	t.Helper()
	var mod *echoModule
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "echo.basic", New: func() kernel.Module { mod = &echoModule{Greeting: "hi"}; return mod }})
	k := unstartedKernel(t, reg, yaml)
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	return k, mod
}

const echoConfig = "modules: {echo: {use: basic, greeting: hello}}\n"

func TestConfigStrict(t *testing.T) {
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "echo.basic", New: func() kernel.Module { return &echoModule{} }})
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown top-level key", "nodeid: 3\n", "line 1: nodeid: unknown key (did you mean node_id?)"},
		{"unknown module key", "modules: {echo: {use: basic, greting: x}}\n", "line 1: modules.echo.greting: unknown key (did you mean greeting?)"},
		{"unknown module name", "modules: {echo: {use: fancy}}\n", `unknown module "fancy"`},
		{"unknown role", "modules: {nope: {use: basic}}\n", `unknown module role "nope"`},
		{"bad listener", "listeners: [{name: A, address: nope}]\n", "address"},
		{"bad request max", "configs: {socket.request.max.bytes: abc}\n", "not an integer"},
		{"idle time overflowing nanoseconds", "configs: {connections.max.idle.ms: \"18446744073710\"}\n", "connections.max.idle.ms"},
		{"advertised listener not defined", "configs: {advertised.listeners: \"OTHER://h:1\"}\n", `names listener "OTHER"`},
		{"advertised listener twice, differently", "listeners: [{name: A, address: \"127.0.0.1:0\", advertised: \"a:1\"}]\nconfigs: {advertised.listeners: \"A://b:2\"}\n", "is advertised as"},
		{"advertised listener without port", "configs: {advertised.listeners: \"PLAINTEXT://host\"}\n", "advertised.listeners"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := kernel.ParseConfig([]byte(tc.yaml))
			if err == nil {
				_, err = kernel.New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

// TestAdvertisedListenersConfig: Kafka's advertised.listeners in `configs:` gives the
// listeners' advertised addresses, which Metadata hands to clients.
func TestAdvertisedListenersConfig(t *testing.T) {
	k, _ := newKernel(t, "configs: {advertised.listeners: \"PLAINTEXT://broker.example:19092\"}\n"+echoConfig)
	info := k.Info()
	if len(info.Listeners) != 1 || info.Listeners[0].Host != "broker.example" || info.Listeners[0].Port != 19092 {
		t.Fatalf("listeners %+v", info.Listeners)
	}
}

func TestLifecycleAndApiVersions(t *testing.T) {
	k, mod := newKernel(t, echoConfig)
	if !mod.started || mod.Greeting != "hello" {
		t.Fatalf("module not configured/started: %+v", mod)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()[0].String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{18: {0, 5}, 60: {0, 1}, 1: {4, 4}, 0: {3, 9}, 16: {0, 4}}
	if len(got) != len(want) {
		t.Fatalf("advertised %v, want %v", got, want)
	}
	for key, v := range want {
		if got[key] != v {
			t.Fatalf("key %d: advertised %v, want %v", key, got[key], v)
		}
	}
	// Admin listener.
	for path, code := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		r, err := http.Get("http://" + k.AdminAddr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != code {
			t.Fatalf("%s: %d %s", path, r.StatusCode, body)
		}
		if path == "/metrics" && !bytes.Contains(body, []byte("sluice_requests_total")) {
			t.Fatalf("metrics missing counter:\n%s", body)
		}
	}
	if err := k.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !mod.stopped {
		t.Fatal("module not stopped")
	}
}

// rawConn is a plain TCP connection for hand-made frames.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func dial(t *testing.T, k *kernel.Kernel) *rawConn {
	nc, err := net.Dial("tcp", k.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc}
}

func (c *rawConn) send(req kmsg.Request, version int16, corr int32) {
	req.SetVersion(version)
	b := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, corr)
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) writeRaw(b []byte) {
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response frame and returns the correlation id and the rest.
func (c *rawConn) recv() (int32, []byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(c.nc, sz[:]); err != nil {
		return 0, nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c.nc, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// recvAs reads one response frame with a non-flexible header into resp, decoded as
// version v, and returns its correlation id.
func (c *rawConn) recvAs(resp kmsg.Response, v int16) int32 {
	c.t.Helper()
	corr, body, err := c.recv()
	if err != nil {
		c.t.Fatal(err)
	}
	resp.SetVersion(v)
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatal(err)
	}
	return corr
}

// expectClosed asserts the broker closed the connection without answering.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	if _, _, err := c.recv(); err == nil {
		c.t.Fatal("expected the connection to be closed, got a response")
	}
}

func TestPipelinedResponsesInOrder(t *testing.T) {
	k, _ := newKernel(t, echoConfig)
	c := dial(t, k)
	const n = 50
	for i := 0; i < n; i++ {
		c.send(kmsg.NewPtrDescribeClusterRequest(), 1, int32(1000+i))
	}
	for i := 0; i < n; i++ {
		corr, body, err := c.recv()
		if err != nil {
			t.Fatal(err)
		}
		if corr != int32(1000+i) {
			t.Fatalf("response %d has correlation %d", i, corr)
		}
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.SetVersion(1)
		if err := resp.ReadFrom(body[1:]); err != nil { // skip the flexible header's tags
			t.Fatal(err)
		}
		if want := "hello:" + itoa(int64(i+1)); resp.ClusterID != want {
			t.Fatalf("response %d: cluster id %q, want %q", i, resp.ClusterID, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	k, _ := newKernel(t, echoConfig)
	frame := func(payload []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
	}
	hdr := func(key, ver int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(ver))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"2GB size prefix", []byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xff}},
		{"zero size", []byte{0, 0, 0, 0}},
		{"short header", frame([]byte{0, 18, 0})},
		{"garbage", frame(bytes.Repeat([]byte{0xee}, 64))},
		{"unknown api key", frame(hdr(999, 0))},
		{"unclaimed api key", frame(hdr(kmsg.CreateTopics.Int16(), 2))},
		{"unsupported version", frame(hdr(kmsg.DescribeCluster.Int16(), 9))},
		{"truncated body", frame(append(hdr(kmsg.DescribeCluster.Int16(), 0), 0x01))},
		{"client id longer than frame", frame(append(hdr(kmsg.DescribeCluster.Int16(), 0)[:8], 0x10, 0x00))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, k)
			c.writeRaw(tc.b)
			c.expectClosed()
		})
	}
	// The broker goes on serving other connections.
	c := dial(t, k)
	c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 1)
	if _, _, err := c.recv(); err != nil {
		t.Fatalf("broker stopped serving after bad input: %v", err)
	}
}

func TestApiVersionsUnknownVersionFallsBackToV0(t *testing.T) {
	k, _ := newKernel(t, echoConfig)
	c := dial(t, k)
	// A version from the future: header v2 with an (empty) tag section.
	b := binary.BigEndian.AppendUint16(nil, 18)
	b = binary.BigEndian.AppendUint16(b, 99)
	b = binary.BigEndian.AppendUint32(b, 42)
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	b = append(b, 0, 0xde, 0xad)
	c.writeRaw(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	resp := kmsg.NewPtrApiVersionsResponse()
	corr := c.recvAs(resp, 0)
	if corr != 42 || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("corr %d err %d keys %d", corr, resp.ErrorCode, len(resp.ApiKeys))
	}
}

func TestZeroCopyBody(t *testing.T) {
	k, mod := newKernel(t, echoConfig)
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mod.file = f
	c := dial(t, k)
	for i := 0; i < 3; i++ { // the file position must not move between sends
		c.send(kmsg.NewPtrFetchRequest(), 4, int32(i))
		corr, body, err := c.recv()
		if err != nil {
			t.Fatal(err)
		}
		if corr != int32(i) || string(body) != "<<23456>>" {
			t.Fatalf("got corr %d body %q", corr, body)
		}
	}
	if pos, _ := f.Seek(0, io.SeekCurrent); pos != 0 {
		t.Fatalf("file position moved to %d", pos)
	}
}

func TestIdleConnectionsClosed(t *testing.T) {
	k, _ := newKernel(t, echoConfig+"configs: {connections.max.idle.ms: \"100\"}\n")
	c := dial(t, k)
	start := time.Now()
	c.expectClosed()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("idle connection closed after %v", d)
	}
}

// A connection waiting for a slow answer is not idle: the idle timer must not close it
// while its request runs, nor right after the answer.
func TestIdleTimerPausedWhileRequestInFlight(t *testing.T) {
	const idle = 100 * time.Millisecond
	k, mod := newKernel(t, echoConfig+"configs: {connections.max.idle.ms: \"100\"}\n")
	mod.slow = 5 * idle
	c := dial(t, k)
	c.send(kmsg.NewPtrListGroupsRequest(), 4, 1)
	if corr, _, err := c.recv(); err != nil || corr != 1 {
		t.Fatalf("slow request: corr %d err %v", corr, err)
	}
	// The connection is still usable, and idle again only from now.
	c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 2)
	if corr, _, err := c.recv(); err != nil || corr != 2 {
		t.Fatalf("request after a slow one: corr %d err %v", corr, err)
	}
	start := time.Now()
	c.expectClosed()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("idle connection closed after %v", d)
	}
}

// A client that pipelines big requests behind a slow one must not make the broker
// buffer pipelineDepth of them: the requests a connection has read and not answered are
// bounded by socket.request.max.bytes, so the broker stops reading and the client's
// writes stall.
func TestPipelinedBytesBounded(t *testing.T) {
	const maxReq = 4 << 20
	k, mod := newKernel(t, echoConfig+"configs: {socket.request.max.bytes: \""+itoa(maxReq)+"\"}\n")
	mod.slow = 2 * time.Second
	c := dial(t, k)
	c.send(kmsg.NewPtrListGroupsRequest(), 4, 1)
	big := make([]byte, maxReq)
	binary.BigEndian.PutUint32(big, maxReq-4)
	var written int
	for range 20 { // 80 MB; before the bound the broker read ~70 MB of it
		_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := c.nc.Write(big)
		written += n
		if err != nil {
			break
		}
	}
	// Socket buffers on loopback hold some MB; the broker itself at most maxReq more.
	if written > 40<<20 {
		t.Fatalf("the broker took %d MB of pipelined requests from one connection", written>>20)
	}
	c.nc.Close()
}

// An admin connection that never finishes its request must not outlive Shutdown.
func TestShutdownClosesHalfSentAdminRequest(t *testing.T) {
	k, _ := newKernel(t, echoConfig)
	nc, err := net.Dial("tcp", k.AdminAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	// Wait until the server is reading the request: a full request on another
	// connection is answered after this one was accepted.
	r, err := http.Get("http://" + k.AdminAddr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if err := k.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("admin connection still open after Shutdown returned")
	}
}

func TestGracefulShutdownClosesConnections(t *testing.T) {
	k, _ := newKernel(t, echoConfig)
	c := dial(t, k)
	c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 1)
	if _, _, err := c.recv(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	if _, err := net.Dial("tcp", k.Addrs()[0].String()); err == nil {
		t.Fatal("listener still accepting after shutdown")
	}
}

func TestOldProduceGetsUnsupportedVersion(t *testing.T) {
	k, _ := newKernel(t, echoConfig)
	c := dial(t, k)
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "old"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.send(req, 2, 9)
	resp := kmsg.NewPtrProduceResponse()
	corr := c.recvAs(resp, 2)
	if corr != 9 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].Partition != 3 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("corr %d resp %+v", corr, resp)
	}
}

// claimModule claims one API key and version range.
type claimModule struct{ key, maxV int16 }

func (m *claimModule) Provision(ctx kernel.Context) error {
	return ctx.Handle(m.key, 0, m.maxV, func(context.Context, *kernel.Request) (kernel.Response, error) {
		return kernel.Response{NoResponse: true}, nil
	})
}

// A claim the connection's decoder could not serve is a startup error, not a panic on
// the first request that uses it.
func TestClaimBeyondDecoderRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		key, maxV int16
	}{
		{"unknown key", 127, 0},
		{"version past the decoder", kmsg.DescribeCluster.Int16(), 99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := kernel.NewRegistry()
			reg.Register(kernel.ModuleInfo{ID: "echo.claim", New: func() kernel.Module { return &claimModule{key: tc.key, maxV: tc.maxV} }})
			k := unstartedKernel(t, reg, "modules: {echo: {use: claim}}\n")
			if err := k.Start(context.Background()); err == nil {
				_ = k.Shutdown(context.Background())
				t.Fatal("start accepted the claim")
			}
		})
	}
}

// Shutdown with connections in every state (idle, mid-frame, a slow request in
// flight, pipelined requests never read) leaves no kernel goroutine behind.
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	k, mod := newKernel(t, echoConfig)
	mod.slow = time.Minute // ends when Shutdown cancels the handlers' context
	var conns []*rawConn
	for i := range 40 {
		c := dial(t, k)
		conns = append(conns, c)
		switch i % 4 {
		case 1: // half a frame
			c.writeRaw([]byte{0, 0, 1, 0, 0, 60})
		case 2: // a slow request in flight
			c.send(kmsg.NewPtrListGroupsRequest(), 4, 1)
		case 3: // pipelined requests whose answers are never read
			for j := range 50 {
				c.send(kmsg.NewPtrDescribeClusterRequest(), 0, int32(j))
			}
		}
	}
	// Every connection has been accepted once a fresh one is answered.
	c := dial(t, k)
	c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 1)
	if _, _, err := c.recv(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_ = k.Shutdown(ctx)
	for _, c := range conns {
		c.nc.Close()
	}
	c.nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after Shutdown:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failModule fails Validate and counts Cleanup calls.
type failModule struct{ cleanups *atomic.Int64 }

func (m *failModule) Validate() error { return errors.New("bad config") }
func (m *failModule) Cleanup() error  { m.cleanups.Add(1); return nil }

// A Shutdown after a failed Start (say, deferred) cleans nothing up a second time:
// Start's own teardown already did.
func TestShutdownAfterFailedStartCleansUpOnce(t *testing.T) {
	var cleanups atomic.Int64
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "echo.fail", New: func() kernel.Module { return &failModule{cleanups: &cleanups} }})
	k := unstartedKernel(t, reg, "modules: {echo: {use: fail}}\n")
	if err := k.Start(context.Background()); err == nil {
		t.Fatal("start succeeded")
	}
	_ = k.Shutdown(context.Background())
	if n := cleanups.Load(); n != 1 {
		t.Fatalf("Cleanup called %d times", n)
	}
}

// ApiVersions v3+ carries the client's software name and version. Kafka answers
// INVALID_REQUEST only when one does not match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
// (an empty string, notably); what real clients send must be accepted.
func TestApiVersionsClientSoftware(t *testing.T) {
	k, _ := newKernel(t, echoConfig)
	for _, tc := range []struct {
		name, version string
		want          int16
	}{
		{"apache-kafka-java", "3.7.0", 0},
		{"librdkafka", "2.3.0", 0},
		{"confluent-kafka-python", "2.3.0-rdkafka-2.3.0", 0},
		{"kgo", "v1.17.1", 0},
		{"kgo", "unknown", 0},
		{"sarama", "dev", 0},
		{"", "1.0", kerr.InvalidRequest.Code},
		{"x", "", kerr.InvalidRequest.Code},
	} {
		c := dial(t, k)
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = tc.name, tc.version
		c.send(req, 3, 5)
		_, body, err := c.recv()
		if err != nil {
			t.Fatalf("%q/%q: %v", tc.name, tc.version, err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(3)
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != tc.want || len(resp.ApiKeys) == 0 {
			t.Errorf("%q/%q: code %d (want %d), %d keys", tc.name, tc.version, resp.ErrorCode, tc.want, len(resp.ApiKeys))
		}
	}
}

// ApiVersions v5 (KIP-1242): a client naming a broker other than this one is told
// REBOOTSTRAP_REQUIRED with no keys; naming only one of cluster and node is
// INVALID_REQUEST; naming neither (bootstrapping) or this broker is answered as usual.
// The cluster id is checked in modules/metadata (TestE2EApiVersionsMisrouted).
func TestApiVersionsMisrouted(t *testing.T) {
	k, _ := newKernel(t, echoConfig)
	for _, tc := range []struct {
		name    string
		cluster *string
		node    int32
		want    int16
	}{
		{"bootstrap", nil, -1, 0},
		{"this broker", kmsg.StringPtr("any"), k.Info().NodeID, 0},
		{"another broker", kmsg.StringPtr("any"), k.Info().NodeID + 1, kerr.RebootstrapRequired.Code},
		{"node alone", nil, k.Info().NodeID, kerr.InvalidRequest.Code},
		{"cluster alone", kmsg.StringPtr("any"), -1, kerr.InvalidRequest.Code},
	} {
		c := dial(t, k)
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kgo", "1"
		req.ClusterID, req.NodeID = tc.cluster, tc.node
		c.send(req, 5, 7)
		_, body, err := c.recv()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(5)
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != tc.want || (len(resp.ApiKeys) == 0) != (tc.want != 0) {
			t.Errorf("%s: code %d (want %d), %d keys", tc.name, resp.ErrorCode, tc.want, len(resp.ApiKeys))
		}
	}
}

// The profiler is served only when admin_pprof is set.
func TestAdminPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := echoConfig
		if on {
			cfg = "admin_pprof: true\n" + cfg
		}
		k, _ := newKernel(t, cfg)
		r, err := http.Get("http://" + k.AdminAddr().String() + "/debug/pprof/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if want := map[bool]int{false: 404, true: 200}[on]; r.StatusCode != want {
			t.Fatalf("admin_pprof %v: /debug/pprof/cmdline answered %d, want %d", on, r.StatusCode, want)
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
