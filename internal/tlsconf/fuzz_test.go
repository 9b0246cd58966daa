package tlsconf

import (
	"errors"
	"testing"
)

// FuzzParseRules: any string parses or fails cleanly, and a parsed mapper maps any name
// or says ErrNoRule.
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{
		"", "DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L, RULE:.*/x/U ,DEFAULT",
		`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, "RULE:a/b", ",,", "RULE:(?P<u>.)/${u}/",
	} {
		f.Add(s, "CN=alice,OU=eng,O=Acme,C=US")
	}
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParseRules(rules)
		if err != nil {
			return
		}
		if _, err := m.Name(dn); err != nil && !errors.Is(err, ErrNoRule) {
			t.Fatalf("Name(%q) with %q: %v", dn, rules, err)
		}
	})
}
