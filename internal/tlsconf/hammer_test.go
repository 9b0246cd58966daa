package tlsconf

import (
	"crypto"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// Handshakes from many goroutines while the key store is rewritten in place (so some
// reads see half a file): every handshake gets a complete key pair, one of the files'
// versions, whose key matches its certificate.
func TestReloadHammer(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	pairs := []*tlstest.Pair{ca.Server(t, "a"), ca.Server(t, "b")}
	ks := tlstest.WriteFile(t, t.TempDir(), "server.pem", pairs[0].KeyStore())
	st, err := New(map[string]string{"ssl.keystore.location": ks}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// A clock a second further on at every look, so every handshake checks the file.
	var tick atomic.Int64
	base := time.Now()
	st.now = func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }
	srv, err := st.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.WriteFile(ks, pairs[i%2].KeyStore(), 0o600); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const P, N = 8, 300
	var wg sync.WaitGroup
	for range P {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range N {
				cfg, err := srv.GetConfigForClient(nil)
				if err != nil || len(cfg.Certificates) != 1 {
					t.Errorf("config: %v", err)
					return
				}
				c := cfg.Certificates[0]
				if !c.Leaf.Equal(pairs[0].Cert) && !c.Leaf.Equal(pairs[1].Cert) {
					t.Error("unknown certificate")
					return
				}
				if !c.Leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(c.PrivateKey.(interface{ Public() crypto.PublicKey }).Public()) {
					t.Error("key does not match the certificate")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	writer.Wait()
}
