package interbroker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/kernel"
)

// Errors of New and Security.
var (
	// ErrConfig: the inter-broker settings are inconsistent or incomplete.
	ErrConfig = errors.New("interbroker: invalid config")
	// ErrNoCredentials: the inter-broker listener is SASL and this broker has no
	// credentials for it.
	ErrNoCredentials = errors.New("interbroker: no SASL credentials for the inter-broker listener")
)

// Security is how this broker reaches the other brokers.
type Security struct {
	// Listener is the inter-broker listener's name ("" when the broker has no
	// listener: the first endpoint of the other broker).
	Listener string
	// Protocol is its security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	Protocol string
	// MechanismName is sasl.mechanism.inter.broker.protocol ("" unless SASL).
	MechanismName string

	tls      *tlsconf.Store // nil unless SSL or SASL_SSL
	trust    bool           // a trust store is configured
	jaasName string         // the config holding the credentials (SASL)
	jaas     *kconfig.JAAS  // nil: none configured
}

// New resolves the inter-broker security from the broker's static configs and
// listeners; see the package doc. It reads the TLS stores when the protocol uses
// TLS.
func New(bi kernel.BrokerInfo, log *slog.Logger) (*Security, error) {
	cfg := bi.StaticConfigs
	s := &Security{Protocol: kernel.ProtocolPlaintext}
	// The kernel resolved each listener's protocol (listener.security.protocol.map).
	names := make([]string, len(bi.Listeners))
	protos := make([]string, len(bi.Listeners))
	for i, l := range bi.Listeners {
		names[i], protos[i] = l.Name, l.Protocol
		if protos[i] == "" { // a BrokerInfo built by hand (tests) before protocols existed
			protos[i] = kernel.ProtocolPlaintext
		}
	}
	var err error
	ibl := strings.TrimSpace(cfg["inter.broker.listener.name"])
	sibp := strings.TrimSpace(cfg["security.inter.broker.protocol"])
	switch {
	case ibl != "" && sibp != "":
		return nil, fmt.Errorf("%w: set only one of inter.broker.listener.name and security.inter.broker.protocol", ErrConfig)
	case ibl != "":
		i := indexOf(names, ibl)
		if i < 0 {
			return nil, fmt.Errorf("%w: inter.broker.listener.name %q is not one of the listeners %v", ErrConfig, ibl, names)
		}
		s.Listener, s.Protocol = ibl, protos[i]
	case sibp != "":
		i := indexOf(protos, sibp)
		if i < 0 {
			return nil, fmt.Errorf("%w: security.inter.broker.protocol %s: no listener has that protocol (listeners %v)", ErrConfig, sibp, names)
		}
		s.Listener, s.Protocol = names[i], protos[i]
	case len(names) > 0:
		s.Listener, s.Protocol = names[0], protos[0]
	}
	if s.usesTLS() {
		if s.tls, err = tlsconf.New(cfg, log); err != nil {
			return nil, fmt.Errorf("inter-broker listener %s (%s): %w", s.Listener, s.Protocol, err)
		}
		s.trust = strings.TrimSpace(cfg["ssl.truststore.location"]) != "" || cfg["ssl.truststore.certificates"] != ""
	}
	if s.usesSASL() {
		s.MechanismName = strings.ToUpper(strings.TrimSpace(cfg["sasl.mechanism.inter.broker.protocol"]))
		if s.MechanismName == "" {
			s.MechanismName = "SCRAM-SHA-512"
		}
		switch s.MechanismName {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return nil, fmt.Errorf("%w: sasl.mechanism.inter.broker.protocol %s: a broker logs in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", ErrConfig, s.MechanismName)
		}
		s.jaasName = kconfig.ListenerJAASConfig(s.Listener, s.MechanismName)
		if v, ok := cfg[s.jaasName]; ok {
			j, err := kconfig.ParseJAAS(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrConfig, s.jaasName, err)
			}
			if !j.Mechanism(s.MechanismName) {
				return nil, fmt.Errorf("%w: %s: login module %s does not serve %s", ErrConfig, s.jaasName, j.LoginModule, s.MechanismName)
			}
			s.jaas = &j
		}
	}
	return s, nil
}

func indexOf(l []string, s string) int {
	for i, v := range l {
		if v == s {
			return i
		}
	}
	return -1
}

func (s *Security) usesTLS() bool {
	return s.Protocol == kernel.ProtocolSSL || s.Protocol == kernel.ProtocolSASLSSL
}

func (s *Security) usesSASL() bool {
	return s.Protocol == kernel.ProtocolSASLPlaintext || s.Protocol == kernel.ProtocolSASLSSL
}

// TLS reports whether brokers talk TLS to each other (SSL or SASL_SSL), and so
// whether the raft port is mutual TLS.
func (s *Security) TLS() bool { return s.usesTLS() }

// ClientTLS is the TLS config of one dial to another broker at host (a host name or
// IP address, checked against its certificate), presenting this broker's certificate;
// nil unless the protocol uses TLS.
func (s *Security) ClientTLS(host string) *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.ClientConfig(host)
}

// Mechanism is the SASL mechanism with this broker's credentials (nil, nil unless
// the protocol is SASL). Without credentials it fails with ErrNoCredentials naming
// the config to set.
func (s *Security) Mechanism() (sasl.Mechanism, error) {
	if !s.usesSASL() {
		return nil, nil
	}
	if err := s.CheckCredentials(); err != nil {
		return nil, err
	}
	switch s.MechanismName {
	case "PLAIN":
		return plain.Auth{User: s.jaas.Username, Pass: s.jaas.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.jaas.Username, Pass: s.jaas.Password}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: s.jaas.Username, Pass: s.jaas.Password}.AsSha512Mechanism(), nil
	}
}

// CheckCredentials fails with ErrNoCredentials, naming the config to set, when the
// inter-broker listener is SASL and this broker has no credentials for it.
func (s *Security) CheckCredentials() error {
	if !s.usesSASL() || s.jaas != nil {
		return nil
	}
	return fmt.Errorf("%w: listener %s is %s with mechanism %s (sasl.mechanism.inter.broker.protocol): set %s, e.g. %s required username=\"broker\" password=\"...\";",
		ErrNoCredentials, s.Listener, s.Protocol, s.MechanismName, s.jaasName, loginModule(s.MechanismName))
}

func loginModule(mech string) string {
	if mech == "PLAIN" {
		return kconfig.PlainLoginModule
	}
	return kconfig.ScramLoginModule
}

// RaftServerTLS is the server config of the raft port: nil unless the protocol uses
// TLS, else mutual TLS (client certificates required, verified against the trust
// store). It needs a key store and a trust store.
func (s *Security) RaftServerTLS() (*tls.Config, error) {
	if s.tls == nil {
		return nil, nil
	}
	if !s.trust {
		return nil, fmt.Errorf("%w: mutual TLS on the raft port (inter-broker listener %s is %s) needs a trust store: set ssl.truststore.location", ErrConfig, s.Listener, s.Protocol)
	}
	base, err := s.tls.ServerConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: the raft port (inter-broker listener %s is %s): %w", ErrConfig, s.Listener, s.Protocol, err)
	}
	return &tls.Config{
		MinVersion: base.MinVersion,
		MaxVersion: base.MaxVersion,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := base.GetConfigForClient(hello)
			if err != nil {
				return nil, err
			}
			// The store's config follows ssl.client.auth, for client listeners;
			// here only brokers get in.
			c = c.Clone()
			c.ClientAuth = tls.RequireAndVerifyClientCert
			return c, nil
		},
	}, nil
}
