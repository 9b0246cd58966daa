package kernel_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// adminAuth is an auth module that authenticates (a user → password map) and authorizes
// (principal → granted cluster operations, nothing else). It also serves an admin
// route that echoes the request's admin principal, and a PUT route.
type adminAuth struct {
	authn  bool // implements kernel.Authenticator (through adminAuthn)
	users  map[string]string
	grants map[string][]kernel.Operation

	mu    sync.Mutex
	hosts []string // hosts Authorize was asked about
}

func (f *adminAuth) Provision(ctx kernel.Context) error {
	ctx.HandleHTTP("GET /v1/whoami", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := kernel.AdminPrincipal(r)
		fmt.Fprintf(w, "%s %v", p, ok)
	}))
	ctx.HandleHTTP("PUT /v1/thing", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("stored"))
	}))
	return nil
}

func (f *adminAuth) Authorize(_ context.Context, p kernel.Principal, host string, op kernel.Operation, r kernel.Resource) bool {
	f.mu.Lock()
	f.hosts = append(f.hosts, host)
	f.mu.Unlock()
	if r != (kernel.Resource{Type: kernel.ResCluster, Name: kernel.ClusterResourceName}) {
		return false
	}
	for _, g := range f.grants[p.String()] {
		if g == op {
			return true
		}
	}
	return false
}

// adminAuthn is adminAuth with the Authenticator methods.
type adminAuthn struct{ *adminAuth }

func (adminAuthn) Mechanisms() []string { return []string{"PLAIN"} }
func (adminAuthn) StartSASL(string, *kernel.ConnInfo) (kernel.SASLExchange, error) {
	return nil, errors.New("no SASL here")
}
func (f adminAuthn) CheckPassword(_ context.Context, user, password string) (kernel.Principal, bool) {
	want, ok := f.users[user]
	if !ok || want != password {
		return kernel.Principal{}, false
	}
	return kernel.Principal{Type: "User", Name: user}, true
}

var (
	_ kernel.Authorizer    = (*adminAuth)(nil)
	_ kernel.Authenticator = adminAuthn{}
)

// adminKernel starts a kernel whose auth module is f (an Authenticator when f.authn),
// with extra YAML config lines, logging into logs.
func adminKernel(t *testing.T, f *adminAuth, extra string, logs io.Writer) *kernel.Kernel {
	t.Helper()
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "auth.fake", New: func() kernel.Module {
		if f.authn {
			return adminAuthn{f}
		}
		return f
	}})
	cfg, err := kernel.ParseConfig([]byte("modules: {auth: {use: fake}}\n" + extra))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	cfg.Listeners = []kernel.ListenerConfig{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}}
	cfg.AdminListen = "127.0.0.1:0"
	if logs == nil {
		logs = io.Discard
	}
	k, err := kernel.New(cfg, reg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	return k
}

func newFakeAuth() *adminAuth {
	return &adminAuth{
		authn: true,
		users: map[string]string{"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"},
		grants: map[string][]kernel.Operation{
			"User:alice": {kernel.OpDescribe},
			"User:bob":   {kernel.OpDescribe, kernel.OpAlter},
		},
	}
}

// syncBuffer holds a logger's output; the logger writes from many goroutines.
type syncBuffer = testcheck.SyncBuffer

type adminReq struct {
	method, path string
	user, pass   string // Basic credentials when user != ""
	header       string // a raw Authorization header instead
}

