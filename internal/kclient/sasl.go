package kclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// maxSASLSteps bounds the SaslAuthenticate round trips of one login: PLAIN takes one,
// SCRAM two; a peer that keeps challenging is broken.
const maxSASLSteps = 8

// authenticate runs the SASL login of a new connection (KIP-152): ApiVersions, then
// SaslHandshake v1 with the mechanism's name, then SaslAuthenticate requests carrying
// the mechanism's messages until its session is done. Every failure wraps ErrSASL.
func (c *Conn) authenticate(ctx context.Context, mech sasl.Mechanism) error {
	vers, err := c.APIVersions(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSASL, c.addr, err)
	}
	c.versions = vers
	authV, ok := vers[kmsg.SASLAuthenticate.Int16()]
	if _, hs := vers[kmsg.SASLHandshake.Int16()]; !ok || !hs {
		return fmt.Errorf("%w: %s does not support SaslHandshake and SaslAuthenticate (is its listener SASL_PLAINTEXT or SASL_SSL?)", ErrSASL, c.addr)
	}

	hreq := kmsg.NewPtrSASLHandshakeRequest()
	hreq.SetVersion(1)
	hreq.Mechanism = mech.Name()
	r, err := c.Request(ctx, hreq)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSASL, c.addr, err)
	}
	hresp := r.(*kmsg.SASLHandshakeResponse)
	if err := kerr.ErrorForCode(hresp.ErrorCode); err != nil {
		return fmt.Errorf("%w: %s: mechanism %s: %w (the broker offers %s)", ErrSASL, c.addr, mech.Name(), err, strings.Join(hresp.SupportedMechanisms, ", "))
	}

	session, msg, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return fmt.Errorf("%w: %s: %s: %w", ErrSASL, c.addr, mech.Name(), err)
	}
	for step, done := 0, false; !done || len(msg) > 0; step++ {
		if step == maxSASLSteps {
			return fmt.Errorf("%w: %s: %s did not finish in %d steps", ErrSASL, c.addr, mech.Name(), maxSASLSteps)
		}
		areq := kmsg.NewPtrSASLAuthenticateRequest()
		areq.SetVersion(min(areq.MaxVersion(), authV))
		areq.SASLAuthBytes = msg
		sent := time.Now()
		r, err := c.Request(ctx, areq)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSASL, c.addr, err)
		}
		aresp := r.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(aresp.ErrorCode); err != nil {
			detail := ""
			if aresp.ErrorMessage != nil && *aresp.ErrorMessage != "" {
				detail = ": " + *aresp.ErrorMessage
			}
			return fmt.Errorf("%w: %s: %s: %w%s", ErrSASL, c.addr, mech.Name(), err, detail)
		}
		if ms := aresp.SessionLifetimeMillis; ms > 0 {
			// Replace the connection at 90% of its lifetime, so that the broker
			// never closes it under a fetch.
			ms = min(ms, int64(365*24*time.Hour/time.Millisecond))
			c.reauthAfter = sent.Add(time.Duration(ms) * time.Millisecond * 9 / 10)
		}
		msg = nil
		if !done {
			// The last response of a mechanism may still be checked (SCRAM's server
			// signature); Challenge then says done with nothing more to send.
			if done, msg, err = session.Challenge(aresp.SASLAuthBytes); err != nil {
				return fmt.Errorf("%w: %s: %s: %w", ErrSASL, c.addr, mech.Name(), err)
			}
		}
	}
	return nil
}
