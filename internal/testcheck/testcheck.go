// Package testcheck holds small test helpers that packages low in the import graph
// share: it imports no Sluice package, so any package's internal tests can use it.
//
//	testcheck.WantCode(t, "join", resp.ErrorCode, kerr.UnknownMemberID)
//	addr := testcheck.FreeAddr(t)
//	logs := &testcheck.SyncBuffer{}
package testcheck

import (
	"bytes"
	"net"
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

// FreeAddr returns a 127.0.0.1 host:port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
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
