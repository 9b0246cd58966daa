package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASL on SASL_PLAINTEXT and SASL_SSL listeners. The kernel owns each connection's
// SASL state (this file, 17_sasl_handshake.go, 36_sasl_authenticate.go); the auth
// module's Authenticator owns the mechanisms and credentials. The state lives in the
// connection's saslConn and is read and written only by its processor goroutine; the
// reader sees only preAuth (an atomic), which picks its frame bound.
//
//	needHandshake ──SaslHandshake v1+──▶ needAuthenticate ──SaslAuthenticate…──┐
//	   │  (ApiVersions allowed)           (Step until done; ApiVersions allowed) │
//	   └──SaslHandshake v0──▶ rawTokens ──raw token frames, raw replies…────────┤
//	                                                                             ▼
//	   ┌──────────── SaslHandshake v1+ (re-authentication, KIP-368) ──── authenticated
//	   ▼                                                                  (every API)
//	needAuthenticate (reauth: only SaslAuthenticate; the principal must stay the same)
//
// Any other request outside authenticated, and any request but SaslHandshake once the
// session expired, closes the connection, as Kafka does. A failed step answers
// SASL_AUTHENTICATION_FAILED (raw tokens: no answer) after
// connection.failed.authentication.delay.ms and closes.

type saslState int8

const (
	saslNeedHandshake saslState = iota
	saslNeedAuthenticate
	saslRawTokens
	saslAuthenticated
)

// saslConn is one connection's SASL state. Only the processor goroutine touches it.
type saslConn struct {
	state saslState
	// reauth: the exchange in progress re-authenticates an authenticated session.
	reauth     bool
	everAuthed bool
	handshakeV int16
	mech       string
	ex         SASLExchange
	// expiry ends the session (KIP-368); zero: never.
	expiry time.Time
}

// Errors that close a SASL connection.
var (
	// errNotAuthenticated: a request that needs an authenticated session came before one.
	errNotAuthenticated = errors.New("request before SASL authentication")
	// errSessionExpired: the SASL session's lifetime ended and the client did not
	// re-authenticate (KIP-368).
	errSessionExpired = errors.New("SASL session expired; re-authentication required")
	// errCloseAfterResponse: the response was written and the connection closes
	// (failed authentication, illegal SASL state).
	errCloseAfterResponse = errors.New("closing after the response")
)

// admit says whether a request of key may be processed in the connection's SASL state;
// an error closes the connection.
func (s *saslConn) admit(key int16, now time.Time) error {
	switch s.state {
	case saslNeedHandshake:
		if key == kmsg.ApiVersions.Int16() || key == kmsg.SASLHandshake.Int16() {
			return nil
		}
	case saslNeedAuthenticate:
		if key == kmsg.SASLAuthenticate.Int16() || (key == kmsg.ApiVersions.Int16() && !s.reauth) {
			return nil
		}
	case saslAuthenticated:
		if s.expiry.IsZero() || now.Before(s.expiry) || key == kmsg.SASLHandshake.Int16() {
			return nil
		}
		return fmt.Errorf("%w (%s)", errSessionExpired, kmsg.NameForKey(key))
	}
	return fmt.Errorf("%w: %s", errNotAuthenticated, kmsg.NameForKey(key))
}

// connCtxKey carries the *conn to the kernel's own SASL handlers.
type connCtxKey struct{}

func connFrom(ctx context.Context) *conn {
	c, _ := ctx.Value(connCtxKey{}).(*conn)
	return c
}

// saslStep steps the exchange, turning a panic in the mechanism into a failure.
func (c *conn) saslStep(ctx context.Context, msg []byte) (reply []byte, done bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("SASL mechanism panicked", "mechanism", c.sasl.mech, "panic", p, "stack", string(debug.Stack()))
			reply, done, err = nil, false, errors.New("authentication failed")
		}
	}()
	return c.sasl.ex.Step(ctx, msg)
}

// saslSucceeded ends a successful exchange: the principal (unchanged on
// re-authentication) and the session's end.
func (c *conn) saslSucceeded(now time.Time) error {
	s := c.sasl
	p := s.ex.Principal()
	if s.everAuthed && p != c.info.Principal {
		return fmt.Errorf("re-authentication may not change the principal from %s to %s", c.info.Principal, p)
	}
	var exp time.Time
	if c.k.reauth > 0 {
		exp = now.Add(c.k.reauth)
	}
	if e := s.ex.Expiry(); !e.IsZero() && (exp.IsZero() || e.Before(exp)) {
		exp = e
	}
	c.info.Principal = p
	s.expiry, s.state, s.everAuthed, s.reauth, s.ex = exp, saslAuthenticated, true, false, nil
	c.preAuth.Store(false)
	c.k.mSASLOK.Inc()
	return nil
}

// saslFailed counts and logs a failed authentication and waits
// connection.failed.authentication.delay.ms before the caller answers and closes.
func (c *conn) saslFailed(ctx context.Context, err error) {
	c.k.mSASLFail.Inc()
	c.logRejected("SASL authentication failed", fmt.Errorf("mechanism %s: %w", c.sasl.mech, err))
	c.sasl.ex = nil
	if d := c.k.failDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// saslRawToken handles a frame after SaslHandshake v0: the whole frame is a SASL token
// and the reply is a raw size-prefixed token (empty when the mechanism has nothing to
// say), sent after every step, the last one included. A failure closes without reply.
func (c *conn) saslRawToken(ctx context.Context, tok []byte) error {
	reply, done, err := c.saslStep(ctx, tok)
	if err == nil && done {
		err = c.saslSucceeded(time.Now())
	}
	if err != nil {
		c.saslFailed(ctx, err)
		return fmt.Errorf("SASL authentication failed: %w", err)
	}
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(reply)), uint32(len(reply)))
	b = append(b, reply...)
	c.renewWriteDeadline()
	_, err = c.nc.Write(b)
	return err
}

// checkSASLListeners: a SASL listener needs the auth module's mechanisms.
func (k *Kernel) checkSASLListeners() error {
	for i, p := range k.protocols {
		if (p == ProtocolSASLPlaintext || p == ProtocolSASLSSL) && k.authn == nil {
			role := "none"
			if s := k.modules["auth"]; s != nil {
				role = s.info.ID
			}
			return fmt.Errorf("listener %s (%s) needs SASL mechanisms: the auth module (%s) is no kernel.Authenticator", k.cfg.Listeners[i].Name, p, role)
		}
	}
	return nil
}
