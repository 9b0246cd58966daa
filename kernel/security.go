package kernel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf"
)

// Security protocols of a listener (listener.security.protocol.map).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// tlsHandshakeTimeout bounds a client's TLS handshake (on its connection's goroutine).
const tlsHandshakeTimeout = 10 * time.Second

func isProtocol(p string) bool {
	switch p {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		return true
	}
	return false
}

func protocolTLS(p string) bool { return p == ProtocolSSL || p == ProtocolSASLSSL }

// listenerProtocols resolves each listener's security protocol from
// listener.security.protocol.map (NAME:PROTOCOL pairs, comma separated; unset maps
// each protocol name to itself). A listener named in the map takes its protocol; one
// that is not must be named after a protocol. Names and protocols compare in upper
// case, as in Kafka.
func listenerProtocols(configs map[string]string, ls []ListenerConfig) ([]string, error) {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return ListenerProtocols(configs, names)
}

// ListenerProtocols is the security protocol of each named listener under the broker
// configs (listenerProtocols' rule; BrokerInfo.Listeners carries the result). Tests of
// modules that build a BrokerInfo by hand use it to fill ListenerInfo.Protocol.
func ListenerProtocols(configs map[string]string, names []string) ([]string, error) {
	m := map[string]string{}
	if v := strings.TrimSpace(configs["listener.security.protocol.map"]); v != "" {
		for _, pair := range strings.Split(v, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			name, proto, ok := strings.Cut(pair, ":")
			// Kafka compares listener names and protocols in upper case.
			name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
			if !ok || name == "" {
				return nil, fmt.Errorf("config: listener.security.protocol.map: %q is not NAME:PROTOCOL", pair)
			}
			if !isProtocol(proto) {
				return nil, fmt.Errorf("config: listener.security.protocol.map: listener %s: unknown security protocol %q (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", name, proto)
			}
			if _, dup := m[name]; dup {
				return nil, fmt.Errorf("config: listener.security.protocol.map: listener %s mapped twice", name)
			}
			m[name] = proto
		}
	}
	out := make([]string, len(names))
	for i, name := range names {
		p, ok := m[strings.ToUpper(name)]
		switch {
		case ok:
		case isProtocol(strings.ToUpper(name)):
			p = strings.ToUpper(name)
		default:
			return nil, fmt.Errorf("config: listener %q has no security protocol: name it in listener.security.protocol.map (e.g. %s:SASL_SSL) or name it after a protocol", name, name)
		}
		out[i] = p
	}
	return out, nil
}

// listener is one bound client listener.
type listener struct {
	name     string
	protocol string
	tls      *tls.Config // nil unless SSL or SASL_SSL
}

// setupTLS builds the TLS store when a listener (or the admin listener) needs it, and
// the principal mapper of SSL listeners.
func (k *Kernel) setupTLS() error {
	need := k.cfg.AdminTLS
	for _, p := range k.protocols {
		need = need || protocolTLS(p)
	}
	if !need {
		return nil
	}
	st, err := tlsconf.New(k.cfg.Configs, k.log.With("component", "tls"))
	if err != nil {
		return fmt.Errorf("config: TLS: %w", err)
	}
	srv, err := st.ServerConfig()
	if err != nil {
		for i, p := range k.protocols {
			if protocolTLS(p) {
				return fmt.Errorf("config: listener %s (%s): %w", k.cfg.Listeners[i].Name, p, err)
			}
		}
		return fmt.Errorf("config: admin_tls: %w", err)
	}
	rules := "DEFAULT"
	if v, ok := k.cfg.Configs["ssl.principal.mapping.rules"]; ok {
		rules = v
	}
	if k.mapper, err = tlsconf.ParseRules(rules); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	k.tlsStore, k.tlsServer = st, srv
	return nil
}

// handshake runs the TLS handshake of a connection on its own goroutine, bounded by
// tlsHandshakeTimeout, and sets ConnInfo.TLS and, on an SSL listener with a verified
// client certificate, the principal. An error closes the connection.
func (c *conn) handshake(ctx context.Context, tc *tls.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, c.k.tlsTimeout)
	defer cancel()
	c.dmu.Lock()
	if c.stopped {
		c.dmu.Unlock()
		return errStopped
	}
	// Under dmu, so a stopReading (shutdown) that follows is not undone.
	_ = tc.SetDeadline(time.Now().Add(c.k.tlsTimeout))
	c.dmu.Unlock()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.k.mTLSFailed.Add(1)
		return fmt.Errorf("tls handshake: %w", err)
	}
	_ = tc.SetWriteDeadline(time.Time{}) // the reader arms its own read deadline
	cs := tc.ConnectionState()
	c.info.TLS = &cs
	if c.info.Protocol == ProtocolSSL && len(cs.VerifiedChains) > 0 {
		p, err := c.k.certPrincipal(&cs)
		if err != nil {
			c.k.mTLSFailed.Add(1)
			return err
		}
		c.info.Principal = p
	}
	return nil
}

// certPrincipal is Kafka's default principal of a TLS client: "User:" and the mapped
// subject of its verified certificate.
func (k *Kernel) certPrincipal(cs *tls.ConnectionState) (Principal, error) {
	return k.certificatePrincipal(cs.PeerCertificates[0])
}

// certificatePrincipal maps a verified client certificate to its principal with
// ssl.principal.mapping.rules; the Kafka listeners and the admin API share it.
func (k *Kernel) certificatePrincipal(cert *x509.Certificate) (Principal, error) {
	dn, err := tlsconf.SubjectDN(cert)
	if err != nil {
		return Principal{}, err
	}
	if k.mapper == nil { // no TLS listener: DEFAULT, the subject as it is
		return Principal{Type: "User", Name: dn}, nil
	}
	name, err := k.mapper.Name(dn)
	if err != nil {
		return Principal{}, fmt.Errorf("client certificate: %w", err)
	}
	return Principal{Type: "User", Name: name}, nil
}
