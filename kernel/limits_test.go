package kernel_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// metric reads one value from the admin listener's /metrics.
func metric(t *testing.T, k *kernel.Kernel, name string) float64 {
	t.Helper()
	r, err := http.Get("http://" + k.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// describe sends DescribeCluster on a fresh connection and reports whether it was
// answered within d.
func describe(t *testing.T, k *kernel.Kernel, d time.Duration) bool {
	t.Helper()
	c := dial(t, k)
	defer c.nc.Close()
	_ = c.nc.SetDeadline(time.Now().Add(d))
	c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 7)
	corr, _, err := c.recv()
	return err == nil && corr == 7
}

// Connections that announce large requests and stall hold reservations, not memory,
// and not the whole budget: small requests keep being served, reading is paused (not
// failed) at the limit, and the reservations return when the stalled clients go.
func TestRequestBudgetBackPressure(t *testing.T) {
	const budget, maxReq = 8 << 20, 4 << 20
	k, _ := newKernel(t, echoConfig+"configs: {socket.request.max.bytes: \""+itoa(maxReq)+"\", queued.max.request.bytes: \""+itoa(budget)+"\"}\n")
	var stalled []net.Conn
	for range 6 {
		nc, err := net.Dial("tcp", k.Addrs()[0].String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		hdr := make([]byte, 4+8)
		binary.BigEndian.PutUint32(hdr, maxReq)
		binary.BigEndian.PutUint16(hdr[4:], uint16(kmsg.DescribeCluster.Int16()))
		_, _ = nc.Write(hdr)
		_ = nc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		_, _ = nc.Write(make([]byte, maxReq/2)) // half the body, then nothing
		stalled = append(stalled, nc)
	}
	waitFor(t, 10*time.Second, func() bool {
		return metric(t, k, "sluice_request_budget_waits_total") >= 5
	})
	if in := metric(t, k, "sluice_request_budget_bytes"); in > budget {
		t.Fatalf("%v bytes reserved, budget %d", in, budget)
	}
	for range 3 {
		if !describe(t, k, 5*time.Second) {
			t.Fatal("a small request was not served while stalled large ones hold the budget")
		}
	}
	for _, nc := range stalled {
		nc.Close()
	}
	waitFor(t, 10*time.Second, func() bool {
		return metric(t, k, "sluice_request_budget_bytes") == 0
	})
}

func TestRequestBudgetConfig(t *testing.T) {
	reg := kernel.NewRegistry()
	for _, tc := range []struct{ yaml, want string }{
		{"configs: {queued.max.request.bytes: \"1000\"}\n", "smaller than socket.request.max.bytes"},
		{"configs: {queued.max.request.bytes: \"0\"}\n", "want -1"},
		{"configs: {max.connections.per.ip: \"0\"}\n", "overrides is empty"},
		{"configs: {max.connections.per.ip.overrides: \"localhost:3\"}\n", "not an IP address"},
		{"configs: {max.connections: \"-2\"}\n", "at least 0"},
	} {
		cfg, err := kernel.ParseConfig([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kernel.New(cfg, reg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// -1 is Kafka's unbounded and still accepted.
	cfg, _ := kernel.ParseConfig([]byte("configs: {queued.max.request.bytes: \"-1\"}\n"))
	if _, err := kernel.New(cfg, reg, nil); err != nil {
		t.Fatal(err)
	}
}

// closedAtOnce reports whether the broker closed a fresh connection without reading.
func closedAtOnce(t *testing.T, k *kernel.Kernel) bool {
	t.Helper()
	nc, err := net.Dial("tcp", k.Addrs()[0].String())
	if err != nil {
		return true
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = nc.Read(make([]byte, 1))
	return err == io.EOF
}

func TestMaxConnectionsPerIP(t *testing.T) {
	for _, tc := range []struct {
		name, configs string
		allowed       int
	}{
		{"per ip", `max.connections.per.ip: "2"`, 2},
		{"override raises", `max.connections.per.ip: "1", max.connections.per.ip.overrides: "127.0.0.1:3,10.0.0.1:1"`, 3},
		{"override lowers", `max.connections.per.ip.overrides: "127.0.0.1:1"`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, _ := newKernel(t, echoConfig+"configs: {"+tc.configs+"}\n")
			var held []*rawConn
			for range tc.allowed {
				c := dial(t, k)
				c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 1)
				if _, _, err := c.recv(); err != nil {
					t.Fatalf("connection within the limit: %v", err)
				}
				held = append(held, c)
			}
			if !closedAtOnce(t, k) {
				t.Fatal("a connection over max.connections.per.ip was not closed at once")
			}
			if metric(t, k, "sluice_connections_refused_total") < 1 {
				t.Fatal("refusal not counted")
			}
			held[0].nc.Close()
			waitFor(t, 5*time.Second, func() bool { return describe(t, k, time.Second) })
		})
	}
}

// At max.connections the broker stops accepting: a new client's connect completes in
// the kernel's backlog but is not served until another connection closes.
func TestMaxConnectionsBlocksAccept(t *testing.T) {
	for _, key := range []string{"max.connections", "listener.name.plaintext.max.connections"} {
		t.Run(key, func(t *testing.T) {
			k, _ := newKernel(t, echoConfig+"configs: {"+key+": \"2\"}\n")
			a, b := dial(t, k), dial(t, k)
			for _, c := range []*rawConn{a, b} {
				c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 1)
				if _, _, err := c.recv(); err != nil {
					t.Fatal(err)
				}
			}
			c := dial(t, k)
			c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 9)
			_ = c.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, _, err := c.recv(); err == nil {
				t.Fatal("a third connection was served at max.connections 2")
			}
			_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			a.nc.Close()
			corr, _, err := c.recv()
			if err != nil || corr != 9 {
				t.Fatalf("the waiting connection was not served after a close: %v", err)
			}
			if metric(t, k, "sluice_connection_accept_waits_total") < 1 {
				t.Fatal("the blocked accept was not counted")
			}
		})
	}
}

// max.connection.creation.rate spaces accepts out: 2 a second, after a burst of 2,
// makes 6 connections take about 2 s.
func TestMaxConnectionCreationRate(t *testing.T) {
	k, _ := newKernel(t, echoConfig+"configs: {max.connection.creation.rate: \"2\"}\n")
	start := time.Now()
	for range 6 {
		if !describe(t, k, 10*time.Second) {
			t.Fatal("a connection was not served")
		}
	}
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Fatalf("6 connections at 2/s took only %v", el)
	}
}

func TestParseIPOverrides(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]int64
		err  bool
	}{
		{"", map[string]int64{}, false},
		{"127.0.0.1:5, ::1:7,[fe80::1]:0", map[string]int64{"127.0.0.1": 5, "::1": 7, "fe80::1": 0}, false},
		{"::ffff:10.0.0.1:3", map[string]int64{"10.0.0.1": 3}, false},
		{"127.0.0.1", nil, true},
		{"127.0.0.1:", nil, true},
		{"127.0.0.1:-1", nil, true},
		{"host.example:3", nil, true},
		{"1.2.3.4:1,1.2.3.4:2", nil, true},
	} {
		got, err := kernel.ParseIPOverrides(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		if tc.err {
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: got %v", tc.in, got)
		}
		for ip, n := range got {
			if tc.want[ip.String()] != n {
				t.Errorf("%q: %s=%d, want %v", tc.in, ip, n, tc.want)
			}
		}
	}
}

func FuzzParseIPOverrides(f *testing.F) {
	for _, s := range []string{"", "127.0.0.1:1", "::1:2,[::2]:3", "a:b", ",,", "1.2.3.4:99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := kernel.ParseIPOverrides(s)
		if err != nil {
			return
		}
		for ip, n := range m {
			if !ip.IsValid() || n < 0 || ip.Is4In6() {
				t.Fatalf("%q: bad entry %v=%d", s, ip, n)
			}
		}
	})
}
