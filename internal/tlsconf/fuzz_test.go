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

// FuzzFormatDN: a client certificate's subject comes off the network; any bytes
// format or fail cleanly.
func FuzzFormatDN(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x30, 0x00})
	// CN=alice,O=Acme (most specific last in DER)
	f.Add([]byte{0x30, 0x20, 0x31, 0x0d, 0x30, 0x0b, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x0c, 0x04, 'A', 'c', 'm', 'e',
		0x31, 0x0f, 0x30, 0x0d, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x05, 'a', 'l', 'i', 'c', 'e'})
	f.Fuzz(func(t *testing.T, der []byte) {
		_, _ = FormatDN(der)
	})
}

// FuzzParseKeyStore: a key store file that is half written or garbage fails cleanly.
func FuzzParseKeyStore(f *testing.F) {
	f.Add([]byte(""), "")
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nMIGHAgEA\n-----END PRIVATE KEY-----\n"), "")
	f.Add([]byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIGHAgEA\n-----END ENCRYPTED PRIVATE KEY-----\n"), "pw")
	f.Fuzz(func(t *testing.T, b []byte, pw string) {
		if c, err := parseKeyStore(b, pw); err == nil && c == nil {
			t.Fatal("no error and no certificate")
		}
		_, _ = parseTrustStore(b)
		_ = inlinePEM(string(b))
	})
}
