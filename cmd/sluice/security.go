package main

// Security flags shared by the Kafka commands (TLS and SASL to the brokers) and the
// admin commands (TLS and HTTP Basic to the admin API): where a password comes from,
// and the client side of TLS.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// credFlags are a user name and a password given by flag, by file or by environment
// variable (flags win, then the file, then the variables).
type credFlags struct {
	user, password, passwordFile string
	envUser, envPassword         string // the variables consulted for what the flags leave unset
}

// register adds --user, --password and --password-file to fs; what says whose
// credentials they are ("admin API", "SASL").
func (c *credFlags) register(fs *flag.FlagSet, what, envUser, envPassword string) {
	c.envUser, c.envPassword = envUser, envPassword
	fs.StringVar(&c.user, "user", "", what+" user (default $"+envUser+")")
	fs.StringVar(&c.password, "password", "", what+" password (default $"+envPassword+")")
	fs.StringVar(&c.passwordFile, "password-file", "", "file holding the "+what+" password (its first line)")
}

// resolve returns the user and password, "" and "" when none was given. A password
// without a user, or a user without a password, is an error saying what to add.
func (c *credFlags) resolve() (user, pass string, err error) {
	user = c.user
	if user == "" {
		user = os.Getenv(c.envUser)
	}
	switch {
	case c.password != "" && c.passwordFile != "":
		return "", "", usageError{"give --password or --password-file, not both"}
	case c.passwordFile != "":
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return "", "", fmt.Errorf("--password-file: %w", err)
		}
		pass, _, _ = strings.Cut(string(b), "\n")
		pass = strings.TrimSuffix(pass, "\r")
	case c.password != "":
		pass = c.password
	default:
		pass = os.Getenv(c.envPassword)
	}
	if user == "" && pass != "" {
		return "", "", usageError{"a password without a user: give --user (or $" + c.envUser + ")"}
	}
	if user != "" && pass == "" {
		return "", "", usageError{"user " + user + " without a password: give --password, --password-file (or $" + c.envPassword + ")"}
	}
	return user, pass, nil
}

// tlsFlags are the client side of TLS: the CAs to trust and a client certificate.
type tlsFlags struct{ caFile, cert, key string }

// register adds --tls-ca, --tls-cert and --tls-key to fs (caDefault is --tls-ca's
// default, from the environment).
func (t *tlsFlags) register(fs *flag.FlagSet, caDefault string) {
	t.caFile = caDefault
	fs.StringVar(&t.caFile, "tls-ca", caDefault, "PEM CA certificates that sign the server's certificate (default: the system's)")
	fs.StringVar(&t.cert, "tls-cert", "", "PEM client certificate for mutual TLS (with --tls-key)")
	fs.StringVar(&t.key, "tls-key", "", "PEM private key of --tls-cert")
}

// set reports whether any TLS file was given.
func (t *tlsFlags) set() bool { return t.caFile != "" || t.cert != "" || t.key != "" }

