package tlsconf

import (
	"errors"
	"strings"
	"testing"
)

func TestMapperRules(t *testing.T) {
	for _, tc := range []struct {
		name, rules, dn, want string
		noRule                bool
	}{
		{name: "default", rules: "DEFAULT", dn: "CN=alice,OU=eng,O=Acme,C=US", want: "CN=alice,OU=eng,O=Acme,C=US"},
		{name: "cn only", rules: "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
			dn: "CN=kafka-svc,OU=ServiceUsers,O=Acme,C=US", want: "kafka-svc"},
		{name: "falls to default", rules: "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
			dn: "CN=bob,OU=People,O=Acme", want: "CN=bob,OU=People,O=Acme"},
		{name: "lower case", rules: "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
			dn: "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", want: "duke@javasoft"},
		{name: "upper case", rules: "RULE:^CN=(.*?),OU=(.*?)$/$1/U", dn: "CN=duke,OU=x", want: "DUKE"},
		{name: "blanks around rules", rules: "  RULE:^CN=(.*?),.*$/$1/L , DEFAULT ", dn: "CN=Ann,O=x", want: "ann"},
		{name: "escaped slash", rules: `RULE:^CN=(.*?)\/(.*?),.*$/$1\/$2/`, dn: "CN=a/b,O=x", want: "a/b"},
		{name: "comma in pattern", rules: "RULE:^CN=([^,]*),OU=eng,.*$/eng:$1/,RULE:^CN=([^,]*),.*$/other:$1/",
			dn: "CN=al,OU=ops,O=x", want: "other:al"},
		{name: "escaped comma kept", rules: `RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, dn: `CN=Kafka\, Server,OU=S`, want: `Kafka\, Server`},
		{name: "group digits as java", rules: "RULE:^CN=(a).*$/$12/", dn: "CN=abc", want: "a2"},
		{name: "named group", rules: "RULE:^CN=(?P<u>[^,]*).*$/${u}!/", dn: "CN=zed,O=x", want: "zed!"},
		{name: "literal dollar", rules: `RULE:^CN=(.*)$/\$$1/`, dn: "CN=x", want: "$x"},
		{name: "partial match does not apply", rules: "RULE:CN=alice/a/", dn: "CN=alice,O=x", noRule: true},
		{name: "no rules", rules: "", dn: "CN=x", noRule: true},
		{name: "empty rules skipped", rules: "RULE:^CN=x$/y/,,DEFAULT", dn: "CN=z", want: "CN=z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseRules(tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Name(tc.dn)
			if tc.noRule {
				if !errors.Is(err, ErrNoRule) || !strings.Contains(err.Error(), "no rules apply to "+tc.dn) {
					t.Fatalf("got %q, %v; want ErrNoRule", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestMapperRulesInvalid(t *testing.T) {
	for _, rules := range []string{
		"DEFAULTX",
		"RULE:abc",
		"RULE:a/b",
		"RULE:a/b/LU",
		"RULE:a/b/X",
		"FOO",
		"DEFAULT,BAR",
		"RULE:(/x/",         // bad regexp
		"RULE:a/$2/",        // no such group
		"RULE:a/x\\",        // unterminated
		"RULE:a/$/",         // bad reference
		"RULE:(a)/${nope}/", // no such name
	} {
		if _, err := ParseRules(rules); err == nil {
			t.Errorf("ParseRules(%q) succeeded", rules)
		}
	}
}
