package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// authAdmin is a fake admin API that checks HTTP Basic as the broker does: admin
// (password admin-secret) may do anything, reader (reader-pw) may only GET, anyone
// else gets 401 with the Basic challenge. A request with a verified client
// certificate whose CN is "admin" passes as admin.
type authAdmin struct {
	mu       sync.Mutex
	deployed []byte // the last PUT body
	deleted  string
	seen     []string // who made each request that passed
}

var adminUsers = map[string]string{"admin": "admin-secret", "reader": "reader-pw"}

func (a *authAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who := ""
	if u, p, ok := r.BasicAuth(); ok {
		if want, found := adminUsers[u]; found && subtle.ConstantTimeCompare([]byte(p), []byte(want)) == 1 {
			who = u
		}
	} else if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && r.TLS.VerifiedChains[0][0].Subject.CommonName == "admin" {
		who = "cert:admin"
	}
	if who == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="sluice"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"authentication required: HTTP Basic (a broker user) or a client certificate"}`))
		return
	}
	if who == "reader" && r.Method != http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":"User:reader is not authorized"}`))
		return
	}
	a.mu.Lock()
	a.seen = append(a.seen, who)
	a.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/transforms":
		_, _ = w.Write([]byte(`[{"name":"redact","input":"orders","mode":"inline","policy":"reject","state":"running"}]`))
	case r.Method == http.MethodGet && r.URL.Path == "/v1/plugins":
		_, _ = w.Write([]byte(`{"plugins":[{"name":"rack-aware","state":"running","pid":7}]}`))
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/transforms/"):
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.deployed = b
		a.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/transforms/"):
		a.mu.Lock()
		a.deleted = strings.TrimPrefix(r.URL.Path, "/v1/transforms/")
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (a *authAdmin) lastSeen() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return ""
	}
	return a.seen[len(a.seen)-1]
}

func serveAuthAdmin(t *testing.T) (*authAdmin, string) {
	a := &authAdmin{}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return a, strings.TrimPrefix(srv.URL, "http://")
}

func runCLI(args ...string) (rc int, stdout, stderr string) {
	var out, errb bytes.Buffer
	rc = run(args, &out, &errb)
	return rc, out.String(), errb.String()
}

func TestAdminCredentialsFromFlags(t *testing.T) {
	t.Setenv(envAdminUser, "")
	t.Setenv(envAdminPassword, "")
	a, admin := serveAuthAdmin(t)
	if rc, out, errs := runCLI("transform", "list", "--admin", admin, "--user", "admin", "--password", "admin-secret"); rc != 0 || !strings.Contains(out, "redact") {
		t.Fatalf("list: rc %d %q %q", rc, out, errs)
	}
	if a.lastSeen() != "admin" {
		t.Fatalf("server saw %q", a.lastSeen())
	}
	wasm := filepath.Join(t.TempDir(), "t.wasm")
	if err := os.WriteFile(wasm, []byte("\x00asm-module"), 0o600); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rc, out, errs := runCLI("transform", "deploy", "--admin", admin, "--user", "admin", "--password-file", pwFile,
		"--name", "redact", "--input", "orders", wasm); rc != 0 || !strings.Contains(out, "deployed redact") {
		t.Fatalf("deploy: rc %d %q %q", rc, out, errs)
	}
	a.mu.Lock()
	got := string(a.deployed)
	a.mu.Unlock()
	if got != "\x00asm-module" {
		t.Fatalf("deployed body %q", got)
	}
	if rc, _, errs := runCLI("transform", "delete", "--admin", "http://"+admin, "--user", "admin", "--password", "admin-secret", "redact"); rc != 0 {
		t.Fatalf("delete: rc %d %q", rc, errs)
	}
	a.mu.Lock()
	deleted := a.deleted
	a.mu.Unlock()
	if deleted != "redact" {
		t.Fatalf("deleted %q", deleted)
	}
	if rc, out, errs := runCLI("plugin", "list", "--admin", admin, "--user", "reader", "--password", "reader-pw"); rc != 0 || !strings.Contains(out, "rack-aware") {
		t.Fatalf("plugin list: rc %d %q %q", rc, out, errs)
	}
}

func TestAdminCredentialsFromEnvironment(t *testing.T) {
	a, admin := serveAuthAdmin(t)
	t.Setenv(envAdminUser, "reader")
	t.Setenv(envAdminPassword, "reader-pw")
	if rc, out, errs := runCLI("plugin", "list", "--admin", admin); rc != 0 || !strings.Contains(out, "rack-aware") {
		t.Fatalf("plugin list: rc %d %q %q", rc, out, errs)
	}
	if a.lastSeen() != "reader" {
		t.Fatalf("server saw %q", a.lastSeen())
	}
	// Flags win over the environment.
	if rc, _, errs := runCLI("transform", "list", "--admin", admin, "--user", "admin", "--password", "admin-secret"); rc != 0 || a.lastSeen() != "admin" {
		t.Fatalf("flags over env: rc %d, seen %q, %q", rc, a.lastSeen(), errs)
	}
	// A password from the environment with the user from a flag.
	t.Setenv(envAdminPassword, "admin-secret")
	if rc, _, errs := runCLI("transform", "list", "--admin", admin, "--user", "admin"); rc != 0 || a.lastSeen() != "admin" {
		t.Fatalf("user flag, password env: rc %d, seen %q, %q", rc, a.lastSeen(), errs)
	}
}

