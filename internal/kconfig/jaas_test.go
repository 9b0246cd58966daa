package kconfig

import (
	"errors"
	"strings"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     JAAS
		err      string // "" = parses
	}{
		{"scram", `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="secret";`,
			JAAS{ScramLoginModule, "broker", "secret"}, ""},
		{"plain, reordered, blanks", "  org.apache.kafka.common.security.plain.PlainLoginModule\n\trequired password = \"p w\"\n username=\"u\" ;  \n",
			JAAS{PlainLoginModule, "u", "p w"}, ""},
		{"escapes", `org.apache.kafka.common.security.scram.ScramLoginModule required username="a\"b" password="c\\d;";`,
			JAAS{ScramLoginModule, `a"b`, `c\d;`}, ""},
		{"empty password", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="";`,
			JAAS{PlainLoginModule, "u", ""}, ""},
		{"empty", ``, JAAS{}, "login module class"},
		{"other module", `com.sun.security.auth.module.Krb5LoginModule required username="u" password="p";`, JAAS{}, "is not"},
		{"optional flag", `org.apache.kafka.common.security.scram.ScramLoginModule optional username="u" password="p";`, JAAS{}, "required"},
		{"no semicolon", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p"`, JAAS{}, "option name"},
		{"unquoted", `org.apache.kafka.common.security.scram.ScramLoginModule required username=u password="p";`, JAAS{}, "double-quoted"},
		{"unterminated", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u password="p;`, JAAS{}, "unknown option"},
		{"dangling escape", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u\`, JAAS{}, "double-quoted"},
		{"twice", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" username="v" password="p";`, JAAS{}, "twice"},
		{"unknown option", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p" user_admin="x";`, JAAS{}, "unknown option"},
		{"no password", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u";`, JAAS{}, "password is missing"},
		{"empty username", `org.apache.kafka.common.security.scram.ScramLoginModule required username="" password="p";`, JAAS{}, "username is empty"},
		{"two modules", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p"; org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`, JAAS{}, "one login module"},
		{"no equals", `org.apache.kafka.common.security.scram.ScramLoginModule required username "u" password="p";`, JAAS{}, "want \"=\""},
		{"too long", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="` + strings.Repeat("x", maxJAASLen) + `";`, JAAS{}, "longer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseJAAS(tc.in)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrJAAS) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want ErrJAAS containing %q", err, tc.err)
			}
			if strings.Contains(err.Error(), `"p"`) || strings.Contains(err.Error(), `"x"`) || strings.Contains(err.Error(), "secret") {
				t.Fatalf("error shows a password: %v", err)
			}
		})
	}
}

// TestListenerJAASConfig: the listener-prefixed credentials are a static, sensitive
// broker config that is never described and cannot be set at runtime.
func TestListenerJAASConfig(t *testing.T) {
	name := ListenerJAASConfig("INTERNAL", "SCRAM-SHA-512")
	if name != "listener.name.internal.scram-sha-512.sasl.jaas.config" {
		t.Fatalf("name %q", name)
	}
	scramV := `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="hunter2";`
	if err := ValidateStaticBroker(name, scramV); err != nil {
		t.Fatal(err)
	}
	if !IsBrokerConfig(name) {
		t.Fatal("not a broker config")
	}
	if typ, ok := BrokerConfigType(name); !ok || typ != TypePassword {
		t.Fatalf("type %v %v", typ, ok)
	}
	err := ValidateStaticBroker(ListenerJAASConfig("INTERNAL", "PLAIN"), scramV)
	if !errors.Is(err, ErrInvalidValue) || !strings.Contains(err.Error(), "does not serve PLAIN") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("scram module for PLAIN: %v", err)
	}
	err = ValidateStaticBroker(name, `org.apache.kafka.common.security.scram.ScramLoginModule required username=broker password="hunter2";`)
	if !errors.Is(err, ErrInvalidValue) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad value: %v", err)
	}
	for _, bad := range []string{
		"listener.name.internal.gssapi.sasl.jaas.config",
		"listener.name.INTERNAL.scram-sha-512.sasl.jaas.config",
		"listener.name..plain.sasl.jaas.config",
		"listener.name.internal.sasl.jaas.config",
		"listener.name.a.b.plain.sasl.jaas.config",
	} {
		if err := ValidateStaticBroker(bad, scramV); !errors.Is(err, ErrUnknownConfig) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	if err := ValidateBroker(name, scramV); !errors.Is(err, ErrReadOnly) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("dynamic: %v", err)
	}
	static := map[string]string{name: scramV}
	for _, e := range DescribeBroker(static, map[string]string{name: "x"}, nil) {
		if strings.Contains(e.Name, "jaas") || (e.Value != nil && strings.Contains(*e.Value, "hunter2")) {
			t.Fatalf("described: %+v", e)
		}
	}
	if m := MergeBroker(static, map[string]string{name: "dynamic"}, nil); m[name] != scramV {
		t.Fatalf("a dynamic value replaced the static credentials: %q", m[name])
	}
}

// FuzzParseJAAS: the parser never panics, refuses with ErrJAAS, never echoes the
// input in an error, and what it accepts survives a round trip through Kafka's
// syntax.
func FuzzParseJAAS(f *testing.F) {
	for _, s := range []string{
		``, `;`, `org.apache.kafka.common.security.scram.ScramLoginModule`,
		`org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="secret";`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required password="a\"\\b" username="u";`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p"; x`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="u\`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJAAS(s)
		if err != nil {
			if !errors.Is(err, ErrJAAS) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if j.Username == "" || (j.LoginModule != PlainLoginModule && j.LoginModule != ScramLoginModule) {
			t.Fatalf("%q accepted as %+v", s, j)
		}
		q := func(v string) string {
			return `"` + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `"`, `\"`) + `"`
		}
		again, err := ParseJAAS(j.LoginModule + " required username=" + q(j.Username) + " password=" + q(j.Password) + ";")
		if err != nil || again != j {
			t.Fatalf("%q: round trip %+v, %v; want %+v", s, again, err, j)
		}
	})
}
