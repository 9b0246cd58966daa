package kconfig

import (
	"errors"
	"fmt"
	"strings"
)

// Login modules of a broker's SASL client credentials (sasl.jaas.config).
const (
	PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// maxJAASLen bounds a sasl.jaas.config value.
const maxJAASLen = 64 << 10

// ErrJAAS: a sasl.jaas.config value does not parse. Its message never holds the
// value (a password).
var ErrJAAS = errors.New("invalid sasl.jaas.config")

// JAAS is a parsed sasl.jaas.config holding a broker's own SASL credentials.
type JAAS struct {
	LoginModule string // PlainLoginModule or ScramLoginModule
	Username    string
	Password    string
}

// ParseJAAS parses the one shape of sasl.jaas.config a broker uses for its own
// credentials, with Kafka's syntax and nothing more:
//
//	org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="secret";
//
// One login module (PlainLoginModule or ScramLoginModule), the flag "required", then
// the options username and password, each once, in any order, each value in double
// quotes (a backslash escapes the next character), then ";" and nothing but blanks.
// Anything else is refused with an error wrapping ErrJAAS that names the problem but
// never quotes a value.
func ParseJAAS(s string) (JAAS, error) {
	if len(s) > maxJAASLen {
		return JAAS{}, fmt.Errorf("%w: longer than %d bytes", ErrJAAS, maxJAASLen)
	}
	p := jaasParser{s: s}
	var j JAAS
	switch j.LoginModule = p.word(); j.LoginModule {
	case PlainLoginModule, ScramLoginModule:
	case "":
		return JAAS{}, p.fail("want a login module class")
	default:
		return JAAS{}, p.fail("login module %q is not %s or %s", j.LoginModule, PlainLoginModule, ScramLoginModule)
	}
	if flag := p.word(); flag != "required" {
		return JAAS{}, p.fail("want the flag \"required\" after the login module")
	}
	seen := map[string]bool{}
	for {
		p.blanks()
		if p.eat(';') {
			break
		}
		key := p.word()
		if key == "" {
			return JAAS{}, p.fail("want an option name or \";\"")
		}
		if key != "username" && key != "password" {
			// Not quoted: after a broken quote the "name" may be part of a password.
			return JAAS{}, p.fail("unknown option (want username and password)")
		}
		if seen[key] {
			return JAAS{}, p.fail("option %s given twice", key)
		}
		seen[key] = true
		p.blanks()
		if !p.eat('=') {
			return JAAS{}, p.fail("want \"=\" after %s", key)
		}
		p.blanks()
		v, ok := p.quoted()
		if !ok {
			return JAAS{}, p.fail("the value of %s must be a double-quoted string", key)
		}
		if key == "username" {
			j.Username = v
		} else {
			j.Password = v
		}
	}
	p.blanks()
	if p.i != len(p.s) {
		return JAAS{}, p.fail("text after \";\" (one login module only)")
	}
	for _, k := range []string{"username", "password"} {
		if !seen[k] {
			return JAAS{}, fmt.Errorf("%w: option %s is missing", ErrJAAS, k)
		}
	}
	if j.Username == "" {
		return JAAS{}, fmt.Errorf("%w: username is empty", ErrJAAS)
	}
	return j, nil
}

// Mechanism returns whether j's login module serves the SASL mechanism mech
// (PLAIN: PlainLoginModule; SCRAM-SHA-256 and SCRAM-SHA-512: ScramLoginModule).
func (j JAAS) Mechanism(mech string) bool {
	switch strings.ToUpper(mech) {
	case "PLAIN":
		return j.LoginModule == PlainLoginModule
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		return j.LoginModule == ScramLoginModule
	}
	return false
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) fail(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrJAAS, p.i, fmt.Sprintf(format, args...))
}

func isJAASBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *jaasParser) blanks() {
	for p.i < len(p.s) && isJAASBlank(p.s[p.i]) {
		p.i++
	}
}

func (p *jaasParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// word reads blanks then a run of letters, digits, '.', '_', '-' and '$' (a Java
// class or an option name); "" when there is none.
func (p *jaasParser) word() string {
	p.blanks()
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '$' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i]
}

// quoted reads a double-quoted string; a backslash takes the next byte literally.
func (p *jaasParser) quoted() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch c {
		case '"':
			return b.String(), true
		case '\\':
			if p.i == len(p.s) {
				return "", false
			}
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}
