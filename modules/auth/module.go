package auth

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// ACLInfo describes the auth.acl module.
func ACLInfo() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: "auth.acl", New: func() kernel.Module { return new(Module) }}
}

// Module is the "auth.acl" module: SASL authentication (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512, OAUTHBEARER) against credentials in the metadata log, and Kafka's
// ACLs (StandardAuthorizer semantics) as the broker's kernel.Authorizer.
//
// Its parts keep their own state, each in its own file:
//   - acls.go: the ACL bindings, the authorizer and the ACL APIs (29, 30, 31);
//   - credentials.go: SCRAM credentials, PLAIN and SCRAM exchanges, bootstrap users
//     and the credential APIs (50, 51);
//   - oauthbearer.go: OAUTHBEARER tokens checked against a JWKS file.
//
// ACLs and credentials live in the metadata log as extension records (one namespace
// each), so every broker applies the same ones; each part rebuilds its index from each
// new image.
type Module struct {
	// Users are bootstrap users, usable before any credential is stored: each gets
	// SCRAM-SHA-256 and SCRAM-SHA-512 credentials derived at start (kept in memory,
	// never written to the log). A credential for the same user and mechanism stored
	// with AlterUserScramCredentials takes precedence, so a bootstrap password can be
	// rotated.
	Users []UserConfig `yaml:"users"`

	log    *slog.Logger
	broker kernel.BrokerInfo
	meta   kernel.Metadata
	ext    kernel.ExtensionStore
	mechs  []string // sasl.enabled.mechanisms, checked
	unsub  func()

	acl   aclState
	creds credState
	oauth oauthState
}

// UserConfig is one bootstrap user.
type UserConfig struct {
	Name     string `yaml:"name"`
	Password string `yaml:"password"`
}

// Mechanism names, as SaslHandshake spells them.
const (
	MechPlain       = "PLAIN"
	MechSCRAM256    = "SCRAM-SHA-256"
	MechSCRAM512    = "SCRAM-SHA-512"
	MechOAuthBearer = "OAUTHBEARER"
)

var knownMechs = []string{MechPlain, MechSCRAM256, MechSCRAM512, MechOAuthBearer}

// Provision looks up the metadata log and sets up each part from the broker configs.
func (m *Module) Provision(ctx kernel.Context) error {
	m.log = ctx.Logger()
	m.broker = ctx.Broker()
	var err error
	if m.meta, err = kernel.LookupAs[kernel.Metadata](ctx, "metadata"); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if m.ext, err = kernel.LookupAs[kernel.ExtensionStore](ctx, "metadata"); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if m.mechs, err = parseMechanisms(m.broker.StaticConfigs["sasl.enabled.mechanisms"]); err != nil {
		return err
	}
	if err := m.acl.provision(m, ctx); err != nil {
		return err
	}
	if err := m.creds.provision(m, ctx); err != nil {
		return err
	}
	if slices.Contains(m.mechs, MechOAuthBearer) {
		if err := m.oauth.provision(m, ctx); err != nil {
			return err
		}
	}
	return nil
}

// parseMechanisms checks sasl.enabled.mechanisms (unset: SCRAM-SHA-256,SCRAM-SHA-512).
func parseMechanisms(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return []string{MechSCRAM256, MechSCRAM512}, nil
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(knownMechs, s) {
			return nil, fmt.Errorf("auth: sasl.enabled.mechanisms: unsupported mechanism %q (supported: %s)", s, strings.Join(knownMechs, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// Start follows the metadata image: each part rebuilds its view of the ACLs and
// credentials from every new image, before the broker accepts connections.
func (m *Module) Start(context.Context) error {
	m.unsub = m.meta.Subscribe(func(im *kernel.Image) {
		m.acl.apply(im)
		m.creds.apply(im)
	})
	return nil
}

// Stop stops following the image.
func (m *Module) Stop(context.Context) error {
	if m.unsub != nil {
		m.unsub()
		m.unsub = nil
	}
	return nil
}

// Authorize is Kafka's StandardAuthorizer decision (acls.go).
func (m *Module) Authorize(ctx context.Context, p kernel.Principal, host string, op kernel.Operation, r kernel.Resource) bool {
	return m.acl.authorize(p, host, op, r)
}

// Mechanisms lists sasl.enabled.mechanisms.
func (m *Module) Mechanisms() []string { return slices.Clone(m.mechs) }

// StartSASL begins an exchange of one of the enabled mechanisms.
func (m *Module) StartSASL(mechanism string, c *kernel.ConnInfo) (kernel.SASLExchange, error) {
	if !slices.Contains(m.mechs, mechanism) {
		return nil, fmt.Errorf("SASL mechanism %q is not enabled", mechanism)
	}
	switch mechanism {
	case MechPlain:
		return m.creds.startPlain(c)
	case MechSCRAM256, MechSCRAM512:
		return m.creds.startSCRAM(mechanism, c)
	case MechOAuthBearer:
		return m.oauth.start(c)
	}
	return nil, fmt.Errorf("SASL mechanism %q is not supported", mechanism)
}

// CheckPassword verifies a password against the SCRAM credentials (credentials.go).
func (m *Module) CheckPassword(ctx context.Context, user, password string) (kernel.Principal, bool) {
	return m.creds.checkPassword(user, password)
}

var (
	_ kernel.Authorizer    = (*Module)(nil)
	_ kernel.Authenticator = (*Module)(nil)
)
