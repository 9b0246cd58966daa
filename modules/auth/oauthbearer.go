package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/sluicehq/sluice/kernel"
)

// Broker configs read by OAUTHBEARER (Kafka's names).
const (
	cfgJWKSURL    = "sasl.oauthbearer.jwks.endpoint.url"
	cfgAudience   = "sasl.oauthbearer.expected.audience"
	cfgIssuer     = "sasl.oauthbearer.expected.issuer"
	cfgSubClaim   = "sasl.oauthbearer.sub.claim.name"
	cfgScopeClaim = "sasl.oauthbearer.scope.claim.name"
	cfgClockSkew  = "sasl.oauthbearer.clock.skew.seconds"
)

// errInvalidToken marks a token that was refused (RFC 6750's invalid_token). The
// wrapped texts say why in fixed words; they never quote the token or its claims.
var errInvalidToken = errors.New("invalid_token")

// errOAuthExchangeOver is a Step after the exchange succeeded or failed.
var errOAuthExchangeOver = errors.New("OAUTHBEARER: the exchange is over")

func invalidToken(why string) error { return fmt.Errorf("%w: %s", errInvalidToken, why) }

// oauthState checks OAUTHBEARER tokens: JWS-signed JWTs verified against the keys of
// a JWKS file, with their exp, nbf, iat, iss and aud claims checked. It is read-only
// after provision except for the JWKS file's keys (see jwksFile).
type oauthState struct {
	log        *slog.Logger
	keys       *jwksFile
	issuer     string   // "" accepts any
	audience   []string // empty accepts any
	subClaim   string
	scopeClaim string
	skew       time.Duration
	now        func() time.Time
}

// provision reads the sasl.oauthbearer.* configs and loads the JWKS file. Called only
// when OAUTHBEARER is enabled.
func (o *oauthState) provision(m *Module, _ kernel.Context) error {
	cfg := m.broker.StaticConfigs
	o.log = m.log
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.now == nil {
		o.now = time.Now
	}
	path, err := jwksPath(cfg[cfgJWKSURL])
	if err != nil {
		return err
	}
	o.issuer = strings.TrimSpace(cfg[cfgIssuer])
	o.audience = nil
	for _, a := range strings.Split(cfg[cfgAudience], ",") {
		if a = strings.TrimSpace(a); a != "" {
			o.audience = append(o.audience, a)
		}
	}
	o.subClaim = strings.TrimSpace(cfg[cfgSubClaim])
	if o.subClaim == "" {
		o.subClaim = "sub"
	}
	o.scopeClaim = strings.TrimSpace(cfg[cfgScopeClaim])
	if o.scopeClaim == "" {
		o.scopeClaim = "scope"
	}
	o.skew = 30 * time.Second
	if v := strings.TrimSpace(cfg[cfgClockSkew]); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("auth: %s: %q is not a whole number of seconds, 0 or more", cfgClockSkew, v)
		}
		o.skew = time.Duration(n) * time.Second
	}
	if o.keys, err = openJWKS(path, o.log); err != nil {
		return fmt.Errorf("auth: %s: %w", cfgJWKSURL, err)
	}
	return nil
}

// jwksPath turns sasl.oauthbearer.jwks.endpoint.url into a file path.
func jwksPath(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", fmt.Errorf("auth: %s is required when OAUTHBEARER is enabled (a JWKS file: file:///path or a path)", cfgJWKSURL)
	}
	lower := strings.ToLower(v)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		return "", fmt.Errorf("auth: %s: only JWKS files are supported for now (file:///path or a path), not http(s) endpoints", cfgJWKSURL)
	}
	if !strings.HasPrefix(lower, "file:") {
		if strings.Contains(v, "://") {
			return "", fmt.Errorf("auth: %s: unsupported URL scheme (give file:///path or a path)", cfgJWKSURL)
		}
		return v, nil
	}
	u, err := url.Parse(v)
	if err != nil {
		return "", fmt.Errorf("auth: %s: %w", cfgJWKSURL, err)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("auth: %s: a file URL must name a local file (file:///path)", cfgJWKSURL)
	}
	if u.Path == "" {
		return "", fmt.Errorf("auth: %s: a file URL without a path", cfgJWKSURL)
	}
	return u.Path, nil
}

func (o *oauthState) start(conn *kernel.ConnInfo) (kernel.SASLExchange, error) {
	if o.keys == nil {
		return nil, errors.New("OAUTHBEARER is not configured")
	}
	return &oauthExchange{o: o, conn: conn}, nil
}

// oauthToken is what a verified token says.
type oauthToken struct {
	subject string
	expiry  time.Time
	scopes  []string
}

