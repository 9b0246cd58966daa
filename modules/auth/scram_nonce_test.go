package auth

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
)

// librdkafka's client-final nonce is its own nonce followed by the server-first's whole
// nonce (which already starts with its own). Kafka's server accepts any final nonce
// that ends with the server's, so librdkafka logs in; so must we. The proof is over the
// message as sent. A nonce that does not end with the server's is refused.
func TestSCRAMFinalNonceAsLibrdkafka(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nonce  func(cnonce, server string) string
		wantOK bool
	}{
		{"RFC 5802", func(_, server string) string { return server }, true},
		{"librdkafka", func(cnonce, server string) string { return cnonce + server }, true},
		{"not the server's", func(cnonce, _ string) string { return cnonce + "forged" }, false},
	} {
		for _, mech := range []scramMech{mechSHA256, mechSHA512} {
			t.Run(tc.name+"/"+mech.String(), func(t *testing.T) {
				c := newTestCreds(t, aliceUser)
				x, err := c.startSCRAM(mech.String(), nil)
				if err != nil {
					t.Fatal(err)
				}
				const cnonce = "6}dA5t@buX`2R6^nj4r?f/3EjcB0@rU5"
				first := "n,,n=alice,r=" + cnonce
				sf, done, err := x.Step(context.Background(), []byte(first))
				if err != nil || done {
					t.Fatalf("client-first: %v %v", done, err)
				}
				var server, salt string
				var iters int
				for _, f := range strings.Split(string(sf), ",") {
					switch {
					case strings.HasPrefix(f, "r="):
						server = f[2:]
					case strings.HasPrefix(f, "s="):
						salt = f[2:]
					case strings.HasPrefix(f, "i="):
						iters, _ = strconv.Atoi(f[2:])
					}
				}
				rawSalt, err := base64.StdEncoding.DecodeString(salt)
				if err != nil || !strings.HasPrefix(server, cnonce) || iters < 4096 {
					t.Fatalf("server-first %q", sf)
				}
				salted, err := pbkdf2.Key(mech.newHash(), aliceUser.Password, rawSalt, iters, mech.size())
				if err != nil {
					t.Fatal(err)
				}
				hm := func(key []byte, msg string) []byte {
					m := hmac.New(mech.newHash(), key)
					m.Write([]byte(msg))
					return m.Sum(nil)
				}
				clientKey := hm(salted, "Client Key")
				h := mech.newHash()()
				h.Write(clientKey)
				storedKey := h.Sum(nil)
				withoutProof := "c=biws,r=" + tc.nonce(cnonce, server)
				authMessage := first[3:] + "," + string(sf) + "," + withoutProof
				sig := hm(storedKey, authMessage)
				proof := make([]byte, len(clientKey))
				for i := range proof {
					proof[i] = clientKey[i] ^ sig[i]
				}
				final := withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)
				reply, done, err := x.Step(context.Background(), []byte(final))
				if !tc.wantOK {
					if err == nil || done {
						t.Fatalf("accepted a final nonce that is not the server's: %q", reply)
					}
					return
				}
				if err != nil || !done {
					t.Fatalf("client-final: %v %v", done, err)
				}
				want := "v=" + base64.StdEncoding.EncodeToString(hm(hm(salted, "Server Key"), authMessage))
				if string(reply) != want {
					t.Fatalf("server-final %q, want %q", reply, want)
				}
				if p := x.Principal(); p.String() != "User:alice" {
					t.Fatalf("principal %v", p)
				}
			})
		}
	}
}
