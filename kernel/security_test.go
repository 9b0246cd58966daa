package kernel_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
	"github.com/sluicehq/sluice/kernel"
)

// whoamiModule claims DescribeCluster and answers with who the connection is: the
// principal in ClusterID, "protocol tls=bool" in ErrorMessage.
type whoamiModule struct {
	mu   sync.Mutex
	seen []string
}

func (m *whoamiModule) Provision(ctx kernel.Context) error {
	return ctx.Handle(kmsg.DescribeCluster.Int16(), 0, 1, func(_ context.Context, r *kernel.Request) (kernel.Response, error) {
		p := r.Conn.Principal.String()
		m.mu.Lock()
		m.seen = append(m.seen, p)
		m.mu.Unlock()
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.ClusterID = p
		msg := r.Conn.Protocol
		if r.Conn.TLS != nil {
			msg += " tls"
		}
		resp.ErrorMessage = &msg
		return kernel.Reply(resp), nil
	})
}

// secureBroker is a started kernel with the given listeners (name → "" for
// 127.0.0.1:0) and extra modules registered in reg.
type secureBroker struct {
	k    *kernel.Kernel
	logs *syncBuffer
}

// addr returns the bound address of the listener named name.
func (b *secureBroker) addr(t *testing.T, name string) string {
	t.Helper()
	for i, l := range b.k.Info().Listeners {
		if l.Name == name {
			return b.k.Addrs()[i].String()
		}
	}
	t.Fatalf("no listener %s", name)
	return ""
}

// buildSecure builds (not starts) a kernel from yaml with listeners named names on
// loopback.
func buildSecure(t *testing.T, reg *kernel.Registry, yaml string, names ...string) (*kernel.Kernel, *syncBuffer, error) {
	t.Helper()
	cfg, err := kernel.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	cfg.Listeners = nil
	for _, n := range names {
		cfg.Listeners = append(cfg.Listeners, kernel.ListenerConfig{Name: n, Address: "127.0.0.1:0"})
	}
	cfg.AdminListen = "127.0.0.1:0"
	logs := &syncBuffer{}
	k, err := kernel.New(cfg, reg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return k, logs, err
}

func startSecure(t *testing.T, reg *kernel.Registry, yaml string, names ...string) *secureBroker {
	t.Helper()
	k, logs, err := buildSecure(t, reg, yaml, names...)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	return &secureBroker{k: k, logs: logs}
}

func whoamiRegistry() *kernel.Registry {
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "who.ami", New: func() kernel.Module { return &whoamiModule{} }})
	return reg
}

// pki is a CA with a server key store and trust store written to files.
type pki struct {
	ca                 *tlstest.CA
	dir                string
	keystore, truststr string
}

func newPKI(t *testing.T) *pki {
	ca := tlstest.NewCA(t, "sluice-test-ca")
	dir := t.TempDir()
	return &pki{ca: ca, dir: dir,
		keystore: tlstest.WriteFile(t, dir, "server.pem", ca.Server(t, "broker").KeyStore()),
		truststr: tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)}
}

// yaml is the config's configs section for TLS, plus extra lines of "key: value".
func (p *pki) yaml(extra ...string) string {
	s := "modules: {who: {use: ami}}\nconfigs:\n  ssl.keystore.location: " + p.keystore + "\n  ssl.truststore.location: " + p.truststr + "\n"
	for _, e := range extra {
		s += "  " + e + "\n"
	}
	return s
}

// clientTLS trusts the CA, for the host localhost, with an optional client cert.
func (p *pki) clientTLS(t *testing.T, cert *tlstest.Pair) *tls.Config {
	cfg := &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLS(t)}
	}
	return cfg
}

// whoami asks DescribeCluster with kgo over addr and returns the principal and the
// protocol message.
func whoami(t *testing.T, addr string, opts ...kgo.Opt) (string, string, error) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil {
		return "", "", err
	}
	msg := ""
	if resp.ErrorMessage != nil {
		msg = *resp.ErrorMessage
	}
	return resp.ClusterID, msg, nil
}

