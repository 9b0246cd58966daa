package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of New and ServerConfig.
var (
	// ErrNoKeyStore: a TLS server needs a key store and the configs name none.
	ErrNoKeyStore = errors.New("no key store: set ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain")
)

const (
	// checkInterval is how often the handshake path looks at the store files.
	checkInterval = time.Second
	// warnInterval bounds the reload-failure warnings.
	warnInterval = 10 * time.Second
)

// Store holds the key pair and the trust pool built from the ssl.* configs, reloaded
// when their files change.
type Store struct {
	log        *slog.Logger
	clientAuth tls.ClientAuthType
	minVersion uint16
	maxVersion uint16
	verifyHost bool // ssl.endpoint.identification.algorithm == "https"

	keyFile, trustFile string // "" when inline or absent
	keyPassword        string
	inlineKey          []byte // PEM of ssl.keystore.key + ssl.keystore.certificate.chain
	inlineTrust        []byte
	hasKey             bool

	cur       atomic.Pointer[material]
	lastCheck atomic.Int64 // unix nanos of the last file check
	mu        sync.Mutex   // serialises reloads
	lastWarn  time.Time    // guarded by mu
	now       func() time.Time
}

// material is one consistent set of key pair and trust pool, with the file stamps it
// was read from.
type material struct {
	cert       *tls.Certificate // nil without a key store
	pool       *x509.CertPool   // nil: system roots
	keyStamp   stamp
	trustStamp stamp
	server     *tls.Config
}

// stamp identifies a version of a file cheaply.
type stamp struct {
	mod  time.Time
	size int64
}

// New reads the key and trust stores the configs name (Kafka names, string values).
// A Store without a key store can still verify peers (a client config); ServerConfig
// then fails.
func New(configs map[string]string, log *slog.Logger) (*Store, error) {
	s := &Store{log: log, now: time.Now}
	get := func(k string) string { return strings.TrimSpace(configs[k]) }
	for _, k := range []string{"ssl.keystore.type", "ssl.truststore.type"} {
		if v := get(k); v != "" && !strings.EqualFold(v, "PEM") {
			return nil, fmt.Errorf("%s: %q is not supported (only PEM)", k, v)
		}
	}
	// Kafka's own refusals for PEM stores (the only kind here): a PEM key store's
	// key is protected by ssl.key.password alone, and a PEM trust store has none.
	if get("ssl.keystore.password") != "" {
		return nil, errors.New("ssl.keystore.password: SSL key store password cannot be specified with PEM format, only key password (ssl.key.password) may be specified")
	}
	if get("ssl.truststore.password") != "" {
		return nil, errors.New("ssl.truststore.password: SSL trust store password cannot be specified for PEM format")
	}
	switch v := get("ssl.client.auth"); strings.ToLower(v) {
	case "", "none":
		s.clientAuth = tls.NoClientCert
	case "requested":
		s.clientAuth = tls.VerifyClientCertIfGiven
	case "required":
		s.clientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("ssl.client.auth: %q is not one of none, requested, required", v)
	}
	var err error
	if s.minVersion, s.maxVersion, err = parseProtocols(get("ssl.enabled.protocols")); err != nil {
		return nil, err
	}
	alg, ok := configs["ssl.endpoint.identification.algorithm"]
	switch alg = strings.TrimSpace(alg); {
	case !ok || strings.EqualFold(alg, "https"):
		s.verifyHost = true
	case alg == "":
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm: %q is not https or empty", alg)
	}

	s.keyFile = get("ssl.keystore.location")
	s.keyPassword = configs["ssl.key.password"]
	ik, ic := configs["ssl.keystore.key"], configs["ssl.keystore.certificate.chain"]
	switch {
	case s.keyFile != "" && (ik != "" || ic != ""):
		return nil, errors.New("ssl.keystore.location and inline ssl.keystore.key/ssl.keystore.certificate.chain are both set; choose one")
	case (ik == "") != (ic == ""):
		return nil, errors.New("ssl.keystore.key and ssl.keystore.certificate.chain go together; one is missing")
	case ik != "":
		s.inlineKey = append(append(inlinePEM(ik), '\n'), inlinePEM(ic)...)
	}
	s.hasKey = s.keyFile != "" || s.inlineKey != nil

	s.trustFile = get("ssl.truststore.location")
	it := configs["ssl.truststore.certificates"]
	if s.trustFile != "" && it != "" {
		return nil, errors.New("ssl.truststore.location and ssl.truststore.certificates are both set; choose one")
	}
	if it != "" {
		s.inlineTrust = inlinePEM(it)
	}
	m, err := s.load(nil)
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	s.lastCheck.Store(s.now().UnixNano())
	return s, nil
}

// parseProtocols reads ssl.enabled.protocols ("" is TLSv1.2,TLSv1.3).
func parseProtocols(v string) (lo, hi uint16, err error) {
	if v == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	for _, p := range strings.Split(v, ",") {
		var ver uint16
		switch p = strings.TrimSpace(p); p {
		case "":
			continue
		case "TLSv1.2":
			ver = tls.VersionTLS12
		case "TLSv1.3":
			ver = tls.VersionTLS13
		case "TLSv1", "TLSv1.1", "SSLv3":
			return 0, 0, fmt.Errorf("ssl.enabled.protocols: %s is below the TLSv1.2 minimum", p)
		default:
			return 0, 0, fmt.Errorf("ssl.enabled.protocols: unknown protocol %q (TLSv1.2, TLSv1.3)", p)
		}
		if lo == 0 || ver < lo {
			lo = ver
		}
		hi = max(hi, ver)
	}
	if lo == 0 {
		return 0, 0, errors.New("ssl.enabled.protocols: empty")
	}
	return lo, hi, nil
}

