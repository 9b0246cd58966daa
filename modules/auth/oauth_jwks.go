package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/time/rate"
)

const (
	// maxJWKSFile bounds the JWKS file read into memory.
	maxJWKSFile = 4 << 20
	// jwksCheckEvery is how often the login path looks at the file's mtime and size.
	jwksCheckEvery = time.Second
	// jwksWarnEvery rate-limits the warnings about a JWKS file that does not load.
	jwksWarnEvery = time.Minute
	// minRSABits is the smallest RSA modulus accepted (RFC 7518 section 3.3).
	minRSABits = 2048
)

// errNoUsableKeys is a JWKS without one key that can verify a signature.
var errNoUsableKeys = errors.New("the JWKS holds no usable signing key (RSA of 2048 bits or more, EC P-256/P-384/P-521, Ed25519)")

// jwksFile is the JWKS file's current keys. The login path calls keys, which looks at
// the file at most once per jwksCheckEvery and reloads it when its identity, mtime or
// size changed; a file that no longer loads keeps the previous keys.
//
// keys is read without a lock. mu guards the check state; it is only ever TryLock'd
// on the login path (a login never waits for another's reload) and is a leaf lock.
type jwksFile struct {
	path string
	log  *slog.Logger
	warn *rate.Sometimes

	keys atomic.Pointer[[]jose.JSONWebKey]

	mu      sync.Mutex
	checked time.Time   // last stat (mu)
	seen    os.FileInfo // the file last read, good or bad (mu)
}

// openJWKS loads the file; an error means the broker must not start.
func openJWKS(path string, log *slog.Logger) (*jwksFile, error) {
	f := &jwksFile{path: path, log: log, warn: &rate.Sometimes{First: 1, Interval: jwksWarnEvery}}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	keys, err := f.read(fi)
	if err != nil {
		return nil, err
	}
	f.keys.Store(&keys)
	f.seen = fi
	return f, nil
}

// current returns the keys, reloading them first if the file changed and the last
// look is at least jwksCheckEvery old.
func (f *jwksFile) current(now time.Time) []jose.JSONWebKey {
	if f.mu.TryLock() {
		if now.Sub(f.checked) >= jwksCheckEvery || now.Before(f.checked) {
			f.checked = now
			f.reload()
		}
		f.mu.Unlock()
	}
	return *f.keys.Load()
}

// reload re-reads the file if it changed. Called with mu held.
func (f *jwksFile) reload() {
	fi, err := os.Stat(f.path)
	if err != nil {
		f.warn.Do(func() {
			f.log.Warn("OAUTHBEARER: cannot stat the JWKS file; keeping the previous keys", "path", f.path, "err", err)
		})
		return
	}
	if f.seen != nil && os.SameFile(f.seen, fi) && fi.ModTime().Equal(f.seen.ModTime()) && fi.Size() == f.seen.Size() {
		return
	}
	f.seen = fi
	keys, err := f.read(fi)
	if err != nil {
		f.warn.Do(func() {
			f.log.Warn("OAUTHBEARER: the changed JWKS file does not load; keeping the previous keys", "path", f.path, "err", err)
		})
		return
	}
	f.keys.Store(&keys)
	f.log.Info("OAUTHBEARER: JWKS file reloaded", "path", f.path, "keys", len(keys))
}

func (f *jwksFile) read(fi os.FileInfo) ([]jose.JSONWebKey, error) {
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("JWKS %s: not a regular file", f.path)
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxJWKSFile+1))
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", f.path, err)
	}
	if len(data) > maxJWKSFile {
		return nil, fmt.Errorf("JWKS %s: larger than %d bytes", f.path, maxJWKSFile)
	}
	keys, skipped, err := parseJWKS(data)
	for _, s := range skipped {
		f.log.Warn("OAUTHBEARER: JWKS key ignored", "path", f.path, "err", s)
	}
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", f.path, err)
	}
	return keys, nil
}

// parseJWKS reads a JWK Set (RFC 7517 section 5) and keeps the keys that can verify an
// allowed signature: public RSA (2048 bits or more), EC on P-256/384/521 and Ed25519
// keys whose use, if given, is "sig". A private key contributes its public half.
// Symmetric keys are refused, so HMAC can never verify. Each key that is left out is
// reported in skipped; a set with no usable key is an error.
func parseJWKS(data []byte) (keys []jose.JSONWebKey, skipped []error, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, nil, fmt.Errorf("not a JWK Set: %w", err)
	}
	if set.Keys == nil {
		return nil, nil, errors.New(`not a JWK Set: no "keys" member`)
	}
	for i, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			skipped = append(skipped, fmt.Errorf("key %d: %w", i, err))
			continue
		}
		if why := unusableKey(&k); why != "" {
			skipped = append(skipped, fmt.Errorf("key %d (kid %q): %s", i, k.KeyID, why))
			continue
		}
		keys = append(keys, k.Public())
	}
	if len(keys) == 0 {
		return nil, skipped, errNoUsableKeys
	}
	return keys, skipped, nil
}

// unusableKey says why a key cannot verify tokens, or "".
func unusableKey(k *jose.JSONWebKey) string {
	if !k.Valid() {
		return "incomplete key"
	}
	if k.Use != "" && k.Use != "sig" {
		return fmt.Sprintf("use %q, not sig", k.Use)
	}
	if k.Algorithm != "" && !allowedAlg(k.Algorithm) {
		return fmt.Sprintf("algorithm %q is not allowed", k.Algorithm)
	}
	pub := k.Public()
	switch key := pub.Key.(type) {
	case *rsa.PublicKey:
		if key.N.BitLen() < minRSABits {
			return fmt.Sprintf("RSA key of %d bits (at least %d)", key.N.BitLen(), minRSABits)
		}
	case *ecdsa.PublicKey:
		if ecAlg(key.Curve) == "" {
			return "unsupported EC curve"
		}
	case ed25519.PublicKey:
	case []byte:
		return "symmetric keys are not accepted (HMAC is refused)"
	default:
		return "unsupported key type"
	}
	if k.Algorithm != "" && !keyFitsAlg(pub.Key, jose.SignatureAlgorithm(k.Algorithm)) {
		return fmt.Sprintf("algorithm %q does not fit the key", k.Algorithm)
	}
	return ""
}

// allowedAlgs are the JWS algorithms accepted: asymmetric only. "none" and HMAC
// (HS256/384/512) never verify a token.
var allowedAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

func allowedAlg(a string) bool {
	for _, x := range allowedAlgs {
		if string(x) == a {
			return true
		}
	}
	return false
}

func ecAlg(c elliptic.Curve) jose.SignatureAlgorithm {
	switch c {
	case elliptic.P256():
		return jose.ES256
	case elliptic.P384():
		return jose.ES384
	case elliptic.P521():
		return jose.ES512
	}
	return ""
}

// keyFitsAlg says whether a public key can verify alg.
func keyFitsAlg(key any, alg jose.SignatureAlgorithm) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		switch alg {
		case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
			return true
		}
	case *ecdsa.PublicKey:
		return ecAlg(k.Curve) == alg
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}