func TestListenerProtocolMap(t *testing.T) {
	reg := whoamiRegistry()
	for _, tc := range []struct {
		name, yaml string
		listeners  []string
		want       string
	}{
		{"unmapped name", "", []string{"PLAINTEXT", "INTERNAL"}, `listener "INTERNAL" has no security protocol`},
		{"bad protocol", "configs: {listener.security.protocol.map: \"INTERNAL:TLS\"}\n", []string{"INTERNAL"}, `unknown security protocol "TLS"`},
		{"bad pair", "configs: {listener.security.protocol.map: \"INTERNAL\"}\n", []string{"INTERNAL"}, "not NAME:PROTOCOL"},
		{"mapped twice", "configs: {listener.security.protocol.map: \"A:SSL,A:PLAINTEXT\"}\n", []string{"A"}, "mapped twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := buildSecure(t, reg, tc.yaml, tc.listeners...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("names compare in upper case", func(t *testing.T) {
		if _, _, err := buildSecure(t, reg, "configs: {listener.security.protocol.map: \"internal:plaintext\"}\n", "Internal", "plaintext"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bad principal mapping rules", func(t *testing.T) {
		p := newPKI(t)
		k, _, err := buildSecure(t, reg, p.yaml(`ssl.principal.mapping.rules: "RULE:^CN=(.*$/$1/"`), "SSL")
		if err != nil {
			t.Fatal(err)
		}
		err = k.Start(context.Background())
		defer k.Shutdown(context.Background())
		if err == nil || !strings.Contains(err.Error(), "ssl.principal.mapping.rules") {
			t.Fatalf("start: %v", err)
		}
	})
	t.Run("TLS listener without key store", func(t *testing.T) {
		k, _, err := buildSecure(t, reg, "configs: {listener.security.protocol.map: \"EXTERNAL:SSL,PLAINTEXT:PLAINTEXT\"}\n", "PLAINTEXT", "EXTERNAL")
		if err != nil {
			t.Fatal(err)
		}
		err = k.Start(context.Background())
		defer k.Shutdown(context.Background())
		if err == nil || !strings.Contains(err.Error(), "listener EXTERNAL (SSL)") || !strings.Contains(err.Error(), "no key store") {
			t.Fatalf("start: %v", err)
		}
	})
}

func TestPlaintextAndSSLListeners(t *testing.T) {
	p := newPKI(t)
	b := startSecure(t, whoamiRegistry(), p.yaml("listener.security.protocol.map: \"LOCAL:PLAINTEXT,EXTERNAL:SSL\""), "LOCAL", "EXTERNAL")
	who, msg, err := whoami(t, b.addr(t, "LOCAL"))
	if err != nil || who != "User:ANONYMOUS" || msg != "PLAINTEXT" {
		t.Fatalf("plaintext: %q %q %v", who, msg, err)
	}
	who, msg, err = whoami(t, b.addr(t, "EXTERNAL"), kgo.DialTLSConfig(p.clientTLS(t, nil)))
	if err != nil || who != "User:ANONYMOUS" || msg != "SSL tls" {
		t.Fatalf("ssl: %q %q %v", who, msg, err)
	}
}

func TestMutualTLSPrincipal(t *testing.T) {
	p := newPKI(t)
	alice := p.ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme"}, Country: []string{"US"}})
	svc := p.ca.Client(t, pkix.Name{CommonName: "Kafka-Svc", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Acme"}})
	stranger := tlstest.NewCA(t, "other").Client(t, pkix.Name{CommonName: "mallory"})
	for _, tc := range []struct {
		name, auth, rules string
		cert              *tlstest.Pair
		want              string // "" = refused
	}{
		{"required, default rules", "required", "", alice, "User:CN=alice,OU=eng,O=Acme,C=US"},
		{"required, no cert", "required", "", nil, ""},
		{"required, untrusted cert", "required", "", stranger, ""},
		{"requested, no cert", "requested", "", nil, "User:ANONYMOUS"},
		{"requested, cert", "requested", "", alice, "User:CN=alice,OU=eng,O=Acme,C=US"},
		{"none ignores the cert", "none", "", alice, "User:ANONYMOUS"},
		{"rules map service users", "required", `"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT"`, svc, "User:kafka-svc"},
		{"rules fall to default", "required", `"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT"`, alice, "User:CN=alice,OU=eng,O=Acme,C=US"},
		{"no rule applies", "required", `"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L"`, alice, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := []string{"ssl.client.auth: " + tc.auth}
			if tc.rules != "" {
				extra = append(extra, "ssl.principal.mapping.rules: "+tc.rules)
			}
			b := startSecure(t, whoamiRegistry(), p.yaml(extra...), "SSL")
			who, _, err := whoami(t, b.addr(t, "SSL"), kgo.DialTLSConfig(p.clientTLS(t, tc.cert)))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("accepted as %q", who)
				}
				return
			}
			if err != nil || who != tc.want {
				t.Fatalf("got %q, %v; want %q", who, err, tc.want)
			}
		})
	}
}