// HasKeyStore reports whether the configs name a key store (so ServerConfig works).
func (s *Store) HasKeyStore() bool { return s.hasKey }

// ClientAuth is the ssl.client.auth setting.
func (s *Store) ClientAuth() tls.ClientAuthType { return s.clientAuth }

// ServerConfig returns a config for TLS servers: each handshake picks up the current
// key pair and trust pool (reloading changed files at most once per second).
func (s *Store) ServerConfig() (*tls.Config, error) {
	if !s.hasKey {
		return nil, ErrNoKeyStore
	}
	return &tls.Config{
		MinVersion: s.minVersion,
		MaxVersion: s.maxVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.material().server, nil
		},
	}, nil
}

// ClientConfig returns a config for one outgoing connection to serverName (a host
// name or IP address): the trust store verifies the server (its host name too unless
// ssl.endpoint.identification.algorithm is empty) and the key store, when there is
// one, is the client certificate. Take a new one per dial to follow reloads.
func (s *Store) ClientConfig(serverName string) *tls.Config {
	m := s.material()
	cfg := &tls.Config{
		MinVersion: s.minVersion,
		MaxVersion: s.maxVersion,
		RootCAs:    m.pool,
		ServerName: serverName,
	}
	if m.cert != nil {
		cfg.Certificates = []tls.Certificate{*m.cert}
	}
	if !s.verifyHost {
		// Verify the chain but not the name: the standard verification checks both,
		// so it is turned off and done here without the name.
		cfg.InsecureSkipVerify = true
		pool := m.pool
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg
}

// Certificate returns the key pair in use (nil without a key store).
func (s *Store) Certificate() *tls.Certificate { return s.material().cert }

// material returns the current material, first reloading changed files if the last
// check is more than checkInterval old.
func (s *Store) material() *material {
	m := s.cur.Load()
	if s.keyFile == "" && s.trustFile == "" {
		return m
	}
	now := s.now()
	last := s.lastCheck.Load()
	if now.UnixNano()-last < int64(checkInterval) || !s.lastCheck.CompareAndSwap(last, now.UnixNano()) {
		return m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m = s.cur.Load()
	nm, err := s.load(m)
	if err != nil {
		if now.Sub(s.lastWarn) >= warnInterval {
			s.lastWarn = now
			s.log.Warn("TLS store reload failed; keeping the previous certificates", "err", err)
		}
		return m
	}
	if nm != m {
		s.cur.Store(nm)
		s.log.Info("TLS store reloaded", "keystore", s.keyFile, "truststore", s.trustFile)
	}
	return nm
}

// load reads the stores. With prev, files whose stamp did not change are not read
// again, and prev itself is returned when nothing changed.
func (s *Store) load(prev *material) (*material, error) {
	m := &material{}
	if prev != nil {
		*m = *prev
	}
	changed := prev == nil
	if s.hasKey {
		var pemBytes []byte
		var st stamp
		if s.keyFile != "" {
			var err error
			if st, err = statFile(s.keyFile); err != nil {
				return nil, fmt.Errorf("ssl.keystore.location: %w", err)
			}
		}
		if prev == nil || st != prev.keyStamp {
			if s.keyFile != "" {
				var err error
				if pemBytes, err = os.ReadFile(s.keyFile); err != nil {
					return nil, fmt.Errorf("ssl.keystore.location: %w", err)
				}
			} else {
				pemBytes = s.inlineKey
			}
			cert, err := parseKeyStore(pemBytes, s.keyPassword)
			if err != nil {
				if s.keyFile != "" {
					return nil, fmt.Errorf("key store %s: %w", s.keyFile, err)
				}
				return nil, fmt.Errorf("ssl.keystore.key/ssl.keystore.certificate.chain: %w", err)
			}
			m.cert, m.keyStamp, changed = cert, st, true
		}
	}
	if s.trustFile != "" || s.inlineTrust != nil {
		var st stamp
		if s.trustFile != "" {
			var err error
			if st, err = statFile(s.trustFile); err != nil {
				return nil, fmt.Errorf("ssl.truststore.location: %w", err)
			}
		}
		if prev == nil || st != prev.trustStamp {
			b := s.inlineTrust
			if s.trustFile != "" {
				var err error
				if b, err = os.ReadFile(s.trustFile); err != nil {
					return nil, fmt.Errorf("ssl.truststore.location: %w", err)
				}
			}
			pool, err := parseTrustStore(b)
			if err != nil {
				if s.trustFile != "" {
					return nil, fmt.Errorf("trust store %s: %w", s.trustFile, err)
				}
				return nil, fmt.Errorf("ssl.truststore.certificates: %w", err)
			}
			m.pool, m.trustStamp, changed = pool, st, true
		}
	}
	if !changed {
		return prev, nil
	}
	m.server = &tls.Config{
		MinVersion: s.minVersion,
		MaxVersion: s.maxVersion,
		ClientAuth: s.clientAuth,
		ClientCAs:  m.pool,
	}
	if m.cert != nil {
		m.server.Certificates = []tls.Certificate{*m.cert}
	}
	return m, nil
}

func statFile(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{mod: fi.ModTime(), size: fi.Size()}, nil
}
