package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/kernel"
)

// bootstrapSaltLen is the salt length of bootstrap and fake credentials: kadm's, so a
// fake credential's salt looks like a stored one's.
const bootstrapSaltLen = 24

// bootstrapIterations is the iteration count of bootstrap and fake credentials.
const bootstrapIterations = MinIterations

// credState holds the SCRAM credentials and runs PLAIN and SCRAM exchanges: the stored
// credentials of the metadata image (namespace CredentialNamespace) over the bootstrap
// users' in-memory ones, as one immutable index swapped atomically.
type credState struct {
	log   *slog.Logger
	image func() *kernel.Image // the current metadata image; nil in unit tests
	ext   kernel.ExtensionStore

	// boot holds the bootstrap users' credentials; immutable after init.
	boot map[userMech]*credential
	// fakeKey keys the fake salts of unknown users; fakeStored and fakeServer are the
	// fake keys per mechanism (index scramMech). All random per process, fixed after
	// init.
	fakeKey    []byte
	fakeStored [3][]byte
	fakeServer [3][]byte

	mu  sync.Mutex                // serializes rebuilds of idx; readers never take it
	idx atomic.Pointer[credIndex] // never nil after init
}

// userMech names one credential.
type userMech struct {
	user string
	mech scramMech
}

// credIndex is one immutable view of every credential.
type credIndex struct {
	fromImage bool                     // built from an image (else bootstrap users only)
	version   uint64                   // the image's version when fromImage
	ns        map[string][]byte        // the image's namespace map it was built from
	creds     map[userMech]*credential // stored ones over bootstrap ones
}

// provision validates the bootstrap users, derives their credentials and claims the
// credential APIs.
func (c *credState) provision(m *Module, ctx kernel.Context) error {
	if err := c.init(m.log, m.Users, m.meta.Image, m.ext); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return kernel.ClaimAll(ctx, claimDescribeUserSCRAMCredentials(c), claimAlterUserSCRAMCredentials(c))
}

// init sets up the state: fake keys, bootstrap credentials (random salt,
// bootstrapIterations, both SCRAM mechanisms) and the first index. image and ext may be
// nil (unit tests).
func (c *credState) init(log *slog.Logger, users []UserConfig, image func() *kernel.Image, ext kernel.ExtensionStore) error {
	c.log, c.image, c.ext = log, image, ext
	c.fakeKey = randomBytes(32)
	for _, mech := range scramMechs {
		c.fakeStored[mech] = randomBytes(mech.size())
		c.fakeServer[mech] = randomBytes(mech.size())
	}
	c.boot = make(map[userMech]*credential, 2*len(users))
	for i, u := range users {
		if err := validUser(u.Name); err != nil {
			return fmt.Errorf("users[%d]: %w", i, err)
		}
		switch {
		case u.Password == "":
			return fmt.Errorf("users[%d] (%s): empty password", i, u.Name)
		case len(u.Password) > MaxPasswordLen:
			return fmt.Errorf("users[%d] (%s): password longer than %d bytes", i, u.Name, MaxPasswordLen)
		}
		for _, mech := range scramMechs {
			k := userMech{u.Name, mech}
			if c.boot[k] != nil {
				return fmt.Errorf("users[%d]: user %q named twice", i, u.Name)
			}
			cr, err := deriveCredential(mech, u.Password, randomBytes(bootstrapSaltLen), bootstrapIterations)
			if err != nil {
				return fmt.Errorf("users[%d] (%s): %w", i, u.Name, err)
			}
			cr.bootstrap = true
			c.boot[k] = cr
		}
	}
	c.idx.Store(&credIndex{creds: c.boot})
	return nil
}

// randomBytes returns n bytes from crypto/rand (which never fails on the platforms Go
// supports).
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// deriveCredential is RFC 5802's server side of a password: SaltedPassword =
// Hi(password, salt, iterations) (PBKDF2 with the mechanism's HMAC), then the keys.
func deriveCredential(mech scramMech, password string, salt []byte, iterations int) (*credential, error) {
	salted, err := pbkdf2.Key(mech.newHash(), password, salt, iterations, mech.size())
	if err != nil {
		return nil, fmt.Errorf("pbkdf2: %w", err)
	}
	return credentialFromSalted(mech, salted, salt, iterations), nil
}

// credentialFromSalted derives StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key"); the salted password is not kept.
func credentialFromSalted(mech scramMech, salted, salt []byte, iterations int) *credential {
	return &credential{
		mech:       mech,
		iterations: iterations,
		salt:       slices.Clone(salt),
		storedKey:  storedKeyOf(mech, salted),
		serverKey:  hmacSum(mech, salted, "Server Key"),
	}
}

// storedKeyOf is H(HMAC(salted, "Client Key")).
func storedKeyOf(mech scramMech, salted []byte) []byte {
	h := mech.newHash()()
	h.Write(hmacSum(mech, salted, "Client Key"))
	return h.Sum(nil)
}

