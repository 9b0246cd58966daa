// Package testcheck holds small test helpers that packages low in the import graph
// share: it imports no Sluice package, so any package's internal tests can use it.
//
//	testcheck.WantCode(t, "join", resp.ErrorCode, kerr.UnknownMemberID)
//	addr := testcheck.FreeAddr(t)
//	logs := &testcheck.SyncBuffer{}
package testcheck

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// WantCode fails the test unless the Kafka error code got is want's (0 for a nil want).
func WantCode(t testing.TB, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: code %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// FreeAddr returns a 127.0.0.1 host:port that was free a moment ago, for a test that
// must name an address before the server that listens on it starts (a raft voter).
//
// It picks the port below the kernel's ephemeral range when it can: a port handed
// out for ":0" then is one no other listener binding ":0" (an admin listener started
// meanwhile, say) can be given, so the only way to lose it is another FreeAddr
// picking the same random port, which the retries below make unlikely.
func FreeAddr(t testing.TB) string {
	t.Helper()
	if lo, hi, ok := belowEphemeral(); ok {
		for range 200 {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo)))
			if ln, err := net.Listen("tcp", addr); err == nil {
				_ = ln.Close()
				return addr
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// belowEphemeral returns a port range [lo, hi) under Linux's ephemeral port range
// (net.ipv4.ip_local_port_range), if that leaves one of useful size.
func belowEphemeral() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start < 12000 {
		return 0, 0, false
	}
	return 10000, start, true
}

// SyncBuffer is an io.Writer safe for concurrent use, for a process's or a logger's
// output that a test reads while it is still written.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
