package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/sluicehq/sluice/kernel"
)

// lockedBuffer collects log output across goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// signingKey is a private key with its kid and algorithm.
type signingKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newRSAKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) signingKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: alg, key: k}
}

func newECKey(t testing.TB, kid string, curve elliptic.Curve, alg jose.SignatureAlgorithm) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: alg, key: k}
}

func newEdKey(t testing.TB, kid string) signingKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jose.EdDSA, key: k}
}

// sign makes a compact JWS of claims; kid "" leaves the header's kid out.
func (k signingKey) sign(t testing.TB, kid string, claims any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// writeJWKS writes the public halves of keys as a JWK Set and gives the file an mtime
// of its own, so a rewrite within one timestamp tick is still seen as a change.
func writeJWKS(t testing.TB, path string, keys ...signingKey) {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	writeFileNewMtime(t, path, data)
}

// writeFileNewMtime writes data with an mtime past the file's previous one.
func writeFileNewMtime(t testing.TB, path string, data []byte) {
	t.Helper()
	mt := time.Now()
	if fi, err := os.Stat(path); err == nil && !mt.After(fi.ModTime()) {
		mt = fi.ModTime().Add(time.Second)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// oauthFixture is an auth module with only OAUTHBEARER provisioned, a clock the test
// moves, and the logs it wrote.
type oauthFixture struct {
	m     *Module
	jwks  string
	logs  *lockedBuffer
	clock struct {
		sync.Mutex
		off time.Duration
	}
}

func (f *oauthFixture) advance(d time.Duration) {
	f.clock.Lock()
	f.clock.off += d
	f.clock.Unlock()
}

func (f *oauthFixture) now() time.Time {
	f.clock.Lock()
	defer f.clock.Unlock()
	return time.Now().Add(f.clock.off)
}

func newOAuthFixture(t testing.TB, cfg map[string]string, keys ...signingKey) *oauthFixture {
	t.Helper()
	f, err := tryOAuthFixture(t, cfg, keys...)
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	return f
}

func tryOAuthFixture(t testing.TB, cfg map[string]string, keys ...signingKey) (*oauthFixture, error) {
	t.Helper()
	f := &oauthFixture{jwks: filepath.Join(t.TempDir(), "jwks.json"), logs: new(lockedBuffer)}
	if len(keys) > 0 {
		writeJWKS(t, f.jwks, keys...)
	}
	all := map[string]string{cfgJWKSURL: "file://" + f.jwks}
	for k, v := range cfg {
		all[k] = v
	}
	f.m = &Module{
		log:    slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		broker: kernel.BrokerInfo{StaticConfigs: all},
		mechs:  []string{MechOAuthBearer},
	}
	f.m.oauth.now = f.now
	return f, f.m.oauth.provision(f.m, nil)
}

// login drives one exchange with franz-go's OAUTHBEARER client mechanism: its first
// message goes to the broker's exchange, and the broker's reply back to the client.
func (f *oauthFixture) login(t *testing.T, auth oauth.Auth) (kernel.SASLExchange, error) {
	t.Helper()
	ctx := context.Background()
	sess, first, err := auth.AsMechanism().Authenticate(ctx, "127.0.0.1:9092")
	if err != nil {
		t.Fatalf("client Authenticate: %v", err)
	}
	conn := &kernel.ConnInfo{ID: 1, Listener: "SASL_PLAINTEXT", Protocol: "SASL_PLAINTEXT", Remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}}
	x, err := f.m.StartSASL(MechOAuthBearer, conn)
	if err != nil {
		t.Fatalf("StartSASL: %v", err)
	}
	reply, done, err := x.Step(ctx, first)
	if err != nil {
		if done {
			t.Fatal("Step returned done with an error")
		}
		if strings.Contains(err.Error(), auth.Token) {
			t.Fatalf("the error quotes the token: %v", err)
		}
		return x, err
	}
	if !done {
		t.Fatalf("Step did not finish the exchange in one message (reply %q)", reply)
	}
	cdone, cmsg, err := sess.Challenge(reply)
	if err != nil || !cdone || len(cmsg) != 0 {
		t.Fatalf("client on the server's final message: done %v, msg %q, err %v", cdone, cmsg, err)
	}
	return x, nil
}

// claims builds a claim set valid now for an hour.
func claims(sub string, now time.Time) map[string]any {
	c := map[string]any{
		"iss": "https://idp.example",
		"aud": []string{"kafka"},
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	if sub != "" {
		c["sub"] = sub
	}
	return c
}

var oauthCfg = map[string]string{
	cfgIssuer:   "https://idp.example",
	cfgAudience: "other, kafka",
}

func TestOAuthBearerValidTokens(t *testing.T) {
	rs := newRSAKey(t, "rsa-1", jose.RS256)
	ps := newRSAKey(t, "rsa-ps", jose.PS512)
	ec := newECKey(t, "ec-1", elliptic.P256(), jose.ES256)
	ec384 := newECKey(t, "ec-384", elliptic.P384(), jose.ES384)
	ed := newEdKey(t, "ed-1")
	f := newOAuthFixture(t, oauthCfg, rs, ps, ec, ec384, ed)
	for _, k := range []signingKey{rs, ps, ec, ec384, ed} {
		t.Run(string(k.alg), func(t *testing.T) {
			now := f.now()
			c := claims("alice", now)
			c["scope"] = "read write"
			tok := k.sign(t, k.kid, c)
			x, err := f.login(t, oauth.Auth{Token: tok, Extensions: map[string]string{"traceId": "abc 123"}})
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if p := x.Principal(); p != (kernel.Principal{Type: "User", Name: "alice"}) {
				t.Fatalf("principal %v", p)
			}
			if got, want := x.Expiry(), time.Unix(now.Add(time.Hour).Unix(), 0); !got.Equal(want) {
				t.Fatalf("expiry %v, want %v", got, want)
			}
			if s := x.(*oauthExchange).scopes; strings.Join(s, ",") != "read,write" {
				t.Fatalf("scopes %q", s)
			}
			// The exchange is over: a second message is refused.
			if _, _, err := x.Step(context.Background(), []byte{1}); !errors.Is(err, errOAuthExchangeOver) {
				t.Fatalf("second Step: %v", err)
			}
		})
	}
}

func TestOAuthBearerAuthzidAndSkew(t *testing.T) {
	rs := newRSAKey(t, "rsa-1", jose.RS256)
	f := newOAuthFixture(t, map[string]string{cfgClockSkew: "60"}, rs)
	now := f.now()

	x, err := f.login(t, oauth.Auth{Zid: "alice", Token: rs.sign(t, "rsa-1", claims("alice", now))})
	if err != nil || x.Principal().Name != "alice" {
		t.Fatalf("authzid = sub: %v %v", x.Principal(), err)
	}
	if _, err := f.login(t, oauth.Auth{Zid: "bob", Token: rs.sign(t, "rsa-1", claims("alice", now))}); err == nil {
		t.Fatal("authzid bob with a token for alice was accepted")
	}
	// Within the skew: expired 30s ago, not before 30s from now, issued 30s ahead.
	c := claims("alice", now)
	c["exp"] = now.Add(-30 * time.Second).Unix()
	if _, err := f.login(t, oauth.Auth{Token: rs.sign(t, "rsa-1", c)}); err != nil {
		t.Fatalf("exp within the skew refused: %v", err)
	}
	c = claims("alice", now)
	c["nbf"] = now.Add(30 * time.Second).Unix()
	c["iat"] = now.Add(30 * time.Second).Unix()
	if _, err := f.login(t, oauth.Auth{Token: rs.sign(t, "rsa-1", c)}); err != nil {
		t.Fatalf("nbf/iat within the skew refused: %v", err)
	}
	// No iss/aud configured: any accepted. A custom sub claim names the principal.
	c = claims("alice", now)
	delete(c, "iss")
	delete(c, "aud")
	if _, err := f.login(t, oauth.Auth{Token: rs.sign(t, "rsa-1", c)}); err != nil {
		t.Fatalf("no iss/aud: %v", err)
	}
	// The only key is used when the token has no kid.
	if _, err := f.login(t, oauth.Auth{Token: rs.sign(t, "", claims("alice", now))}); err != nil {
		t.Fatalf("no kid, one key: %v", err)
	}

	g := newOAuthFixture(t, map[string]string{cfgSubClaim: "client_id", cfgScopeClaim: "scp"}, rs)
	c = claims("", now)
	c["client_id"] = "svc-orders"
	c["scp"] = []string{"a", "b"}
	x, err = g.login(t, oauth.Auth{Token: rs.sign(t, "rsa-1", c)})
	if err != nil || x.Principal().Name != "svc-orders" {
		t.Fatalf("custom sub claim: %v %v", x.Principal(), err)
	}
	if s := x.(*oauthExchange).scopes; strings.Join(s, ",") != "a,b" {
		t.Fatalf("scopes %q", s)
	}
}

// hs256 signs claims with HMAC-SHA256 keyed by secret.
func hs256(t *testing.T, secret []byte, kid string, claims any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestOAuthBearerRefusedTokens(t *testing.T) {
	rs := newRSAKey(t, "rsa-1", jose.RS256)
	ec := newECKey(t, "ec-1", elliptic.P256(), jose.ES256)
	stranger := newRSAKey(t, "rsa-1", jose.RS256) // same kid, another key
	f := newOAuthFixture(t, map[string]string{cfgIssuer: "https://idp.example", cfgAudience: "kafka", cfgClockSkew: "30"}, rs, ec)
	now := f.now()
	with := func(edit func(map[string]any)) map[string]any {
		c := claims("alice", now)
		edit(c)
		return c
	}
	pubDER, err := x509.MarshalPKIXPublicKey(rs.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	valid := rs.sign(t, "rsa-1", claims("alice", now))
	parts := strings.Split(valid, ".")

	tests := []struct {
		name  string
		token string
		want  string
	}{
		{"expired", rs.sign(t, "rsa-1", with(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), "expired"},
		{"no exp", rs.sign(t, "rsa-1", with(func(c map[string]any) { delete(c, "exp") })), "no exp"},
		{"not yet valid", rs.sign(t, "rsa-1", with(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() })), "not valid yet"},
		{"issued in the future", rs.sign(t, "rsa-1", with(func(c map[string]any) { c["iat"] = now.Add(time.Minute).Unix() })), "future"},
		{"wrong issuer", rs.sign(t, "rsa-1", with(func(c map[string]any) { c["iss"] = "https://evil.example" })), "issuer"},
		{"no issuer", rs.sign(t, "rsa-1", with(func(c map[string]any) { delete(c, "iss") })), "issuer"},
		{"wrong audience", rs.sign(t, "rsa-1", with(func(c map[string]any) { c["aud"] = "kafkaesque" })), "audience"},
		{"missing sub", rs.sign(t, "rsa-1", with(func(c map[string]any) { delete(c, "sub") })), "no sub claim"},
		{"blank sub", rs.sign(t, "rsa-1", with(func(c map[string]any) { c["sub"] = "  " })), "no sub claim"},
		{"numeric sub", rs.sign(t, "rsa-1", with(func(c map[string]any) { c["sub"] = 42 })), "claims"},
		{"control chars in sub", rs.sign(t, "rsa-1", with(func(c map[string]any) { c["sub"] = "al\x01ice" })), "control"},
		{"unknown kid", rs.sign(t, "rsa-9", claims("alice", now)), "kid"},
		{"no kid, two keys", rs.sign(t, "", claims("alice", now)), "no kid"},
		{"kid of a key of another type", rs.sign(t, "ec-1", claims("alice", now)), "does not fit"},
		{"another key under a known kid", stranger.sign(t, "rsa-1", claims("alice", now)), "signature"},
		{"alg none", b64(map[string]string{"alg": "none", "kid": "rsa-1"}) + "." + b64(claims("alice", now)) + ".", "allowed algorithm"},
		{"HS256 keyed with the public key", hs256(t, pubDER, "rsa-1", claims("alice", now)), "allowed algorithm"},
		{"tampered signature", parts[0] + "." + parts[1] + "." + flip(parts[2]), "signature"},
		{"tampered payload", parts[0] + "." + b64(with(func(c map[string]any) { c["sub"] = "admin" })) + "." + parts[2], "signature"},
		{"not a JWT", "bm90LWEtand0", "allowed algorithm"},
		{"JWE-shaped", "a.b.c.d.e", "allowed algorithm"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := f.login(t, oauth.Auth{Token: tc.token})
			if err == nil {
				t.Fatalf("accepted as %v", x.Principal())
			}
			if !errors.Is(err, errInvalidToken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want invalid_token mentioning %q", err, tc.want)
			}
			if p := x.Principal(); p != kernel.Anonymous {
				t.Fatalf("principal after a refusal: %v", p)
			}
			if !x.Expiry().IsZero() {
				t.Fatalf("expiry after a refusal: %v", x.Expiry())
			}
		})
	}
	if logs := f.logs.String(); strings.Contains(logs, parts[2]) || !strings.Contains(logs, "OAUTHBEARER authentication refused") {
		t.Fatalf("logs quote a token or lack the refusals:\n%s", logs)
	}
}

// flip changes one character in the middle of a base64url string.
func flip(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestOAuthBearerKeyRotation(t *testing.T) {
	old := newRSAKey(t, "k1", jose.RS256)
	next := newECKey(t, "k2", elliptic.P256(), jose.ES256)
	f := newOAuthFixture(t, nil, old)
	now := f.now()
	if _, err := f.login(t, oauth.Auth{Token: old.sign(t, "k1", claims("alice", now))}); err != nil {
		t.Fatalf("old key before rotation: %v", err)
	}
	// A login looks at the file so that the check-once-a-second clock starts.
	f.advance(2 * time.Second)
	if _, err := f.login(t, oauth.Auth{Token: old.sign(t, "k1", claims("alice", now))}); err != nil {
		t.Fatal(err)
	}

	writeJWKS(t, f.jwks, next)
	// Within a second of the last look, the file is not looked at again.
	if _, err := f.login(t, oauth.Auth{Token: next.sign(t, "k2", claims("alice", now))}); err == nil {
		t.Fatal("the new key was used before the file was looked at again")
	}
	f.advance(1100 * time.Millisecond)
	if _, err := f.login(t, oauth.Auth{Token: next.sign(t, "k2", claims("alice", now))}); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
	if _, err := f.login(t, oauth.Auth{Token: old.sign(t, "k1", claims("alice", now))}); err == nil {
		t.Fatal("the removed key still verifies")
	}
	if !strings.Contains(f.logs.String(), "JWKS file reloaded") {
		t.Fatal("no reload logged")
	}

	// A broken file keeps the keys, with one warning per minute at most.
	for i, junk := range []string{`{"keys": [`, `{"keys": []}`, `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"k2"}]}`} {
		writeFileNewMtime(t, f.jwks, []byte(junk))
		f.advance(1100 * time.Millisecond)
		if _, err := f.login(t, oauth.Auth{Token: next.sign(t, "k2", claims("alice", f.now()))}); err != nil {
			t.Fatalf("junk %d: the previous keys were dropped: %v", i, err)
		}
	}
	if n := strings.Count(f.logs.String(), "does not load"); n != 1 {
		t.Fatalf("%d warnings about the broken file, want 1 (rate-limited):\n%s", n, f.logs.String())
	}
	// A deleted file keeps the keys too.
	if err := os.Remove(f.jwks); err != nil {
		t.Fatal(err)
	}
	f.advance(1100 * time.Millisecond)
	if _, err := f.login(t, oauth.Auth{Token: next.sign(t, "k2", claims("alice", f.now()))}); err != nil {
		t.Fatalf("after removal: %v", err)
	}
	// Replaced by a good file again: loaded.
	writeJWKS(t, f.jwks, old)
	f.advance(1100 * time.Millisecond)
	if _, err := f.login(t, oauth.Auth{Token: old.sign(t, "k1", claims("alice", f.now()))}); err != nil {
		t.Fatalf("after restoring: %v", err)
	}
}

// TestOAuthBearerConcurrentLogins hammers logins while the file is rewritten, for -race.
func TestOAuthBearerConcurrentLogins(t *testing.T) {
	k := newECKey(t, "k1", elliptic.P256(), jose.ES256)
	f := newOAuthFixture(t, nil, k)
	tok := k.sign(t, "k1", claims("alice", f.now()))
	first := []byte("n,,\x01auth=Bearer " + tok + "\x01\x01")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				x, err := f.m.StartSASL(MechOAuthBearer, &kernel.ConnInfo{})
				if err == nil {
					_, _, err = x.Step(context.Background(), first)
				}
				if err != nil {
					errs <- err
					return
				}
				f.advance(100 * time.Millisecond)
			}
		}()
	}
	for i := 0; i < 10; i++ {
		writeJWKS(t, f.jwks, k)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestOAuthBearerConfig(t *testing.T) {
	rs := newRSAKey(t, "k1", jose.RS256)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	writeJWKS(t, good, rs)
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallSet, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: small.Public(), KeyID: "s"}}})
	privSet, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: rs.key, KeyID: "p", Algorithm: "RS256"}}})

	tests := []struct {
		name string
		cfg  map[string]string
		want string // "" means it provisions
	}{
		{"plain path", map[string]string{cfgJWKSURL: good}, ""},
		{"file URL", map[string]string{cfgJWKSURL: "file://" + good}, ""},
		{"file URL localhost", map[string]string{cfgJWKSURL: "file://localhost" + good}, ""},
		{"private key: public half used", map[string]string{cfgJWKSURL: write("priv.json", string(privSet))}, ""},
		{"unset", map[string]string{cfgJWKSURL: ""}, "is required"},
		{"https", map[string]string{cfgJWKSURL: "https://idp.example/jwks"}, "only JWKS files"},
		{"http", map[string]string{cfgJWKSURL: "HTTP://idp.example/jwks"}, "only JWKS files"},
		{"other scheme", map[string]string{cfgJWKSURL: "s3://bucket/jwks"}, "unsupported URL scheme"},
		{"remote file URL", map[string]string{cfgJWKSURL: "file://host/jwks"}, "local file"},
		{"missing file", map[string]string{cfgJWKSURL: filepath.Join(dir, "nope.json")}, "no such file"},
		{"a directory", map[string]string{cfgJWKSURL: dir}, "not a regular file"},
		{"not JSON", map[string]string{cfgJWKSURL: write("bad.json", "{")}, "not a JWK Set"},
		{"no keys member", map[string]string{cfgJWKSURL: write("nokeys.json", `{"kid":"x"}`)}, "no \"keys\""},
		{"only HMAC", map[string]string{cfgJWKSURL: write("oct.json", `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`)}, "no usable signing key"},
		{"only small RSA", map[string]string{cfgJWKSURL: write("small.json", string(smallSet))}, "no usable signing key"},
		{"only enc keys", map[string]string{cfgJWKSURL: write("enc.json", strings.Replace(mustRead(t, good), `"use":"sig"`, `"use":"enc"`, 1))}, "no usable signing key"},
		{"bad skew", map[string]string{cfgJWKSURL: good, cfgClockSkew: "-1"}, cfgClockSkew},
		{"junk skew", map[string]string{cfgJWKSURL: good, cfgClockSkew: "soon"}, cfgClockSkew},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Module{broker: kernel.BrokerInfo{StaticConfigs: tc.cfg}}
			err := m.oauth.provision(m, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	// Defaults.
	m := &Module{broker: kernel.BrokerInfo{StaticConfigs: map[string]string{cfgJWKSURL: good}}}
	if err := m.oauth.provision(m, nil); err != nil {
		t.Fatal(err)
	}
	if o := m.oauth; o.skew != 30*time.Second || o.subClaim != "sub" || o.scopeClaim != "scope" || o.issuer != "" || o.audience != nil {
		t.Fatalf("defaults: skew %v sub %q scope %q iss %q aud %q", o.skew, o.subClaim, o.scopeClaim, o.issuer, o.audience)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOAuthBearerMalformedMessages(t *testing.T) {
	k := newRSAKey(t, "k1", jose.RS256)
	f := newOAuthFixture(t, nil, k)
	tok := k.sign(t, "k1", claims("alice", f.now()))
	for _, msg := range []string{
		"",
		"\x01",
		"n,,",
		"n,,\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01",
		"y,,\x01auth=Bearer " + tok + "\x01\x01",
		"n,a=,\x01auth=Bearer " + tok + "\x01\x01",
		"n,,\x01auth=Basic " + tok + "\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01auth=Bearer " + tok + "\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01\x01extra",
		"n,,\x01auth=Bearer " + tok + "!\x01\x01",
		"n,,\x01auth=Bearer " + strings.Repeat("a", maxOAuthMessage) + "\x01\x01",
	} {
		x, err := f.m.StartSASL(MechOAuthBearer, &kernel.ConnInfo{})
		if err != nil {
			t.Fatal(err)
		}
		reply, done, err := x.Step(context.Background(), []byte(msg))
		if err == nil || done || reply != nil {
			t.Fatalf("%q: done %v reply %q err %v", msg, done, reply, err)
		}
		if strings.Contains(err.Error(), tok) {
			t.Fatalf("the error quotes the token: %v", err)
		}
	}
	// Lower-case scheme and several spaces are fine (RFC 6750, Kafka's pattern).
	x, _ := f.m.StartSASL(MechOAuthBearer, &kernel.ConnInfo{})
	if _, done, err := x.Step(context.Background(), []byte("n,a=alice,\x01auth=bearer   "+tok+"\x01\x01")); err != nil || !done {
		t.Fatalf("lower-case bearer: %v", err)
	}
}

func TestOAuthBearerNotProvisioned(t *testing.T) {
	var o oauthState
	if _, err := o.start(&kernel.ConnInfo{}); err == nil {
		t.Fatal("an unconfigured OAUTHBEARER started an exchange")
	}
}