func hmacSum(mech scramMech, key []byte, msg string) []byte {
	mac := hmac.New(mech.newHash(), key)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}

// apply rebuilds the index from a new image (the Module's subscription).
func (c *credState) apply(im *kernel.Image) {
	if im != nil && c.idx.Load() != nil {
		c.rebuild(im)
	}
}

// current returns the index, first catching up with the metadata image if it is newer
// (so a handler reads its own writes even before the subscription delivered them). The
// common path is two atomic loads and no lock.
func (c *credState) current() *credIndex {
	idx := c.idx.Load()
	if c.image == nil {
		return idx
	}
	if im := c.image(); im != nil && (!idx.fromImage || im.Version > idx.version) {
		return c.rebuild(im)
	}
	return idx
}

// rebuild builds the index of im (unless the index is already as new) and publishes it.
// A stored value that does not decode is skipped with a warning: the user then has no
// credential for that mechanism (or the bootstrap one).
func (c *credState) rebuild(im *kernel.Image) *credIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.idx.Load()
	if old.fromImage && im.Version <= old.version {
		return old
	}
	ns := im.Extensions[CredentialNamespace]
	if old.fromImage && sameMap(old.ns, ns) {
		// Images copy a namespace's map only when it changes: nothing to decode.
		idx := *old
		idx.version = im.Version
		c.idx.Store(&idx)
		return &idx
	}
	idx := &credIndex{fromImage: true, version: im.Version, ns: ns,
		creds: maps.Clone(c.boot)}
	for key, v := range ns {
		mech, user, ok := parseCredKey(key)
		if !ok {
			c.log.Warn("skipping a SCRAM credential with a malformed key", "key", key)
			continue
		}
		cr, err := decodeCredential(v, mech)
		if err != nil {
			c.log.Warn("skipping a SCRAM credential that does not decode", "user", user, "mechanism", mech.String(), "err", err)
			continue
		}
		idx.creds[userMech{user, mech}] = cr
	}
	c.idx.Store(idx)
	return idx
}

// lookup returns the credential of user for mech, or nil.
func (c *credState) lookup(mech scramMech, user string) *credential {
	return c.current().creds[userMech{user, mech}]
}

// fakeCredential is what an unknown user is checked against, so that the exchange
// fails the way and in about the time a wrong password does: a salt that is the same on
// every attempt for the same name (HMAC of a per-process key), bootstrapIterations, and
// keys no password derives.
func (c *credState) fakeCredential(mech scramMech, user string) *credential {
	mac := hmac.New(sha256.New, c.fakeKey)
	mac.Write([]byte{byte(mech)})
	mac.Write([]byte(user))
	return &credential{
		mech:       mech,
		iterations: bootstrapIterations,
		salt:       mac.Sum(nil)[:bootstrapSaltLen],
		storedKey:  c.fakeStored[mech],
		serverKey:  c.fakeServer[mech],
	}
}

// errBadPassword is checkPassword's only failure.
var errBadPassword = errors.New("invalid username or password")

// checkPassword verifies a password against user's SCRAM credential: SaltedPassword =
// PBKDF2(password, salt, iterations), then H(HMAC(SaltedPassword, "Client Key"))
// compared with StoredKey in constant time. Of a user's credentials it uses one: a
// stored one before a bootstrap one, SCRAM-SHA-256 before SCRAM-SHA-512. An unknown user
// is checked against a fake credential, so the time is that of a wrong password.
func (c *credState) checkPassword(user, password string) (kernel.Principal, bool) {
	if err := c.verifyPassword(user, password); err != nil {
		return kernel.Principal{}, false
	}
	return kernel.Principal{Type: "User", Name: user}, true
}

func (c *credState) verifyPassword(user, password string) error {
	if validUser(user) != nil || password == "" || len(password) > MaxPasswordLen {
		return errBadPassword // no such name can exist: nothing to hide
	}
	cr := c.plainCredential(user)
	known := cr != nil
	if !known {
		cr = c.fakeCredential(mechSHA256, user)
	}
	salted, err := pbkdf2.Key(cr.mech.newHash(), password, cr.salt, cr.iterations, cr.mech.size())
	if err != nil {
		return errBadPassword
	}
	match := subtle.ConstantTimeCompare(storedKeyOf(cr.mech, salted), cr.storedKey) == 1
	if !known || !match {
		return errBadPassword
	}
	return nil
}

// plainCredential picks the credential PLAIN checks: stored before bootstrap,
// SCRAM-SHA-256 before SCRAM-SHA-512.
func (c *credState) plainCredential(user string) *credential {
	idx := c.current()
	var boot *credential
	for _, mech := range scramMechs {
		cr := idx.creds[userMech{user, mech}]
		if cr == nil {
			continue
		}
		if !cr.bootstrap {
			return cr
		}
		if boot == nil {
			boot = cr
		}
	}
	return boot
}
