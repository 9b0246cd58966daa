package kernel

// Authentication and authorization of the admin HTTP API.
//
// # The rule
//
// When the broker's auth module is an Authenticator (auth.acl is; auth.none is not),
// every admin request except GET/HEAD /healthz and /readyz (probes, which reveal
// nothing) authenticates, by either
//   - HTTP Basic, checked with Authenticator.CheckPassword (the same users as SASL); or
//   - a TLS client certificate the listener verified (r.TLS.VerifiedChains): the
//     principal is "User:" + the leaf's subject DN in RFC 2253 form (see certPrincipal
//     for the hook that maps it with ssl.principal.mapping.rules).
//
// Basic credentials, when present, win over a certificate (as SASL does on a SASL_SSL
// listener); wrong Basic credentials are a 401 even with a good certificate. No
// credentials, or wrong ones, are answered 401 with `WWW-Authenticate: Basic
// realm="sluice"` after connection.failed.authentication.delay.ms (default 100), with a
// rate-limited log line that never holds the password.
//
// Authorization then asks the broker's Authorizer with the principal and the client's
// IP address:
//
//	GET, HEAD                         Describe on the cluster (kafka-cluster)
//	POST, PUT, PATCH, DELETE, other   Alter on the cluster
//
// Super users pass (the Authorizer decides that). A denial is a 403. The principal
// reaches module handlers through AdminPrincipal.
//
// Without an Authenticator the API does not authenticate: the principal is ANONYMOUS
// and the Authorizer (AllowAll under auth.none) is still asked. New refuses such a
// broker unless admin_listen is a loopback address (checkAdminExposure).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/ratelog"
)

// AdminRealm is the realm of the admin API's Basic challenge.
const AdminRealm = "sluice"

// defaultAuthFailDelayMs is Kafka's default connection.failed.authentication.delay.ms.
const defaultAuthFailDelayMs = 100

// adminLogEvery bounds the admin API's failure log lines to one per interval (the
// lines in between are counted in the next one).
const adminLogEvery = 5 * time.Second

// errAdminExposed: the admin listener is reachable from outside and nothing
// authenticates its requests.
var errAdminExposed = errors.New("admin API exposed without authentication")

// checkAdminExposure refuses an admin listener on a non-loopback address when the auth
// module cannot authenticate admin requests, and checks the admin settings. It runs in
// New: the auth module's type is known once its section is decoded.
func (k *Kernel) checkAdminExposure() error {
	if _, err := authFailDelay(k.cfg); err != nil {
		return err
	}
	if _, ok := k.Module("auth").(Authenticator); ok {
		return nil
	}
	if isLoopbackAddr(k.cfg.AdminListen) {
		return nil
	}
	return fmt.Errorf("config: admin_listen %q is not a loopback address and the auth module does not authenticate, so anyone who reaches it could deploy code: %w; bind it to 127.0.0.1 (admin_listen: 127.0.0.1:9644) or configure authentication (modules: {auth: {use: acl}})",
		k.cfg.AdminListen, errAdminExposed)
}

// isLoopbackAddr reports whether a host:port listens on loopback only: a loopback IP
// literal or "localhost". An empty host (every interface) or any other name is not.
func isLoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authFailDelay reads connection.failed.authentication.delay.ms.
func authFailDelay(cfg *Config) (time.Duration, error) {
	ms, err := cfg.brokerInt("connection.failed.authentication.delay.ms", defaultAuthFailDelayMs)
	if err != nil {
		return 0, err
	}
	if ms < 0 || ms > 60_000 {
		return 0, fmt.Errorf("config: connection.failed.authentication.delay.ms %d out of range (0-60000)", ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// adminGate wraps the admin mux with authentication and authorization. Its fields are
// set before the admin server starts and read-only afterwards; the log limiters lock.
type adminGate struct {
	next  http.Handler
	authn Authenticator // nil: requests are not authenticated
	authz Authorizer
	delay time.Duration
	log   *slog.Logger
	// certPrincipal maps a verified client certificate to a principal.
	certPrincipal func(*x509.Certificate) (Principal, error)

	failLog, denyLog *ratelog.Limiter
}

// newAdminGate builds the gate for k's admin API (after the modules are provisioned,
// so k.authz is set).
func (k *Kernel) newAdminGate(next http.Handler) *adminGate {
	delay, _ := authFailDelay(k.cfg) // checked in New
	g := &adminGate{
		next:          next,
		authz:         k.authz,
		delay:         delay,
		log:           k.log.With("component", "admin"),
		certPrincipal: k.certificatePrincipal,
		failLog:       &ratelog.Limiter{N: 1, Every: adminLogEvery},
		denyLog:       &ratelog.Limiter{N: 1, Every: adminLogEvery},
	}
	if a, ok := k.Module("auth").(Authenticator); ok {
		g.authn = a
	}
	if g.authz == nil {
		g.authz = AllowAll{}
	}
	return g
}

// adminPrincipalKey is the request-context key of the admin principal.
type adminPrincipalKey struct{}

type adminIdentity struct {
	p             Principal
	authenticated bool
}

// AdminPrincipal is who an admin HTTP request acts as, for module handlers added with
// Context.HandleHTTP. ok is false when the request was not authenticated (the auth
// module is no Authenticator, or the path is a probe); the principal is then ANONYMOUS.
func AdminPrincipal(r *http.Request) (p Principal, ok bool) {
	id, found := r.Context().Value(adminPrincipalKey{}).(adminIdentity)
	if !found {
		return Anonymous, false
	}
	return id.p, id.authenticated
}

// adminOpenPath reports whether path is served without authentication: the probes.
func adminOpenPath(path string) bool { return path == "/healthz" || path == "/readyz" }

// adminOperation is the cluster operation a method needs: Describe to read, Alter for
// anything else.
func adminOperation(method string) Operation {
	switch method {
	case http.MethodGet, http.MethodHead:
		return OpDescribe
	}
	return OpAlter
}

func (g *adminGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if adminOpenPath(r.URL.Path) {
		g.next.ServeHTTP(w, r)
		return
	}
	host := remoteHost(r.RemoteAddr)
	id := adminIdentity{p: Anonymous}
	if g.authn != nil {
		p, reason, user := g.authenticate(r)
		if reason != "" {
			g.fail(w, r, host, reason, user)
			return
		}
		id = adminIdentity{p: p, authenticated: true}
	}
	op := adminOperation(r.Method)
	if !g.authz.Authorize(r.Context(), id.p, host, op, Resource{Type: ResCluster, Name: ClusterResourceName}) {
		g.deny(w, r, id.p, host, op)
		return
	}
	g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), adminPrincipalKey{}, id)))
}

