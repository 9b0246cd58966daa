package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// maxPlainMessage bounds a PLAIN message: authzid NUL user NUL password at their
// bounds.
const maxPlainMessage = 2*MaxUserLen + MaxPasswordLen + 2

// PLAIN failures. Their texts reach the client and never tell whether the user exists.
var (
	errPlainTooLong   = fmt.Errorf("authentication failed: PLAIN message longer than %d bytes", maxPlainMessage)
	errPlainMalformed = errors.New("authentication failed: a PLAIN message is authzid NUL user NUL password")
	errPlainNoUser    = errors.New("authentication failed: username not specified")
	errPlainNoPass    = errors.New("authentication failed: password not specified")
	errPlainInvalid   = errors.New("authentication failed: invalid username or password")
	errPlainOver      = errors.New("authentication failed: the PLAIN exchange is over")
)

// plainExchange is one PLAIN exchange (RFC 4616): one client message, checked against
// the user's SCRAM credential (checkPassword).
type plainExchange struct {
	c    *credState
	over bool
	p    kernel.Principal
}

// startPlain begins a PLAIN exchange.
func (c *credState) startPlain(*kernel.ConnInfo) (kernel.SASLExchange, error) {
	return &plainExchange{c: c}, nil
}

// Step checks the one message: authzid NUL user NUL password, authzid empty or the user
// (as Kafka). Done with no reply on success.
func (x *plainExchange) Step(_ context.Context, msg []byte) ([]byte, bool, error) {
	if x.over {
		return nil, false, errPlainOver
	}
	x.over = true
	if len(msg) > maxPlainMessage {
		return nil, false, errPlainTooLong
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, errPlainMalformed
	}
	authzid, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	switch {
	case user == "":
		return nil, false, errPlainNoUser
	case pass == "":
		return nil, false, errPlainNoPass
	case authzid != "" && authzid != user:
		return nil, false, errAuthzID
	}
	p, ok := x.c.checkPassword(user, pass)
	if !ok {
		return nil, false, errPlainInvalid
	}
	x.p = p
	return nil, true, nil
}

// Principal is User:<name> once Step returned done.
func (x *plainExchange) Principal() kernel.Principal { return x.p }

// Expiry is zero: a PLAIN session lasts until connections.max.reauth.ms.
func (x *plainExchange) Expiry() time.Time { return time.Time{} }

var _ kernel.SASLExchange = (*plainExchange)(nil)
