package auth

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CredentialNamespace is the metadata-log extension namespace of SCRAM credentials: one
// key per (mechanism, user), "SCRAM-SHA-256/alice", whose value is encodeCredential's.
const CredentialNamespace = "auth.scram"

// Bounds on what a credential may hold. The iteration bounds are Kafka's for both SCRAM
// mechanisms; the others bound memory and the key length (the metadata log takes keys of
// at most 255 bytes, the longest mechanism prefix is 14).
const (
	MinIterations = 4096
	MaxIterations = 16384
	// MaxUserLen bounds a user name in bytes.
	MaxUserLen = 200
	// MaxSaltLen bounds a salt in bytes (kadm sends 24).
	MaxSaltLen = 256
	// MaxPasswordLen bounds a password in bytes (PLAIN, bootstrap users).
	MaxPasswordLen = 1024
)

// credVersion is the only version encodeCredential writes; decodeCredential reads it.
const credVersion = 1

// errBadCredential marks a stored credential value that does not decode.
var errBadCredential = errors.New("malformed SCRAM credential")

// scramMech is a SCRAM mechanism, with Kafka's wire values (ScramMechanism: 1 is
// SCRAM-SHA-256, 2 is SCRAM-SHA-512; 0 is UNKNOWN).
type scramMech int8

const (
	mechSHA256 scramMech = 1
	mechSHA512 scramMech = 2
)

// scramMechs are the supported mechanisms in the order PLAIN prefers them.
var scramMechs = [...]scramMech{mechSHA256, mechSHA512}

// mechByName returns the mechanism SaslHandshake names name.
func mechByName(name string) (scramMech, bool) {
	switch name {
	case MechSCRAM256:
		return mechSHA256, true
	case MechSCRAM512:
		return mechSHA512, true
	}
	return 0, false
}

func (m scramMech) valid() bool { return m == mechSHA256 || m == mechSHA512 }

// String is the mechanism's SASL name.
func (m scramMech) String() string {
	switch m {
	case mechSHA256:
		return MechSCRAM256
	case mechSHA512:
		return MechSCRAM512
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(m))
}

// newHash returns the mechanism's hash constructor.
func (m scramMech) newHash() func() hash.Hash {
	if m == mechSHA512 {
		return sha512.New
	}
	return sha256.New
}

// size is the mechanism's hash size: the length of a salted password, a StoredKey and a
// ServerKey.
func (m scramMech) size() int {
	if m == mechSHA512 {
		return sha512.Size
	}
	return sha256.Size
}

// credential is one user's salted keys for one mechanism (RFC 5802 section 3). It never
// holds a password or a salted password. Immutable once built.
type credential struct {
	mech       scramMech
	iterations int
	salt       []byte
	storedKey  []byte // H(ClientKey)
	serverKey  []byte // HMAC(SaltedPassword, "Server Key")
	bootstrap  bool   // derived from Module.Users at provision, not stored in the log
}

// credKey is the extension key of (mech, user): "SCRAM-SHA-256/alice".
func credKey(mech scramMech, user string) string { return mech.String() + "/" + user }

// parseCredKey splits an extension key into its mechanism and user.
func parseCredKey(key string) (scramMech, string, bool) {
	name, user, ok := strings.Cut(key, "/")
	if !ok {
		return 0, "", false
	}
	mech, ok := mechByName(name)
	if !ok || validUser(user) != nil {
		return 0, "", false
	}
	return mech, user, true
}

// validUser checks a user name: non-empty, at most MaxUserLen bytes of UTF-8 without
// control characters (PLAIN separates its fields with NUL).
func validUser(user string) error {
	switch {
	case user == "":
		return errors.New("user name is empty")
	case len(user) > MaxUserLen:
		return fmt.Errorf("user name is longer than %d bytes", MaxUserLen)
	case !utf8.ValidString(user):
		return errors.New("user name is not valid UTF-8")
	case strings.IndexFunc(user, unicode.IsControl) >= 0:
		return errors.New("user name contains a control character")
	}
	return nil
}

// encodeCredential is the stored form of c, version 1 (big endian):
//
//	| version u8 = 1 | mechanism u8 | iterations u32 | salt_len u16 | salt |
//	| stored_key (hash size) | server_key (hash size) |
//
// The mechanism repeats the key's, so a value is never read as the wrong hash.
func encodeCredential(c *credential) []byte {
	b := make([]byte, 0, 8+len(c.salt)+len(c.storedKey)+len(c.serverKey))
	b = append(b, credVersion, byte(c.mech))
	b = binary.BigEndian.AppendUint32(b, uint32(c.iterations))
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.salt)))
	b = append(b, c.salt...)
	b = append(b, c.storedKey...)
	return append(b, c.serverKey...)
}

// decodeCredential reads encodeCredential's bytes. Anything else (another version, a
// mechanism other than want, iterations outside [MinIterations, MaxIterations], an
// empty or oversized salt, a length that does not add up) is errBadCredential; it never
// panics. The returned credential does not alias b.
func decodeCredential(b []byte, want scramMech) (*credential, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: %d bytes", errBadCredential, len(b))
	}
	if b[0] != credVersion {
		return nil, fmt.Errorf("%w: version %d", errBadCredential, b[0])
	}
	mech := scramMech(b[1])
	if !mech.valid() || mech != want {
		return nil, fmt.Errorf("%w: mechanism %v under a %v key", errBadCredential, mech, want)
	}
	iters := binary.BigEndian.Uint32(b[2:6])
	if iters < MinIterations || iters > MaxIterations {
		return nil, fmt.Errorf("%w: %d iterations", errBadCredential, iters)
	}
	saltLen := int(binary.BigEndian.Uint16(b[6:8]))
	if saltLen == 0 || saltLen > MaxSaltLen {
		return nil, fmt.Errorf("%w: salt of %d bytes", errBadCredential, saltLen)
	}
	n := mech.size()
	if len(b) != 8+saltLen+2*n {
		return nil, fmt.Errorf("%w: %d bytes, want %d", errBadCredential, len(b), 8+saltLen+2*n)
	}
	rest := b[8:]
	c := &credential{mech: mech, iterations: int(iters)}
	c.salt = append([]byte(nil), rest[:saltLen]...)
	c.storedKey = append([]byte(nil), rest[saltLen:saltLen+n]...)
	c.serverKey = append([]byte(nil), rest[saltLen+n:]...)
	return c, nil
}