// authenticate returns the request's principal, or a reason it has none (for the log)
// and the user name it claimed.
func (g *adminGate) authenticate(r *http.Request) (p Principal, reason, user string) {
	if _, hasAuth := r.Header["Authorization"]; hasAuth {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return Principal{}, "malformed Authorization header (want Basic)", ""
		}
		p, ok := g.authn.CheckPassword(r.Context(), user, pass)
		if !ok {
			return Principal{}, "wrong user name or password", user
		}
		return p, "", user
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		p, err := g.certPrincipal(r.TLS.VerifiedChains[0][0])
		if err != nil {
			return Principal{}, "client certificate: " + err.Error(), ""
		}
		return p, "", ""
	}
	return Principal{}, "no credentials", ""
}

// fail answers 401 after the failed-authentication delay.
func (g *adminGate) fail(w http.ResponseWriter, r *http.Request, host, reason, user string) {
	if ok, n := g.failLog.Allow(time.Now()); ok {
		g.log.Warn("admin API: authentication failed", "remote", host, "user", user, "reason", reason,
			"method", r.Method, "path", r.URL.Path, "suppressed", n)
	}
	if g.delay > 0 {
		t := time.NewTimer(g.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="`+AdminRealm+`"`)
	adminError(w, http.StatusUnauthorized, "authentication required: HTTP Basic (a broker user) or a client certificate")
}

// deny answers 403.
func (g *adminGate) deny(w http.ResponseWriter, r *http.Request, p Principal, host string, op Operation) {
	need := "Describe"
	if op == OpAlter {
		need = "Alter"
	}
	if ok, n := g.denyLog.Allow(time.Now()); ok {
		g.log.Info("admin API: request denied", "principal", p.String(), "remote", host,
			"method", r.Method, "path", r.URL.Path, "needs", need+" on cluster", "suppressed", n)
	}
	adminError(w, http.StatusForbidden, fmt.Sprintf("%s is not authorized: %s %s needs %s on the cluster (or a super user)", p, r.Method, r.URL.Path, need))
}

// adminError writes the admin API's JSON error shape, {"error": "..."}.
func adminError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// remoteHost is the IP address of an http.Request's RemoteAddr ("" when unknown).
func remoteHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return host
}

// adminTLSConfig is the admin listener's TLS configuration (admin_tls), nil for plain
// HTTP: the Kafka listeners' key and trust stores, reloaded the same way, asking for a
// client certificate even when ssl.client.auth is none, so a client may log in with
// HTTP Basic or with a certificate (the gate reads r.TLS.VerifiedChains); with
// ssl.client.auth=required a certificate is required here too.
func (k *Kernel) adminTLSConfig() *tls.Config {
	if !k.cfg.AdminTLS || k.tlsServer == nil {
		return nil
	}
	base := k.tlsServer
	return &tls.Config{
		MinVersion: base.MinVersion,
		MaxVersion: base.MaxVersion,
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := base.GetConfigForClient(h)
			if err != nil || c == nil {
				return c, err
			}
			if c.ClientAuth < tls.VerifyClientCertIfGiven {
				c = c.Clone()
				c.ClientAuth = tls.VerifyClientCertIfGiven
			}
			return c, nil
		},
	}
}
