// SaslHandshake: v0-1. Served by the kernel, which owns each connection's SASL state
// (sasl.go); the mechanisms come from the auth module's Authenticator. v0 switches the
// connection to raw SASL tokens; v1 to SaslAuthenticate. Claimed only when the auth
// module is an Authenticator.

package kernel

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (k *Kernel) saslHandshakeClaim() Claim {
	return Claim{Key: kmsg.SASLHandshake, Min: 0, Max: 1, Handler: Typed(k.saslHandshake)}
}

func (k *Kernel) saslHandshake(ctx context.Context, req *Request, r *kmsg.SASLHandshakeRequest) (Response, error) {
	c := connFrom(ctx)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SupportedMechanisms = k.authn.Mechanisms()
	s := c.sasl
	if s == nil {
		// Not a SASL listener; the connection stays as it is.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return Reply(resp), nil
	}
	switch {
	case s.state == saslNeedHandshake:
	case s.state == saslAuthenticated && req.Version >= 1 && s.handshakeV >= 1 && r.Mechanism == s.mech:
		s.reauth = true // KIP-368
	default:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.closeAfter = true
		return Reply(resp), nil
	}
	if !slices.Contains(resp.SupportedMechanisms, r.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.closeAfter = true
		return Reply(resp), nil
	}
	ex, err := k.authn.StartSASL(r.Mechanism, c.info)
	if err != nil {
		c.log.Debug("SASL mechanism refused", "mechanism", r.Mechanism, "err", err)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.closeAfter = true
		return Reply(resp), nil
	}
	s.ex, s.mech = ex, r.Mechanism
	if !s.reauth {
		s.handshakeV = req.Version
	}
	if req.Version == 0 {
		s.state = saslRawTokens
	} else {
		s.state = saslNeedAuthenticate
	}
	return Reply(resp), nil
}