func TestNoRuleAppliesIsLogged(t *testing.T) {
	p := newPKI(t)
	alice := p.ca.Client(t, pkix.Name{CommonName: "alice"})
	b := startSecure(t, whoamiRegistry(), p.yaml("ssl.client.auth: required", `ssl.principal.mapping.rules: "RULE:^CN=bob$/bob/"`), "SSL")
	if _, _, err := whoami(t, b.addr(t, "SSL"), kgo.DialTLSConfig(p.clientTLS(t, alice))); err == nil {
		t.Fatal("accepted")
	}
	waitFor(t, 5*time.Second, func() bool { return strings.Contains(b.logs.String(), "no rules apply to CN=alice") })
}

func TestKeyStoreReload(t *testing.T) {
	p := newPKI(t)
	b := startSecure(t, whoamiRegistry(), p.yaml(), "SSL")
	addr := b.addr(t, "SSL")
	leaf := func() string {
		t.Helper()
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, p.clientTLS(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		return tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := leaf(); got != "broker" {
		t.Fatalf("leaf %q", got)
	}
	tlstest.Replace(t, p.keystore, p.ca.Server(t, "broker-rotated").KeyStore())
	waitFor(t, 5*time.Second, func() bool { return leaf() == "broker-rotated" })
	// Connections after the reload still work end to end.
	if _, msg, err := whoami(t, addr, kgo.DialTLSConfig(p.clientTLS(t, nil))); err != nil || msg != "SSL tls" {
		t.Fatalf("after reload: %q %v", msg, err)
	}
}

// A Kafka client speaking plaintext to a TLS port is closed promptly, never left
// hanging until the handshake timeout.
func TestPlaintextClientOnTLSPortClosed(t *testing.T) {
	p := newPKI(t)
	b := startSecure(t, whoamiRegistry(), p.yaml(), "SSL")
	nc, err := net.Dial("tcp", b.addr(t, "SSL"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("plain")).AppendRequest(nil, req, 1)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection left open (read %d bytes)", len(got))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("closed after %v", d)
	}
	// Whatever came back (a TLS alert at most) is no Kafka response to correlation 1.
	if len(got) >= 8 && bytes.Equal(got[4:8], []byte{0, 0, 0, 1}) {
		t.Fatalf("got a Kafka response: %x", got)
	}
}

// A client that connects to a TLS port and says nothing is closed by the handshake
// timeout... which is long; here only that the accept loop is not blocked by it: a
// second client handshakes at once.
func TestSilentClientDoesNotBlockAccept(t *testing.T) {
	p := newPKI(t)
	b := startSecure(t, whoamiRegistry(), p.yaml(), "SSL")
	silent, err := net.Dial("tcp", b.addr(t, "SSL"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if _, msg, err := whoami(t, b.addr(t, "SSL"), kgo.DialTLSConfig(p.clientTLS(t, nil))); err != nil || msg != "SSL tls" {
		t.Fatalf("second client: %q %v", msg, err)
	}
}

func TestAdminTLS(t *testing.T) {
	p := newPKI(t)
	b := startSecure(t, whoamiRegistry(), "admin_tls: true\n"+p.yaml(), "PLAINTEXT")
	url := "https://" + b.k.AdminAddr().String() + "/healthz"
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost"}}}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" || resp.TLS == nil {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + b.k.AdminAddr().String() + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Fatal("plain HTTP served on the TLS admin listener")
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