func doAdmin(t *testing.T, cl *http.Client, base string, q adminReq) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(q.method, base+q.path, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if q.user != "" {
		req.SetBasicAuth(q.user, q.pass)
	}
	if q.header != "" {
		req.Header.Set("Authorization", q.header)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestAdminAuthBasic(t *testing.T) {
	f := newFakeAuth()
	logs := &syncBuffer{}
	k := adminKernel(t, f, "", logs)
	base := "http://" + k.AdminAddr().String()
	for _, tc := range []struct {
		name string
		q    adminReq
		code int
		body string // substring of the body
	}{
		{"healthz open", adminReq{method: "GET", path: "/healthz"}, 200, "ok"},
		{"readyz open", adminReq{method: "GET", path: "/readyz"}, 200, "ready"},
		{"no credentials", adminReq{method: "GET", path: "/v1/whoami"}, 401, "authentication required"},
		{"metrics need credentials", adminReq{method: "GET", path: "/metrics"}, 401, ""},
		{"unknown path: 401, not 404", adminReq{method: "GET", path: "/nope"}, 401, ""},
		{"wrong password", adminReq{method: "GET", path: "/v1/whoami", user: "alice", pass: "nope"}, 401, ""},
		{"unknown user", adminReq{method: "GET", path: "/v1/whoami", user: "mallory", pass: "alice-pw"}, 401, ""},
		{"not Basic", adminReq{method: "GET", path: "/v1/whoami", header: "Bearer abc"}, 401, ""},
		{"right password, no grant", adminReq{method: "GET", path: "/v1/whoami", user: "carol", pass: "carol-pw"}, 403, "User:carol is not authorized"},
		{"Describe reads", adminReq{method: "GET", path: "/v1/whoami", user: "alice", pass: "alice-pw"}, 200, "User:alice true"},
		{"Describe reads metrics", adminReq{method: "GET", path: "/metrics", user: "alice", pass: "alice-pw"}, 200, "sluice_requests_total"},
		{"Describe does not write", adminReq{method: "PUT", path: "/v1/thing", user: "alice", pass: "alice-pw"}, 403, "needs Alter on the cluster"},
		{"Alter writes", adminReq{method: "PUT", path: "/v1/thing", user: "bob", pass: "bob-pw"}, 200, "stored"},
		{"Alter for DELETE too", adminReq{method: "DELETE", path: "/v1/thing", user: "alice", pass: "alice-pw"}, 403, ""},
		{"bob reads", adminReq{method: "GET", path: "/v1/whoami", user: "bob", pass: "bob-pw"}, 200, "User:bob true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			resp, body := doAdmin(t, http.DefaultClient, base, tc.q)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("got %d %q, want %d with %q", resp.StatusCode, body, tc.code, tc.body)
			}
			if tc.code == 401 {
				if got := resp.Header.Get("WWW-Authenticate"); got != `Basic realm="sluice"` {
					t.Fatalf("WWW-Authenticate %q", got)
				}
				// connection.failed.authentication.delay.ms defaults to 100.
				if d := time.Since(start); d < 100*time.Millisecond {
					t.Fatalf("401 after %v, want the 100ms delay", d)
				}
			}
		})
	}
	f.mu.Lock()
	hosts := f.hosts
	f.mu.Unlock()
	if len(hosts) == 0 || hosts[0] != "127.0.0.1" {
		t.Fatalf("Authorize hosts %v, want the client's IP", hosts)
	}
	// Failures are logged, rate-limited, without the password.
	out := logs.String()
	if n := strings.Count(out, "authentication failed"); n != 1 {
		t.Fatalf("%d failure lines (want 1, rate-limited):\n%s", n, out)
	}
	if strings.Contains(out, "alice-pw") || strings.Contains(out, "nope") {
		t.Fatalf("a password reached the log:\n%s", out)
	}
}

func TestAdminAuthFailureDelayConfig(t *testing.T) {
	k := adminKernel(t, newFakeAuth(), "configs: {connection.failed.authentication.delay.ms: \"400\"}\n", nil)
	base := "http://" + k.AdminAddr().String()
	start := time.Now()
	resp, _ := doAdmin(t, http.DefaultClient, base, adminReq{method: "GET", path: "/v1/whoami", user: "alice", pass: "x"})
	if resp.StatusCode != 401 {
		t.Fatalf("got %d", resp.StatusCode)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("401 after %v, want the configured 400ms", d)
	}
	for _, bad := range []string{"-1", "abc", "600000"} {
		cfg, err := kernel.ParseConfig([]byte("configs: {connection.failed.authentication.delay.ms: \"" + bad + "\"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kernel.New(cfg, kernel.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil ||
			!strings.Contains(err.Error(), "connection.failed.authentication.delay.ms") {
			t.Fatalf("%s: got %v", bad, err)
		}
	}
}

func TestAdminWithoutAuthenticator(t *testing.T) {
	f := newFakeAuth()
	f.authn = false
	f.grants["User:ANONYMOUS"] = []kernel.Operation{kernel.OpDescribe}
	k := adminKernel(t, f, "", nil)
	base := "http://" + k.AdminAddr().String()
	// Not authenticated: ANONYMOUS, still authorized by the module.
	if resp, body := doAdmin(t, http.DefaultClient, base, adminReq{method: "GET", path: "/v1/whoami"}); resp.StatusCode != 200 || body != "User:ANONYMOUS false" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if resp, _ := doAdmin(t, http.DefaultClient, base, adminReq{method: "PUT", path: "/v1/thing"}); resp.StatusCode != 403 {
		t.Fatalf("PUT without Alter: %d", resp.StatusCode)
	}
}

func TestAdminRefusesExposedListener(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		authn      bool
		wantErr    bool
	}{
		{"all interfaces v4", "0.0.0.0:0", false, true},
		{"all interfaces (empty host)", ":0", false, true},
		{"a host name", "example.com:9644", false, true},
		{"a public IP", "192.0.2.10:9644", false, true},
		{"loopback v4", "127.0.0.1:0", false, false},
		{"loopback v6", "[::1]:0", false, false},
		{"localhost", "localhost:0", false, false},
		{"exposed but authenticated", "0.0.0.0:0", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAuth()
			f.authn = tc.authn
			reg := kernel.NewRegistry()
			reg.Register(kernel.ModuleInfo{ID: "auth.fake", New: func() kernel.Module {
				if f.authn {
					return adminAuthn{f}
				}
				return f
			}})
			cfg, err := kernel.ParseConfig([]byte("modules: {auth: {use: fake}}\n"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.AdminListen = tc.addr
			_, err = kernel.New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), "{auth: {use: acl}}") {
				t.Fatalf("got %v, want the refusal saying what to do", err)
			}
		})
	}
	// No auth module at all counts as no authentication too.
	cfg := &kernel.Config{AdminListen: "0.0.0.0:0"}
	if _, err := kernel.New(cfg, kernel.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Fatal("no auth module, exposed admin listener: started")
	}
}

