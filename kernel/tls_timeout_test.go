package kernel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// A client that connects to a TLS port and never starts its handshake is closed when
// the handshake deadline passes, and the others are served meanwhile.
func TestSilentTLSClientClosedAtDeadline(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	ks := tlstest.WriteFile(t, t.TempDir(), "server.pem", ca.Server(t, "broker").KeyStore())
	cfg, err := ParseConfig([]byte("configs: {ssl.keystore.location: " + ks + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	cfg.Listeners = []ListenerConfig{{Name: "SSL", Address: "127.0.0.1:0"}}
	cfg.AdminListen = "127.0.0.1:0"
	k, err := New(cfg, NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	k.tlsTimeout = 300 * time.Millisecond
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	nc, err := net.Dial("tcp", k.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = nc.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("silent client not closed")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("closed after %v, before the handshake deadline (%v)", d, err)
	}
	// The handshake's context closes the socket as its deadline passes, a moment
	// before the failure is counted: poll for the count.
	for deadline := time.Now().Add(5 * time.Second); k.mTLSFailed.Value() != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := k.mTLSFailed.Value(); got != 1 {
		t.Fatalf("%d handshake failures counted", got)
	}
}
