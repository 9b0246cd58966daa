package auth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func testCredential(t testing.TB, mech scramMech) *credential {
	t.Helper()
	cr, err := deriveCredential(mech, "pw", []byte("0123456789abcdef01234567"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

func TestCredentialRoundTrip(t *testing.T) {
	for _, mech := range scramMechs {
		cr := testCredential(t, mech)
		b := encodeCredential(cr)
		got, err := decodeCredential(b, mech)
		if err != nil {
			t.Fatalf("%v: %v", mech, err)
		}
		if got.mech != mech || got.iterations != 4096 || !bytes.Equal(got.salt, cr.salt) ||
			!bytes.Equal(got.storedKey, cr.storedKey) || !bytes.Equal(got.serverKey, cr.serverKey) || got.bootstrap {
			t.Fatalf("%v: decoded %+v, want %+v", mech, got, cr)
		}
		b[len(b)-1] ^= 1 // the decoded credential does not alias its input
		if got.serverKey[len(got.serverKey)-1] == b[len(b)-1] {
			t.Fatalf("%v: decoded credential aliases the stored bytes", mech)
		}
	}
}

func TestDecodeCredentialRejects(t *testing.T) {
	good := encodeCredential(testCredential(t, mechSHA256))
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tt := range []struct {
		name string
		b    []byte
		mech scramMech
	}{
		{"empty", nil, mechSHA256},
		{"short header", good[:7], mechSHA256},
		{"version 0", mod(func(b []byte) []byte { b[0] = 0; return b }), mechSHA256},
		{"version 2", mod(func(b []byte) []byte { b[0] = 2; return b }), mechSHA256},
		{"other mechanism than the key's", good, mechSHA512},
		{"unknown mechanism", mod(func(b []byte) []byte { b[1] = 3; return b }), scramMech(3)},
		{"too few iterations", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[2:], 4095); return b }), mechSHA256},
		{"too many iterations", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[2:], 1<<31); return b }), mechSHA256},
		{"empty salt", mod(func(b []byte) []byte { binary.BigEndian.PutUint16(b[6:], 0); return b }), mechSHA256},
		{"salt past the end", mod(func(b []byte) []byte { binary.BigEndian.PutUint16(b[6:], 200); return b }), mechSHA256},
		{"truncated", good[:len(good)-1], mechSHA256},
		{"trailing byte", append(bytes.Clone(good), 0), mechSHA256},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if cr, err := decodeCredential(tt.b, tt.mech); !errors.Is(err, errBadCredential) || cr != nil {
				t.Fatalf("decoded %+v, err %v", cr, err)
			}
		})
	}
}

func TestCredKey(t *testing.T) {
	for _, tt := range []struct {
		key  string
		mech scramMech
		user string
		ok   bool
	}{
		{"SCRAM-SHA-256/alice", mechSHA256, "alice", true},
		{"SCRAM-SHA-512/a/b", mechSHA512, "a/b", true},
		{"SCRAM-SHA-1/alice", 0, "", false},
		{"SCRAM-SHA-256/", 0, "", false},
		{"alice", 0, "", false},
	} {
		mech, user, ok := parseCredKey(tt.key)
		if mech != tt.mech || user != tt.user || ok != tt.ok {
			t.Errorf("parseCredKey(%q) = %v %q %v", tt.key, mech, user, ok)
		}
		if ok && credKey(mech, user) != tt.key {
			t.Errorf("credKey(%v, %q) = %q", mech, user, credKey(mech, user))
		}
	}
}

// FuzzDecodeCredential: decoding never panics, and what decodes encodes back to the
// same bytes (one encoding per credential).
func FuzzDecodeCredential(f *testing.F) {
	good := encodeCredential(testCredential(f, mechSHA256))
	f.Add([]byte{}, int8(1))
	f.Add(good[:7], int8(1))
	f.Add(good, int8(1))
	f.Add(encodeCredential(testCredential(f, mechSHA512)), int8(2))
	f.Add(append(bytes.Clone(good), good...), int8(1))
	f.Fuzz(func(t *testing.T, b []byte, mech int8) {
		cr, err := decodeCredential(b, scramMech(mech))
		if err != nil {
			return
		}
		if got := encodeCredential(cr); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}