// validate verifies a compact JWS JWT: an allowed algorithm, a key of the JWKS chosen
// by kid (or the only key when the token names none), the signature, exp (required),
// nbf and iat with the clock skew, iss and aud as configured, and the subject claim.
func (o *oauthState) validate(raw string) (oauthToken, error) {
	var t oauthToken
	now := o.now()
	tok, err := jwt.ParseSigned(raw, allowedAlgs)
	if err != nil {
		// go-jose refuses "none", HMAC and every other algorithm not listed here.
		return t, invalidToken("not a JWS-signed JWT with an allowed algorithm (RS256/384/512, PS256/384/512, ES256/384/512, EdDSA)")
	}
	if len(tok.Headers) != 1 {
		return t, invalidToken("not a single-signature JWS")
	}
	h := tok.Headers[0]
	key, err := o.pickKey(o.keys.current(now), h.KeyID, jose.SignatureAlgorithm(h.Algorithm))
	if err != nil {
		return t, err
	}
	var std jwt.Claims
	var all map[string]any
	if err := tok.Claims(key.Key, &std, &all); err != nil {
		if errors.Is(err, jose.ErrCryptoFailure) {
			return t, invalidToken("the signature does not verify")
		}
		return t, invalidToken("the claims are not a valid JWT claims set")
	}
	if std.Expiry == nil {
		return t, invalidToken("the token has no exp claim")
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: o.issuer, AnyAudience: o.audience, Time: now}, o.skew)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return t, invalidToken("the token has expired (exp)")
	case errors.Is(err, jwt.ErrNotValidYet):
		return t, invalidToken("the token is not valid yet (nbf)")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return t, invalidToken("the token is issued in the future (iat)")
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return t, invalidToken("the token's issuer (iss) is not the expected one")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return t, invalidToken("the token's audience (aud) names none of the expected ones")
	default:
		return t, invalidToken("the claims do not validate")
	}
	sub, _ := all[o.subClaim].(string)
	sub = strings.TrimSpace(sub)
	if sub == "" {
		return t, invalidToken(fmt.Sprintf("the token has no %s claim (a non-empty string)", o.subClaim))
	}
	if strings.IndexFunc(sub, unicode.IsControl) >= 0 {
		return t, invalidToken(fmt.Sprintf("the %s claim holds control characters", o.subClaim))
	}
	t.subject = sub
	t.expiry = std.Expiry.Time()
	t.scopes = claimScopes(all[o.scopeClaim])
	return t, nil
}

// pickKey selects the verification key: the keys named by kid that fit alg, or,
// when the token has no kid, the set's only key.
func (o *oauthState) pickKey(keys []jose.JSONWebKey, kid string, alg jose.SignatureAlgorithm) (jose.JSONWebKey, error) {
	var cands []jose.JSONWebKey
	if kid == "" {
		if len(keys) != 1 {
			return jose.JSONWebKey{}, invalidToken("the token has no kid and the JWKS holds several keys")
		}
		cands = keys
	} else {
		for _, k := range keys {
			if k.KeyID == kid {
				cands = append(cands, k)
			}
		}
		if len(cands) == 0 {
			return jose.JSONWebKey{}, invalidToken("no key in the JWKS has the token's kid")
		}
	}
	for _, k := range cands {
		if (k.Algorithm == "" || k.Algorithm == string(alg)) && keyFitsAlg(k.Key, alg) {
			return k, nil
		}
	}
	return jose.JSONWebKey{}, invalidToken("the token's key does not fit its algorithm")
}

// claimScopes reads the scope claim: a space-separated string (RFC 6749 section 3.3)
// or a list of strings. Anything else means no scopes, as in Kafka.
func claimScopes(v any) []string {
	switch s := v.(type) {
	case string:
		return strings.Fields(s)
	case []any:
		var out []string
		for _, e := range s {
			if str, ok := e.(string); ok && strings.TrimSpace(str) != "" {
				out = append(out, strings.TrimSpace(str))
			}
		}
		return out
	}
	return nil
}

// oauthExchange is one OAUTHBEARER authentication: a single client message, answered
// with an empty server message on success. A refused token fails the exchange with
// an error (SASL_AUTHENTICATION_FAILED), not with RFC 7628's error challenge; see the
// package doc.
type oauthExchange struct {
	o         *oauthState
	conn      *kernel.ConnInfo
	over      bool
	done      bool
	principal kernel.Principal
	expiry    time.Time
	scopes    []string
}

func (x *oauthExchange) Step(_ context.Context, msg []byte) ([]byte, bool, error) {
	if x.over {
		return nil, false, errOAuthExchangeOver
	}
	x.over = true
	m, err := parseOAuthMessage(msg)
	if err != nil {
		return nil, false, x.refuse(err)
	}
	tok, err := x.o.validate(m.token)
	if err != nil {
		return nil, false, x.refuse(err)
	}
	if m.authzid != "" && m.authzid != tok.subject {
		return nil, false, x.refuse(errors.New("the authorization id is not the token's subject"))
	}
	// Extensions (KIP-342) are accepted and ignored: Kafka hands them to a validator
	// callback, which by default accepts none of them as meaningful.
	x.done = true
	x.principal = kernel.Principal{Type: "User", Name: tok.subject}
	x.expiry = tok.expiry
	x.scopes = tok.scopes
	return []byte{}, true, nil
}

func (x *oauthExchange) refuse(err error) error {
	var remote string
	if x.conn != nil && x.conn.Remote != nil {
		remote = x.conn.Remote.String()
	}
	x.o.log.Debug("OAUTHBEARER authentication refused", "remote", remote, "err", err)
	return fmt.Errorf("OAUTHBEARER authentication failed: %w", err)
}

// Principal is User:<the subject claim>, once Step returned done.
func (x *oauthExchange) Principal() kernel.Principal {
	if !x.done {
		return kernel.Anonymous
	}
	return x.principal
}

// Expiry is the token's exp: the kernel ends the session then (KIP-368).
func (x *oauthExchange) Expiry() time.Time { return x.expiry }

var _ kernel.SASLExchange = (*oauthExchange)(nil)
