package kernel

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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
	// The handshake's context closes the socket before HandshakeContext returns and
	// the failure is counted: poll.
	for deadline := time.Now().Add(5 * time.Second); k.mTLSFailed.Value() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d handshake failures counted", k.mTLSFailed.Value())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startTLSKernel starts a kernel with one SSL listener and the module mod.
func startTLSKernel(t testing.TB, mod Module) (*Kernel, *tlstest.CA) {
	ca := tlstest.NewCA(t, "ca")
	ks := tlstest.WriteFile(t, t.TempDir(), "server.pem", ca.Server(t, "broker").KeyStore())
	reg := NewRegistry()
	reg.Register(ModuleInfo{ID: "echo.big", New: func() Module { return mod }})
	cfg, err := ParseConfig([]byte("modules: {echo: {use: big}}\nconfigs: {ssl.keystore.location: " + ks + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	cfg.Listeners = []ListenerConfig{{Name: "SSL", Address: "127.0.0.1:0"}}
	cfg.AdminListen = "127.0.0.1:0"
	k, err := New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	return k, ca
}

// fetchOverTLS sends Fetch v4 and returns the response body.
func fetchOverTLS(t testing.TB, nc net.Conn, corr int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(4)
	if _, err := nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)); err != nil {
		t.Fatal(err)
	}
	var sz [4]byte
	if _, err := io.ReadFull(nc, sz[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(nc, b); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		t.Fatalf("correlation %d", got)
	}
	return b[4:]
}

// manyChunks is a fetch-like body: many small byte chunks and small file ranges (a
// consumer at the tail of many partitions) and one large range.
func manyChunks(t testing.TB) ([]Chunk, []byte) {
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f := tempFile(t, data)
	var chunks []Chunk
	var want []byte
	for i := 0; i < 500; i++ {
		hdr := []byte(fmt.Sprintf("partition-%03d", i))
		off := int64(i * 97)
		chunks = append(chunks, Chunk{Bytes: hdr}, Chunk{File: f, Off: off, N: 300})
		want = append(append(want, hdr...), data[off:off+300]...)
	}
	chunks = append(chunks, Chunk{File: f, Off: 1000, N: 3 << 20})
	want = append(want, data[1000:1000+3<<20]...)
	return chunks, want
}

// A chunked body (bytes, small and large file ranges) arrives intact over TLS, where
// there is no sendfile.
func TestChunkedBodyOverTLS(t *testing.T) {
	chunks, want := manyChunks(t)
	k, ca := startTLSKernel(t, &bigBodyModule{body: chunks})
	nc, err := tls.Dial("tcp", k.Addrs()[0].String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	for corr := int32(1); corr <= 3; corr++ {
		if got := fetchOverTLS(t, nc, corr); !bytes.Equal(got, want) {
			t.Fatalf("response %d: %d bytes, want %d (equal prefix %v)", corr, len(got), len(want), bytes.HasPrefix(want, got[:min(len(got), 100)]))
		}
	}
}

// BenchmarkChunkedBodyOverTLS: a 3.3 MB fetch-like body of 1,001 chunks over TLS.
func BenchmarkChunkedBodyOverTLS(b *testing.B) {
	chunks, want := manyChunks(b)
	k, ca := startTLSKernel(b, &bigBodyModule{body: chunks})
	nc, err := tls.Dial("tcp", k.Addrs()[0].String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	b.SetBytes(int64(len(want)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fetchOverTLS(b, nc, int32(i+1))
	}
}