// config is the client TLS configuration the files describe.
func (t *tlsFlags) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.caFile != "" {
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", t.caFile)
		}
		tc.RootCAs = pool
	}
	if (t.cert == "") != (t.key == "") {
		return nil, usageError{"--tls-cert and --tls-key go together"}
	}
	if t.cert != "" {
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// Environment variables of the Kafka commands' security flags (flags win).
const (
	envSASLMechanism = "SLUICE_SASL_MECHANISM"
	envSASLUser      = "SLUICE_SASL_USER"
	envSASLPassword  = "SLUICE_SASL_PASSWORD"
	envSASLToken     = "SLUICE_SASL_TOKEN_FILE"
	envTLSCA         = "SLUICE_TLS_CA"
)

// kafkaSecurityHelp is the part of the Kafka commands' usage about TLS and SASL.
const kafkaSecurityHelp = `Security (a listener that is SSL, SASL_PLAINTEXT or SASL_SSL):
  --tls                 speak TLS (implied by --tls-ca, --tls-cert and --tls-key)
  --tls-ca FILE         PEM CA certificates that sign the brokers' certificates
                        (default $` + envTLSCA + `, else the system's)
  --tls-cert FILE --tls-key FILE
                        a PEM client certificate and key (mutual TLS)
  --user NAME           log in with SASL as NAME (default $` + envSASLUser + `)
  --password PW         its password (default $` + envSASLPassword + `); other local users can
                        see it in the process list: prefer the file or the variable
  --password-file FILE  read the password from FILE (its first line)
  --sasl-mechanism M    SCRAM-SHA-512 (the default with --user), SCRAM-SHA-256, PLAIN,
                        or OAUTHBEARER (default $` + envSASLMechanism + `)
  --token-file FILE     OAUTHBEARER: a file holding the JWT, read at each login so a
                        refreshed token is picked up (default $` + envSASLToken + `)
`

// kafkaSecurity says how to secure the connections to the brokers.
type kafkaSecurity struct {
	tls       bool
	files     tlsFlags
	cred      credFlags
	mechanism string
	tokenFile string
}

func (s *kafkaSecurity) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.tls, "tls", false, "connect with TLS")
	s.files.register(fs, os.Getenv(envTLSCA))
	s.cred.register(fs, "SASL", envSASLUser, envSASLPassword)
	fs.StringVar(&s.mechanism, "sasl-mechanism", os.Getenv(envSASLMechanism), "SASL mechanism: SCRAM-SHA-512 (default with --user), SCRAM-SHA-256, PLAIN, OAUTHBEARER")
	fs.StringVar(&s.tokenFile, "token-file", os.Getenv(envSASLToken), "OAUTHBEARER: file holding the token")
}

// tlsOn reports whether the connections use TLS.
func (s *kafkaSecurity) tlsOn() bool { return s.tls || s.files.set() }

// opts are the kgo options the flags ask for, and a description of the login for
// error messages ("" when there is none).
func (s *kafkaSecurity) opts() (opts []kgo.Opt, login string, err error) {
	if s.tlsOn() {
		tc, err := s.files.config()
		if err != nil {
			return nil, "", err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	user, pass, err := s.cred.resolve()
	if err != nil {
		return nil, "", err
	}
	mech := strings.ToUpper(strings.TrimSpace(s.mechanism))
	if mech == "" {
		switch {
		case s.tokenFile != "":
			mech = "OAUTHBEARER"
		case user != "":
			mech = "SCRAM-SHA-512"
		default:
			return opts, "", nil
		}
	}
	var m sasl.Mechanism
	switch mech {
	case "PLAIN":
		m = plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	case "OAUTHBEARER":
		if s.tokenFile == "" {
			return nil, "", usageError{"--sasl-mechanism OAUTHBEARER needs --token-file (or $" + envSASLToken + ")"}
		}
		if user != "" {
			return nil, "", usageError{"OAUTHBEARER logs in with the token alone: drop --user and --password"}
		}
		m = oauth.Oauth(s.readToken)
		return append(opts, kgo.SASL(m)), "OAUTHBEARER with the token in " + s.tokenFile, nil
	default:
		return nil, "", usageError{fmt.Sprintf("--sasl-mechanism %q: want SCRAM-SHA-512, SCRAM-SHA-256, PLAIN or OAUTHBEARER", s.mechanism)}
	}
	if s.tokenFile != "" {
		return nil, "", usageError{"--token-file goes with --sasl-mechanism OAUTHBEARER"}
	}
	if user == "" {
		return nil, "", usageError{"--sasl-mechanism " + mech + " needs --user and a password"}
	}
	return append(opts, kgo.SASL(m)), mech + " as " + user, nil
}

// readToken reads the OAUTHBEARER token at each login (a refreshed file is used by
// the next connection).
func (s *kafkaSecurity) readToken(context.Context) (oauth.Auth, error) {
	b, err := os.ReadFile(s.tokenFile)
	if err != nil {
		return oauth.Auth{}, fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return oauth.Auth{}, errors.New("--token-file " + s.tokenFile + " is empty")
	}
	return oauth.Auth{Token: tok}, nil
}
