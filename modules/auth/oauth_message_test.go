package auth

import (
	"context"
	"crypto/elliptic"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/sluicehq/sluice/kernel"
)

// encodeSASLName is decodeSASLName's inverse.
func encodeSASLName(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

// encodeOAuthMessage writes m as a client would (extensions sorted).
func encodeOAuthMessage(m oauthMessage) []byte {
	var b strings.Builder
	b.WriteString("n,")
	if m.authzid != "" {
		b.WriteString("a=" + encodeSASLName(m.authzid))
	}
	b.WriteString(",\x01auth=Bearer " + m.token + "\x01")
	for _, k := range slices.Sorted(maps.Keys(m.extensions)) {
		b.WriteString(k + "=" + m.extensions[k] + "\x01")
	}
	b.WriteString("\x01")
	return []byte(b.String())
}

func TestParseOAuthMessage(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want *oauthMessage // nil: refused
	}{
		{"minimal", "n,,\x01auth=Bearer abc\x01\x01", &oauthMessage{token: "abc"}},
		{"authzid with escapes", "n,a=a=2Cb=3Dc,\x01auth=Bearer abc\x01\x01", &oauthMessage{authzid: "a,b=c", token: "abc"}},
		{"utf-8 authzid", "n,a=zoë,\x01auth=Bearer abc\x01\x01", &oauthMessage{authzid: "zoë", token: "abc"}},
		{"extensions", "n,,\x01x=1\x01auth=Bearer a.b-c_d~e+f/g==\x01traceId=a b\tc\x01\x01",
			&oauthMessage{token: "a.b-c_d~e+f/g==", extensions: map[string]string{"x": "1", "traceId": "a b\tc"}}},
		{"scheme case and spaces", "n,,\x01auth=BEARER   abc\x01\x01", &oauthMessage{token: "abc"}},
		{"empty", "", nil},
		{"only the control byte", "\x01", nil},
		{"short header", "n,", nil},
		{"no separator", "n,,auth=Bearer abc\x01\x01", nil},
		{"channel binding y", "y,,\x01auth=Bearer abc\x01\x01", nil},
		{"channel binding p", "p=tls-unique,,\x01auth=Bearer abc\x01\x01", nil},
		{"unterminated authzid", "n,a=alice\x01auth=Bearer abc\x01\x01", nil},
		{"empty authzid", "n,a=,\x01auth=Bearer abc\x01\x01", nil},
		{"bad escape", "n,a=a=2D,\x01auth=Bearer abc\x01\x01", nil},
		{"short escape", "n,a=a=2,\x01auth=Bearer abc\x01\x01", nil},
		{"control in authzid", "n,a=a\tb,\x01auth=Bearer abc\x01\x01", nil},
		{"not UTF-8 authzid", "n,a=\xff,\x01auth=Bearer abc\x01\x01", nil},
		{"other GS2 field", "n,b=x,\x01auth=Bearer abc\x01\x01", nil},
		{"no auth", "n,,\x01x=1\x01\x01", nil},
		{"no pairs", "n,,\x01\x01", nil},
		{"one final separator missing", "n,,\x01auth=Bearer abc\x01", nil},
		{"trailing bytes", "n,,\x01auth=Bearer abc\x01\x01\x01", nil},
		{"auth twice", "n,,\x01auth=Bearer abc\x01auth=Bearer abc\x01\x01", nil},
		{"extension twice", "n,,\x01x=1\x01x=2\x01auth=Bearer abc\x01\x01", nil},
		{"pair without =", "n,,\x01auth\x01\x01", nil},
		{"empty key", "n,,\x01=v\x01auth=Bearer abc\x01\x01", nil},
		{"non-alpha key", "n,,\x01x1=v\x01auth=Bearer abc\x01\x01", nil},
		{"long key", "n,,\x01" + strings.Repeat("k", maxOAuthKey+1) + "=v\x01auth=Bearer abc\x01\x01", nil},
		{"empty value", "n,,\x01x=\x01auth=Bearer abc\x01\x01", nil},
		{"control in value", "n,,\x01x=a\x00b\x01auth=Bearer abc\x01\x01", nil},
		{"basic scheme", "n,,\x01auth=Basic abc\x01\x01", nil},
		{"no token", "n,,\x01auth=Bearer \x01\x01", nil},
		{"no space", "n,,\x01auth=Bearerabc\x01\x01", nil},
		{"bad token char", "n,,\x01auth=Bearer a!c\x01\x01", nil},
		{"= inside the token", "n,,\x01auth=Bearer a=b\x01\x01", nil},
		{"only padding", "n,,\x01auth=Bearer ==\x01\x01", nil},
		{"two messages back to back", "n,,\x01auth=Bearer abc\x01\x01n,,\x01auth=Bearer abc\x01\x01", nil},
		{"too large", "n,,\x01auth=Bearer " + strings.Repeat("a", maxOAuthMessage) + "\x01\x01", nil},
		{"too many pairs", "n,,\x01" + strings.Repeat("x=1\x01", 1) + func() string {
			var b strings.Builder
			for i := 0; i < maxOAuthPairs; i++ {
				b.WriteString(strings.Repeat("k", i%20+1) + string(rune('a'+i/20)) + "=1\x01")
			}
			return b.String()
		}() + "auth=Bearer abc\x01\x01", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseOAuthMessage([]byte(tc.msg))
			if tc.want == nil {
				if err == nil {
					t.Fatalf("accepted: %+v", got)
				}
				if !errors.Is(err, errOAuthMessage) {
					t.Fatalf("error %v does not wrap errOAuthMessage", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.authzid != tc.want.authzid || got.token != tc.want.token || !maps.Equal(got.extensions, tc.want.extensions) {
				t.Fatalf("got %+v, want %+v", got, *tc.want)
			}
		})
	}
}

// TestParseOAuthMessageFranzGo parses what franz-go's client sends.
func TestParseOAuthMessageFranzGo(t *testing.T) {
	a := oauth.Auth{Zid: "svc", Token: "aaa.bbb.ccc", Extensions: map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}}
	_, first, err := a.AsMechanism().Authenticate(context.Background(), "b:9092")
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseOAuthMessage(first)
	if err != nil {
		t.Fatal(err)
	}
	if m.authzid != "svc" || m.token != "aaa.bbb.ccc" || !maps.Equal(m.extensions, a.Extensions) {
		t.Fatalf("parsed %+v", m)
	}
	if got := encodeOAuthMessage(m); string(got) != string(first) {
		t.Fatalf("re-encoded %q, franz-go sent %q", got, first)
	}
}

// FuzzOAuthBearerMessage: the parser never panics, stays within its bounds, and what
// it accepts re-encodes to a message that parses to the same thing. Each message also
// goes through a whole exchange (go-jose's parsing and checks included), which must
// not panic and accepts only the token the fuzzer was given, signed for alice.
func FuzzOAuthBearerMessage(f *testing.F) {
	key := newECKey(f, "k1", elliptic.P256(), jose.ES256)
	fx := newOAuthFixture(f, nil, key)
	fx.m.oauth.log = slog.New(slog.DiscardHandler) // a debug line per refusal adds up
	c := claims("alice", time.Now())
	c["exp"] = time.Now().Add(24 * time.Hour).Unix()
	valid := "n,,\x01auth=Bearer " + key.sign(f, "k1", c) + "\x01\x01"
	f.Add([]byte(valid))
	for _, s := range []string{
		"",
		"n,",
		"n,,\x01auth=Bearer abc\x01\x01",
		"n,a=alice,\x01auth=Bearer eyJ.eyJ.sig\x01x=1\x01\x01",
		"n,,\x01auth=Bearer abc\x01\x01n,,\x01auth=Bearer abc\x01\x01",
	} { // more, the largest message among them, in testdata/fuzz/FuzzOAuthBearerMessage
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		x, err := fx.m.StartSASL(MechOAuthBearer, &kernel.ConnInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if _, done, err := x.Step(context.Background(), msg); err == nil {
			if !done || x.Principal() != (kernel.Principal{Type: "User", Name: "alice"}) {
				t.Fatalf("accepted: done %v, principal %v", done, x.Principal())
			}
		}
		m, err := parseOAuthMessage(msg)
		if err != nil {
			if !errors.Is(err, errOAuthMessage) {
				t.Fatalf("error %v does not wrap errOAuthMessage", err)
			}
			return
		}
		if len(msg) > maxOAuthMessage || m.token == "" || len(m.extensions) >= maxOAuthPairs {
			t.Fatalf("accepted out of bounds: len %d, %+v", len(msg), m)
		}
		if _, ok := m.extensions["auth"]; ok {
			t.Fatal("auth kept as an extension")
		}
		again, err := parseOAuthMessage(encodeOAuthMessage(m))
		if err != nil {
			t.Fatalf("re-encoded message refused: %v", err)
		}
		if again.authzid != m.authzid || again.token != m.token || !maps.Equal(again.extensions, m.extensions) {
			t.Fatalf("round trip: %+v, then %+v", m, again)
		}
	})
}
