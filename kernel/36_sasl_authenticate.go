// SaslAuthenticate: v0-2. Served by the kernel (sasl.go): each request steps the
// exchange SaslHandshake started; v1+ answers session_lifetime_ms (KIP-368). Claimed
// only when the auth module is an Authenticator.

package kernel

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (k *Kernel) saslAuthenticateClaim() Claim {
	return Claim{Key: kmsg.SASLAuthenticate, Min: 0, Max: 2, Handler: Typed(k.saslAuthenticate)}
}

func (k *Kernel) saslAuthenticate(ctx context.Context, req *Request, r *kmsg.SASLAuthenticateRequest) (Response, error) {
	c := connFrom(ctx)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	s := c.sasl
	if s == nil || s.state != saslNeedAuthenticate {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake"
		resp.ErrorMessage = &msg
		c.closeAfter = true
		return Reply(resp), nil
	}
	reply, done, err := c.saslStep(ctx, r.SASLAuthBytes)
	now := time.Now()
	if err == nil && done {
		err = c.saslSucceeded(now)
	}
	if err != nil {
		c.saslFailed(ctx, err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		c.closeAfter = true
		return Reply(resp), nil
	}
	resp.SASLAuthBytes = reply
	if done && req.Version >= 1 && !s.expiry.IsZero() {
		resp.SessionLifetimeMillis = max(1, s.expiry.Sub(now).Milliseconds())
	}
	return Reply(resp), nil
}
