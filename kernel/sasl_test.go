package kernel_test

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/kernel"
)

// fakeAuth is a test auth module: PLAIN, and TWO-STEP, a made-up two-round mechanism
// ("hello <user>" → "nonce <n>" → "proof <n>:<password>" → done), against a fixed set of
// users. ExpiryMs gives each credential an expiry (an OAUTHBEARER token's exp).
type fakeAuth struct {
	ExpiryMs int `yaml:"expiry_ms"`
	users    map[string]string
	starts   atomic.Int64
	done     atomic.Int64
}

func (a *fakeAuth) Mechanisms() []string { return []string{"PLAIN", "TWO-STEP"} }

func (a *fakeAuth) StartSASL(mech string, _ *kernel.ConnInfo) (kernel.SASLExchange, error) {
	a.starts.Add(1)
	switch mech {
	case "PLAIN":
		return &plainExchange{a: a}, nil
	case "TWO-STEP":
		return &twoStepExchange{a: a}, nil
	}
	return nil, fmt.Errorf("mechanism %s not enabled", mech)
}

func (a *fakeAuth) CheckPassword(_ context.Context, user, pw string) (kernel.Principal, bool) {
	if a.check(user, pw) {
		return kernel.Principal{Type: "User", Name: user}, true
	}
	return kernel.Principal{}, false
}

func (a *fakeAuth) check(user, pw string) bool {
	want, ok := a.users[user]
	return subtle.ConstantTimeCompare([]byte(want), []byte(pw)) == 1 && ok
}

func (a *fakeAuth) expiry() time.Time {
	if a.ExpiryMs == 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(a.ExpiryMs) * time.Millisecond)
}

type plainExchange struct {
	a    *fakeAuth
	user string
	exp  time.Time
}

func (e *plainExchange) Step(_ context.Context, msg []byte) ([]byte, bool, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 || !e.a.check(string(parts[1]), string(parts[2])) {
		return nil, false, errors.New("invalid credentials")
	}
	e.user, e.exp = string(parts[1]), e.a.expiry()
	e.a.done.Add(1)
	return nil, true, nil
}
func (e *plainExchange) Principal() kernel.Principal {
	return kernel.Principal{Type: "User", Name: e.user}
}
func (e *plainExchange) Expiry() time.Time { return e.exp }

type twoStepExchange struct {
	a     *fakeAuth
	step  int
	user  string
	nonce string
}

func (e *twoStepExchange) Step(_ context.Context, msg []byte) ([]byte, bool, error) {
	e.step++
	switch e.step {
	case 1:
		user, ok := strings.CutPrefix(string(msg), "hello ")
		if !ok {
			return nil, false, errors.New("expected hello")
		}
		e.user, e.nonce = user, fmt.Sprintf("n%d", time.Now().UnixNano())
		return []byte("nonce " + e.nonce), false, nil
	case 2:
		proof, ok := strings.CutPrefix(string(msg), "proof "+e.nonce+":")
		if !ok || !e.a.check(e.user, proof) {
			return nil, false, errors.New("invalid credentials")
		}
		e.a.done.Add(1)
		return []byte("welcome"), true, nil
	}
	return nil, false, errors.New("too many steps")
}
func (e *twoStepExchange) Principal() kernel.Principal {
	return kernel.Principal{Type: "User", Name: e.user}
}
func (e *twoStepExchange) Expiry() time.Time { return time.Time{} }

var _ kernel.Authenticator = (*fakeAuth)(nil)

// twoStep is TWO-STEP for kgo.
type twoStep struct{ user, pass string }

func (m twoStep) Name() string { return "TWO-STEP" }
func (m twoStep) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	return &twoStepSession{m: m}, []byte("hello " + m.user), nil
}

type twoStepSession struct {
	m    twoStep
	done bool
}

func (s *twoStepSession) Challenge(b []byte) (bool, []byte, error) {
	if s.done {
		if string(b) != "welcome" {
			return false, nil, fmt.Errorf("server final %q", b)
		}
		return true, nil, nil
	}
	nonce, ok := strings.CutPrefix(string(b), "nonce ")
	if !ok {
		return false, nil, fmt.Errorf("challenge %q", b)
	}
	s.done = true
	return false, []byte("proof " + nonce + ":" + s.m.pass), nil
}