// testPKI is a CA with server and client certificates, made for one test.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate
	client func(t *testing.T, subject pkix.Name) tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca := tlstest.NewCA(t, "test CA")
	return &testPKI{
		pool:   ca.Pool(),
		server: ca.Server(t, "localhost").TLS(t),
		client: func(t *testing.T, subject pkix.Name) tls.Certificate { return ca.Client(t, subject).TLS(t) },
	}
}

func TestAdminAuthClientCertificate(t *testing.T) {
	f := newFakeAuth()
	const dn = "CN=carol,OU=eng,O=Acme"
	f.grants["User:"+dn] = []kernel.Operation{kernel.OpDescribe}
	k := adminKernel(t, f, "", nil)
	pki := newTestPKI(t)
	// The kernel's own admin handler (gate and mux) behind a TLS listener that verifies
	// client certificates when given, as the admin listener does when it serves TLS.
	srv := httptest.NewUnstartedServer(k.AdminHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool, Certificates: certs}}}
	}
	carol := pki.client(t, pkix.Name{CommonName: "carol", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme"}})
	resp, body := doAdmin(t, client(carol), srv.URL, adminReq{method: "GET", path: "/v1/whoami"})
	if resp.StatusCode != 200 || body != "User:"+dn+" true" {
		t.Fatalf("with a client certificate: %d %q", resp.StatusCode, body)
	}
	// The certificate grants Describe only.
	if resp, _ := doAdmin(t, client(carol), srv.URL, adminReq{method: "PUT", path: "/v1/thing"}); resp.StatusCode != 403 {
		t.Fatalf("PUT as %s: %d", dn, resp.StatusCode)
	}
	// Basic credentials win over the certificate; wrong ones are refused even with it.
	if resp, body := doAdmin(t, client(carol), srv.URL, adminReq{method: "GET", path: "/v1/whoami", user: "bob", pass: "bob-pw"}); resp.StatusCode != 200 || body != "User:bob true" {
		t.Fatalf("Basic over a certificate: %d %q", resp.StatusCode, body)
	}
	if resp, _ := doAdmin(t, client(carol), srv.URL, adminReq{method: "GET", path: "/v1/whoami", user: "bob", pass: "x"}); resp.StatusCode != 401 {
		t.Fatalf("wrong Basic with a certificate: %d", resp.StatusCode)
	}
	// TLS without a client certificate is not an identity.
	if resp, _ := doAdmin(t, client(), srv.URL, adminReq{method: "GET", path: "/v1/whoami"}); resp.StatusCode != 401 {
		t.Fatalf("TLS without a certificate: %d", resp.StatusCode)
	}
	// A certificate the server did not verify never reaches the gate.
	other := newTestPKI(t).client(t, pkix.Name{CommonName: "mallory"})
	req, _ := http.NewRequest("GET", srv.URL+"/v1/whoami", nil)
	if resp, err := client(other).Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a certificate from another CA was accepted: %d", resp.StatusCode)
	}
}
