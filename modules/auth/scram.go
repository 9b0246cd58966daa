package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xdg-go/scram"

	"github.com/sluicehq/sluice/kernel"
)

// maxSCRAMMessage bounds one client SCRAM message: a client-first with an escaped
// MaxUserLen name and authzid, or a client-final with their base64 and a SHA-512 proof,
// fit with room to spare.
const maxSCRAMMessage = 4096

// SCRAM failures. Their texts reach the client (SaslAuthenticate's error message) and
// never tell whether the user exists: an unknown user fails exactly as a wrong password.
var (
	errSCRAMMalformed = errors.New("authentication failed: malformed SCRAM message")
	errSCRAMTooLong   = fmt.Errorf("authentication failed: SCRAM message longer than %d bytes", maxSCRAMMessage)
	errSCRAMOver      = errors.New("authentication failed: the SCRAM exchange is over")
	errTokenAuth      = errors.New("authentication failed: delegation tokens (the tokenauth SCRAM extension) are not supported")
	errAuthzID        = errors.New("authentication failed: the authorization id is not the user name")
)

// scramExchange is one SCRAM-SHA-256 or SCRAM-SHA-512 exchange (RFC 5802, RFC 7677),
// server side: the message syntax and proof check are xdg-go/scram's conversation; this
// adds Kafka's rules (authzid empty or the user, no tokenauth), size bounds, and the
// fake credential of unknown users.
type scramExchange struct {
	c     *credState
	mech  scramMech
	conv  *scram.ServerConversation
	step  int // 0: expects client-first; 1: client-final; 2: over
	known bool
	p     kernel.Principal
}

// startSCRAM begins an exchange of mechanism (SCRAM-SHA-256 or SCRAM-SHA-512).
func (c *credState) startSCRAM(mechanism string, _ *kernel.ConnInfo) (kernel.SASLExchange, error) {
	mech, ok := mechByName(mechanism)
	if !ok {
		return nil, fmt.Errorf("%q is not a SCRAM mechanism", mechanism)
	}
	x := &scramExchange{c: c, mech: mech}
	gen := scram.SHA256
	if mech == mechSHA512 {
		gen = scram.SHA512
	}
	srv, err := gen.NewServer(x.lookup)
	if err != nil {
		return nil, fmt.Errorf("scram server: %w", err)
	}
	x.conv = srv.NewConversation()
	return x, nil
}

// lookup is the conversation's credential callback. It never fails: an unknown user
// gets the fake credential (computed on every call, so both paths cost the same).
func (x *scramExchange) lookup(user string) (scram.StoredCredentials, error) {
	cr := x.c.fakeCredential(x.mech, user)
	if found := x.c.lookup(x.mech, user); found != nil {
		cr, x.known = found, true
	}
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(cr.salt), Iters: cr.iterations},
		StoredKey:  cr.storedKey,
		ServerKey:  cr.serverKey,
	}, nil
}

// Step takes client-first (answering server-first), then client-final (answering
// server-final, done). Any failure ends the exchange.
func (x *scramExchange) Step(_ context.Context, msg []byte) ([]byte, bool, error) {
	step := x.step
	x.step = 2
	if step > 1 {
		return nil, false, errSCRAMOver
	}
	if len(msg) > maxSCRAMMessage {
		return nil, false, errSCRAMTooLong
	}
	if !utf8.Valid(msg) {
		return nil, false, errSCRAMMalformed
	}
	if step == 0 {
		if tokenAuth(string(msg)) {
			return nil, false, errTokenAuth
		}
		reply, err := x.conv.Step(string(msg))
		if err != nil {
			return nil, false, errSCRAMMalformed
		}
		if z := x.conv.AuthzID(); z != "" && z != x.conv.Username() {
			return nil, false, errAuthzID
		}
		x.step = 1
		return []byte(reply), false, nil
	}
	reply, err := x.conv.Step(string(msg))
	switch {
	case err == nil && x.conv.Valid() && x.known:
		x.p = kernel.Principal{Type: "User", Name: x.conv.Username()}
		return []byte(reply), true, nil
	case err == nil, reply == scram.ErrInvalidProof:
		// A wrong proof: a wrong password or an unknown user (whose fake keys no
		// password matches); one message for both.
		return nil, false, x.invalid()
	}
	return nil, false, errSCRAMMalformed
}

// invalid is the failure of a wrong proof (Kafka words it alike).
func (x *scramExchange) invalid() error {
	return fmt.Errorf("authentication failed: invalid credentials with SASL mechanism %s", x.mech)
}

// Principal is User:<name> once Step returned done.
func (x *scramExchange) Principal() kernel.Principal { return x.p }

// Expiry is zero: a SCRAM session lasts until connections.max.reauth.ms.
func (x *scramExchange) Expiry() time.Time { return time.Time{} }

// tokenAuth reports whether a client-first message asks for delegation-token
// authentication (KIP-48's "tokenauth=true" extension, after the nonce).
func tokenAuth(clientFirst string) bool {
	fields := strings.Split(clientFirst, ",")
	if len(fields) <= 4 {
		return false
	}
	for _, f := range fields[4:] {
		if k, v, ok := strings.Cut(f, "="); ok && k == "tokenauth" && strings.EqualFold(v, "true") {
			return true
		}
	}
	return false
}

var _ kernel.SASLExchange = (*scramExchange)(nil)