// saslRegistry registers the whoami module and the fake auth module (as auth.fake); the
// fake is returned once the kernel made it.
func saslRegistry(fa **fakeAuth) *kernel.Registry {
	reg := whoamiRegistry()
	reg.Register(kernel.ModuleInfo{ID: "auth.fake", New: func() kernel.Module {
		*fa = &fakeAuth{users: map[string]string{"alice": "alice-secret", "bob": "bob-secret"}}
		return *fa
	}})
	return reg
}

const saslYAML = "modules: {who: {use: ami}, auth: {use: fake}}\n"

func plainMech(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}

func TestSASLPlain(t *testing.T) {
	var fa *fakeAuth
	p := newPKI(t)
	yaml := strings.Replace(p.yaml("ssl.client.auth: requested"), "modules: {who: {use: ami}}", strings.TrimSpace(saslYAML), 1)
	b := startSecure(t, saslRegistry(&fa), yaml, "SASL_PLAINTEXT", "SASL_SSL", "PLAINTEXT")

	who, msg, err := whoami(t, b.addr(t, "SASL_PLAINTEXT"), plainMech("alice", "alice-secret"))
	if err != nil || who != "User:alice" || msg != "SASL_PLAINTEXT" {
		t.Fatalf("SASL_PLAINTEXT: %q %q %v", who, msg, err)
	}
	who, msg, err = whoami(t, b.addr(t, "SASL_SSL"), plainMech("bob", "bob-secret"), kgo.DialTLSConfig(p.clientTLS(t, nil)))
	if err != nil || who != "User:bob" || msg != "SASL_SSL tls" {
		t.Fatalf("SASL_SSL: %q %q %v", who, msg, err)
	}
	// On SASL_SSL the principal is SASL's, even with a verified client certificate.
	carol := p.ca.Client(t, pkix.Name{CommonName: "carol"})
	who, msg, err = whoami(t, b.addr(t, "SASL_SSL"), plainMech("alice", "alice-secret"), kgo.DialTLSConfig(p.clientTLS(t, carol)))
	if err != nil || who != "User:alice" || msg != "SASL_SSL tls" {
		t.Fatalf("SASL_SSL with a client certificate: %q %q %v", who, msg, err)
	}
	who, _, err = whoami(t, b.addr(t, "SASL_PLAINTEXT"), kgo.SASL(twoStep{"bob", "bob-secret"}.AsMech()))
	if err != nil || who != "User:bob" {
		t.Fatalf("two-step: %q %v", who, err)
	}
	// The plaintext listener stays anonymous.
	if who, _, err = whoami(t, b.addr(t, "PLAINTEXT")); err != nil || who != "User:ANONYMOUS" {
		t.Fatalf("PLAINTEXT: %q %v", who, err)
	}

	start := time.Now()
	_, _, err = whoami(t, b.addr(t, "SASL_PLAINTEXT"), plainMech("alice", "wrong"))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid credentials") {
		t.Fatalf("wrong password: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("failure answered after %v, before connection.failed.authentication.delay.ms", d)
	}
	_, _, err = whoami(t, b.addr(t, "SASL_PLAINTEXT"), kgo.SASL(twoStep{"alice", "nope"}.AsMech()))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("two-step wrong password: %v", err)
	}
	metrics := scrape(t, b.k)
	for _, want := range []string{`sluice_sasl_authentications_total{result="success"} 4`, `sluice_sasl_authentications_total{result="failure"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// AsMech adapts the test mechanism (a value type) to sasl.Mechanism.
func (m twoStep) AsMech() sasl.Mechanism { return m }

func scrape(t *testing.T, k *kernel.Kernel) string {
	t.Helper()
	// The fake auth module authenticates the admin API too (HTTP Basic).
	req, err := http.NewRequest(http.MethodGet, "http://"+k.AdminAddr().String()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("alice", "alice-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return buf.String()
}

func TestSASLClaimsAndStartErrors(t *testing.T) {
	var fa *fakeAuth
	b := startSecure(t, saslRegistry(&fa), saslYAML, "SASL_PLAINTEXT")
	var got []string
	for _, c := range b.k.Claims() {
		if c.Key == kmsg.SASLHandshake || c.Key == kmsg.SASLAuthenticate {
			got = append(got, fmt.Sprintf("%s v%d-%d %s", c.Key.Name(), c.Min, c.Max, c.Owner))
		}
	}
	if want := []string{"SASLHandshake v0-1 kernel", "SASLAuthenticate v0-2 kernel"}; !slices.Equal(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	// Without an Authenticator nothing is claimed, and a SASL listener cannot start.
	plainK := startSecure(t, whoamiRegistry(), "modules: {who: {use: ami}}\n", "PLAINTEXT")
	for _, c := range plainK.k.Claims() {
		if c.Key == kmsg.SASLHandshake || c.Key == kmsg.SASLAuthenticate {
			t.Fatalf("claimed %s without an authenticator", c.Key.Name())
		}
	}
	k, _, err := buildSecure(t, whoamiRegistry(), "modules: {who: {use: ami}}\n", "PLAINTEXT", "SASL_PLAINTEXT")
	if err != nil {
		t.Fatal(err)
	}
	err = k.Start(context.Background())
	defer k.Shutdown(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listener SASL_PLAINTEXT (SASL_PLAINTEXT) needs SASL mechanisms") {
		t.Fatalf("start: %v", err)
	}
}

// saslConn is a raw connection to a SASL listener.
func rawDial(t *testing.T, addr string) *rawConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc}
}

func (c *rawConn) handshake(v int16, mech string, corr int32) *kmsg.SASLHandshakeResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = mech
	c.send(req, v, corr)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	if got := c.recvAs(resp, v); got != corr {
		c.t.Fatalf("correlation %d", got)
	}
	return resp
}

func (c *rawConn) authenticate(v int16, auth []byte, corr int32) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = auth
	c.send(req, v, corr)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	corrGot, body, err := c.recv()
	if err != nil {
		c.t.Fatal(err)
	}
	if v >= 2 {
		body = body[1:] // flexible response header: empty tags
	}
	resp.SetVersion(v)
	if err := resp.ReadFrom(body); err != nil || corrGot != corr {
		c.t.Fatalf("SaslAuthenticate response: %v (correlation %d)", err, corrGot)
	}
	return resp
}

// describe sends DescribeCluster v0 and returns the principal it reports.
func (c *rawConn) describe(corr int32) string {
	c.t.Helper()
	c.send(kmsg.NewPtrDescribeClusterRequest(), 0, corr)
	resp := kmsg.NewPtrDescribeClusterResponse()
	got, body, err := c.recv()
	if err != nil || got != corr || len(body) == 0 {
		c.t.Fatalf("DescribeCluster: %v (correlation %d)", err, got)
	}
	resp.SetVersion(0)
	if err := resp.ReadFrom(body[1:]); err != nil { // body[0]: the flexible header's tags
		c.t.Fatal(err)
	}
	return resp.ClusterID
}

// rawToken writes a v0 raw SASL token and reads the raw reply.
func (c *rawConn) rawToken(tok []byte) ([]byte, error) {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(tok)))
	c.writeRaw(append(b, tok...))
	var sz [4]byte
	if _, err := ioReadFull(c.nc, sz[:]); err != nil {
		return nil, err
	}
	out := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err := ioReadFull(c.nc, out)
	return out, err
}

func TestSASLRawWire(t *testing.T) {
	var fa *fakeAuth
	b := startSecure(t, saslRegistry(&fa), saslYAML, "SASL_PLAINTEXT", "PLAINTEXT")
	addr := b.addr(t, "SASL_PLAINTEXT")

	t.Run("request before authentication closes", func(t *testing.T) {
		c := rawDial(t, addr)
		// ApiVersions is allowed first...
		c.send(kmsg.NewPtrApiVersionsRequest(), 0, 1)
		c.recvAs(kmsg.NewPtrApiVersionsResponse(), 0)
		// ...anything else closes.
		c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 2)
		c.expectClosed()
	})
	t.Run("SaslAuthenticate before SaslHandshake closes", func(t *testing.T) {
		c := rawDial(t, addr)
		c.send(kmsg.NewPtrSASLAuthenticateRequest(), 1, 1)
		c.expectClosed()
	})
	t.Run("oversized frame before authentication closes", func(t *testing.T) {
		c := rawDial(t, addr)
		// 1 MiB: under socket.request.max.bytes, over sasl.server.max.receive.size.
		c.writeRaw(binary.BigEndian.AppendUint32(nil, 1<<20))
		c.writeRaw(make([]byte, 64<<10))
		c.expectClosed()
		waitFor(t, 5*time.Second, func() bool { return strings.Contains(b.logs.String(), "sasl.server.max.receive.size 524288") })
	})
	t.Run("unsupported mechanism", func(t *testing.T) {
		c := rawDial(t, addr)
		resp := c.handshake(1, "GSSAPI", 1)
		if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(resp.SupportedMechanisms, []string{"PLAIN", "TWO-STEP"}) {
			t.Fatalf("%+v", resp)
		}
		c.expectClosed()
	})
	t.Run("handshake on a plaintext listener", func(t *testing.T) {
		c := rawDial(t, b.addr(t, "PLAINTEXT"))
		if resp := c.handshake(1, "PLAIN", 1); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("error %d", resp.ErrorCode)
		}
		if who := c.describe(2); who != "User:ANONYMOUS" {
			t.Fatalf("principal %q", who)
		}
	})
	t.Run("v1 handshake then SaslAuthenticate v0, v1, v2", func(t *testing.T) {
		for v := int16(0); v <= 2; v++ {
			c := rawDial(t, addr)
			if resp := c.handshake(1, "PLAIN", 1); resp.ErrorCode != 0 {
				t.Fatalf("handshake %d", resp.ErrorCode)
			}
			if resp := c.authenticate(v, []byte("\x00alice\x00alice-secret"), 2); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 0 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			if who := c.describe(3); who != "User:alice" {
				t.Fatalf("principal %q", who)
			}
			// Authenticated, frames are bounded by socket.request.max.bytes again.
			big := kmsg.NewPtrApiVersionsRequest()
			big.ClientSoftwareName, big.ClientSoftwareVersion = strings.Repeat("a", 600<<10), "1"
			c.send(big, 3, 4)
			if corr, _, err := c.recv(); err != nil || corr != 4 {
				t.Fatalf("600 KiB request after authentication: %v", err)
			}
		}
	})
	t.Run("v0 raw tokens, PLAIN", func(t *testing.T) {
		c := rawDial(t, addr)
		if resp := c.handshake(0, "PLAIN", 1); resp.ErrorCode != 0 {
			t.Fatalf("handshake %d", resp.ErrorCode)
		}
		reply, err := c.rawToken([]byte("\x00alice\x00alice-secret"))
		if err != nil || len(reply) != 0 {
			t.Fatalf("raw reply %q %v", reply, err)
		}
		if who := c.describe(2); who != "User:alice" {
			t.Fatalf("principal %q", who)
		}
	})
	t.Run("v0 raw tokens, two rounds", func(t *testing.T) {
		c := rawDial(t, addr)
		c.handshake(0, "TWO-STEP", 1)
		reply, err := c.rawToken([]byte("hello bob"))
		nonce, ok := strings.CutPrefix(string(reply), "nonce ")
		if err != nil || !ok {
			t.Fatalf("first reply %q %v", reply, err)
		}
		if reply, err = c.rawToken([]byte("proof " + nonce + ":bob-secret")); err != nil || string(reply) != "welcome" {
			t.Fatalf("final reply %q %v", reply, err)
		}
		if who := c.describe(2); who != "User:bob" {
			t.Fatalf("principal %q", who)
		}
	})
	t.Run("second handshake before authenticating closes", func(t *testing.T) {
		c := rawDial(t, addr)
		c.handshake(1, "PLAIN", 1)
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Mechanism = "PLAIN"
		c.send(req, 1, 2)
		c.expectClosed()
	})
	t.Run("re-authentication needs v1 and the same mechanism", func(t *testing.T) {
		for _, tc := range []struct {
			name        string
			v0          bool
			again, mech string
		}{
			{"after v0", true, "PLAIN", "PLAIN"},
			{"other mechanism", false, "PLAIN", "TWO-STEP"},
		} {
			c := rawDial(t, addr)
			if tc.v0 {
				c.handshake(0, tc.again, 1)
				if _, err := c.rawToken([]byte("\x00alice\x00alice-secret")); err != nil {
					t.Fatal(err)
				}
			} else {
				c.handshake(1, tc.again, 1)
				c.authenticate(1, []byte("\x00alice\x00alice-secret"), 2)
			}
			if resp := c.handshake(1, tc.mech, 3); resp.ErrorCode != kerr.IllegalSaslState.Code {
				t.Fatalf("%s: error %d", tc.name, resp.ErrorCode)
			}
			c.expectClosed()
		}
	})
	t.Run("v0 raw token failure closes", func(t *testing.T) {
		c := rawDial(t, addr)
		c.handshake(0, "PLAIN", 1)
		if reply, err := c.rawToken([]byte("\x00alice\x00nope")); err == nil {
			t.Fatalf("answered %q", reply)
		}
	})
}

func TestSASLReauthentication(t *testing.T) {
	var fa *fakeAuth
	b := startSecure(t, saslRegistry(&fa), saslYAML+"configs: {connections.max.reauth.ms: \"1500\"}\n", "SASL_PLAINTEXT")
	addr := b.addr(t, "SASL_PLAINTEXT")

	t.Run("franz-go re-authenticates past the lifetime", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), plainMech("alice", "alice-secret"), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		before := fa.done.Load()
		end := time.Now().Add(3 * time.Second)
		for n := 0; time.Now().Before(end); n++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
			cancel()
			if err != nil || resp.ClusterID != "User:alice" {
				t.Fatalf("request %d: %v", n, err)
			}
			time.Sleep(50 * time.Millisecond) // pacing the requests, not synchronisation
		}
		// 3 s at a 1.5 s lifetime (franz-go renews 1 s early): at least 3 logins.
		if got := fa.done.Load() - before; got < 3 {
			t.Fatalf("%d authentications in 3 s", got)
		}
	})
	t.Run("lifetime is announced and enforced", func(t *testing.T) {
		c := rawDial(t, addr)
		c.handshake(1, "PLAIN", 1)
		resp := c.authenticate(1, []byte("\x00alice\x00alice-secret"), 2)
		if resp.ErrorCode != 0 || resp.SessionLifetimeMillis < 1000 || resp.SessionLifetimeMillis > 1500 {
			t.Fatalf("%+v", resp)
		}
		if who := c.describe(3); who != "User:alice" {
			t.Fatal(who)
		}
		time.Sleep(time.Until(time.Now().Add(time.Duration(resp.SessionLifetimeMillis+100) * time.Millisecond))) // past the session's end
		c.send(kmsg.NewPtrDescribeClusterRequest(), 0, 4)
		c.expectClosed()
	})
	t.Run("re-authentication keeps the connection and the principal", func(t *testing.T) {
		c := rawDial(t, addr)
		c.handshake(1, "PLAIN", 1)
		c.authenticate(1, []byte("\x00alice\x00alice-secret"), 2)
		if resp := c.handshake(1, "PLAIN", 3); resp.ErrorCode != 0 {
			t.Fatalf("re-handshake %d", resp.ErrorCode)
		}
		if resp := c.authenticate(2, []byte("\x00alice\x00alice-secret"), 4); resp.ErrorCode != 0 || resp.SessionLifetimeMillis == 0 {
			t.Fatalf("reauth %+v", resp)
		}
		if who := c.describe(5); who != "User:alice" {
			t.Fatal(who)
		}
		// As someone else: refused, and closed.
		c.handshake(1, "PLAIN", 6)
		resp := c.authenticate(1, []byte("\x00bob\x00bob-secret"), 7)
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "may not change the principal") {
			t.Fatalf("principal change: %+v", resp)
		}
		c.expectClosed()
	})
}

// The credential's own expiry shortens the session below connections.max.reauth.ms.
func TestSASLCredentialExpiry(t *testing.T) {
	var fa *fakeAuth
	b := startSecure(t, saslRegistry(&fa), "modules: {who: {use: ami}, auth: {use: fake, expiry_ms: 700}}\nconfigs: {connections.max.reauth.ms: \"60000\"}\n", "SASL_PLAINTEXT")
	c := rawDial(t, b.addr(t, "SASL_PLAINTEXT"))
	c.handshake(1, "PLAIN", 1)
	resp := c.authenticate(1, []byte("\x00alice\x00alice-secret"), 2)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 0 || resp.SessionLifetimeMillis > 700 {
		t.Fatalf("%+v", resp)
	}
}

func ioReadFull(nc net.Conn, b []byte) (int, error) { return io.ReadFull(nc, b) }
