package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// securityFlags are how the clients of a run reach a TLS or SASL listener: the same
// knobs as a Kafka client's security.protocol, ssl.* and sasl.* settings.
type securityFlags struct {
	tls      bool
	caFile   string
	certFile string
	keyFile  string
	mech     string
	user     string
	password string

	opts []kgo.Opt // built by finish
}

func (s *securityFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.tls, "tls", false, "connect over TLS (implied by --tls-ca, --tls-cert)")
	fs.StringVar(&s.caFile, "tls-ca", "", "PEM file of the CA certificates that verify the broker (default: the system's)")
	fs.StringVar(&s.certFile, "tls-cert", "", "PEM file of a client certificate chain, for mTLS (with --tls-key)")
	fs.StringVar(&s.keyFile, "tls-key", "", "PEM file of the client certificate's private key")
	fs.StringVar(&s.mech, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (none when empty)")
	fs.StringVar(&s.user, "sasl-user", "", "SASL user name")
	fs.StringVar(&s.password, "sasl-password", "", "SASL password (default: $SLUICE_BENCH_SASL_PASSWORD)")
}

// finish checks the flags and builds the client options.
func (s *securityFlags) finish() error {
	if (s.certFile == "") != (s.keyFile == "") {
		return usageErr("--tls-cert and --tls-key go together")
	}
	if s.caFile != "" || s.certFile != "" {
		s.tls = true
	}
	if s.tls {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.caFile != "" {
			pem, err := os.ReadFile(s.caFile)
			if err != nil {
				return usageErr("--tls-ca: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return usageErr("--tls-ca %s: no PEM certificate in it", s.caFile)
			}
		}
		if s.certFile != "" {
			pair, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
			if err != nil {
				return usageErr("--tls-cert/--tls-key: %v", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		s.opts = append(s.opts, kgo.DialTLSConfig(cfg))
	}
	if s.password == "" {
		s.password = os.Getenv("SLUICE_BENCH_SASL_PASSWORD")
	}
	if s.mech == "" {
		if s.user != "" {
			return usageErr("--sasl-user needs --sasl-mechanism")
		}
		return nil
	}
	if s.user == "" {
		return usageErr("--sasl-mechanism %s needs --sasl-user", s.mech)
	}
	var m sasl.Mechanism
	switch strings.ToUpper(s.mech) {
	case "PLAIN":
		m = plain.Auth{User: s.user, Pass: s.password}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: s.user, Pass: s.password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: s.user, Pass: s.password}.AsSha512Mechanism()
	default:
		return usageErr("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.mech)
	}
	s.opts = append(s.opts, kgo.SASL(m))
	return nil
}

// addConfig records the security settings (never the password) in the report.
func (s *securityFlags) addConfig(m map[string]any) {
	if s.tls {
		m["tls"] = true
		if s.certFile != "" {
			m["tls_client_cert"] = true
		}
	}
	if s.mech != "" {
		m["sasl_mechanism"] = strings.ToUpper(s.mech)
	}
}