func TestAdminRefusalMessages(t *testing.T) {
	t.Setenv(envAdminUser, "")
	t.Setenv(envAdminPassword, "")
	_, admin := serveAuthAdmin(t)
	for _, tc := range []struct {
		name string
		args []string
		rc   int
		want string
	}{
		{"no credentials", []string{"transform", "list", "--admin", admin}, 1, "needs credentials (HTTP 401): give --user and --password"},
		{"wrong password", []string{"plugin", "list", "--admin", admin, "--user", "admin", "--password", "nope"}, 1, "refused the credentials of user admin (HTTP 401)"},
		{"denied", []string{"transform", "delete", "--admin", admin, "--user", "reader", "--password", "reader-pw", "x"}, 1,
			"user reader may not DELETE /v1/transforms/x (HTTP 403): it needs Alter on the cluster"},
		{"password without user", []string{"transform", "list", "--admin", admin, "--password", "x"}, 2, "without a user"},
		{"user without password", []string{"transform", "list", "--admin", admin, "--user", "admin"}, 2, "without a password"},
		{"both password flags", []string{"transform", "list", "--admin", admin, "--user", "a", "--password", "x", "--password-file", "f"}, 2, "not both"},
		{"TLS flags on http", []string{"plugin", "list", "--admin", admin, "--ca-file", "ca.pem"}, 2, "need an https:// admin address"},
		{"cert without key", []string{"plugin", "list", "--admin", "https://" + admin, "--cert", "c.pem"}, 2, "--tls-cert and --tls-key go together"},
		{"bad scheme", []string{"plugin", "list", "--admin", "ftp://" + admin}, 2, "want HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, errs := runCLI(tc.args...)
			if rc != tc.rc || !strings.Contains(errs, tc.want) {
				t.Fatalf("rc %d, stderr %q; want rc %d and %q", rc, errs, tc.rc, tc.want)
			}
			if strings.Contains(errs, `{"error"`) {
				t.Fatalf("raw body printed: %q", errs)
			}
		})
	}
}

// writePKI writes a CA (ca.pem), a server certificate for 127.0.0.1 with its key
// (server.pem, a broker's PEM keystore) and a client certificate with CN "admin"
// (client.pem, client.key) into dir, and returns the server's TLS certificate and the
// CA pool.
func writePKI(t *testing.T, dir string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cli test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	writePEM := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writePEM("ca.pem", "CERTIFICATE", caDER)
	issue := func(serial int64, tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = big.NewInt(serial), now.Add(-time.Hour), now.Add(time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := issue(2, &x509.Certificate{Subject: pkix.Name{CommonName: "broker"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	cliDER, cliKey := issue(3, &x509.Certificate{Subject: pkix.Name{CommonName: "admin"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	writePEM("client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalPKCS8PrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM("client.key", "PRIVATE KEY", keyDER)
	srvKeyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	keystore := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: srvKeyDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})...)
	if err := os.WriteFile(filepath.Join(dir, "server.pem"), keystore, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}, pool
}

func TestAdminHTTPSAndClientCertificate(t *testing.T) {
	t.Setenv(envAdminUser, "")
	t.Setenv(envAdminPassword, "")
	dir := t.TempDir()
	srvCert, pool := writePKI(t, dir)
	a := &authAdmin{}
	srv := httptest.NewUnstartedServer(a)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(dir, "ca.pem")
	// mTLS: the certificate is the identity.
	if rc, out, errs := runCLI("transform", "list", "--admin", srv.URL, "--ca-file", ca,
		"--cert", filepath.Join(dir, "client.pem"), "--key", filepath.Join(dir, "client.key")); rc != 0 || !strings.Contains(out, "redact") {
		t.Fatalf("mTLS: rc %d %q %q", rc, out, errs)
	}
	if a.lastSeen() != "cert:admin" {
		t.Fatalf("server saw %q", a.lastSeen())
	}
	// https with Basic.
	if rc, _, errs := runCLI("plugin", "list", "--admin", srv.URL, "--ca-file", ca, "--user", "reader", "--password", "reader-pw"); rc != 0 || a.lastSeen() != "reader" {
		t.Fatalf("https + Basic: rc %d, seen %q, %q", rc, a.lastSeen(), errs)
	}
	// Without --ca-file the broker's certificate is not trusted.
	if rc, _, errs := runCLI("plugin", "list", "--admin", srv.URL, "--user", "reader", "--password", "reader-pw"); rc != 1 || !strings.Contains(errs, "certificate") {
		t.Fatalf("untrusted server: rc %d %q", rc, errs)
	}
}
