package kernel

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTypedAssertsBody(t *testing.T) {
	var got *kmsg.HeartbeatRequest
	h := Typed(func(_ context.Context, _ *Request, r *kmsg.HeartbeatRequest) (Response, error) {
		got = r
		return Response{NoResponse: true}, nil
	})
	body := kmsg.NewPtrHeartbeatRequest()
	if _, err := h(context.Background(), &Request{Key: 12, Body: body}); err != nil || got != body {
		t.Fatalf("typed handler: err %v, body %p want %p", err, got, body)
	}
	_, err := h(context.Background(), &Request{Key: 12, Body: kmsg.NewPtrJoinGroupRequest()})
	if !errors.Is(err, ErrBadBody) {
		t.Fatalf("wrong body type: err %v, want ErrBadBody", err)
	}
}

// TestReplying: the response is wrapped as the reply with a nil error, and a body of
// the wrong type is still refused.
func TestReplying(t *testing.T) {
	want := kmsg.NewPtrHeartbeatResponse()
	h := Replying(func(_ context.Context, _ *Request, _ *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse { return want })
	resp, err := h(context.Background(), &Request{Key: 12, Body: kmsg.NewPtrHeartbeatRequest()})
	if err != nil || resp.Msg != want || resp.NoResponse {
		t.Fatalf("replying handler: %+v, %v", resp, err)
	}
	if _, err := h(context.Background(), &Request{Key: 12, Body: kmsg.NewPtrJoinGroupRequest()}); !errors.Is(err, ErrBadBody) {
		t.Fatalf("wrong body type: err %v, want ErrBadBody", err)
	}
}

type claimCtx struct {
	Context
	got []int16
	err error
}

func (c *claimCtx) Handle(key, _, _ int16, _ Handler) error {
	c.got = append(c.got, key)
	return c.err
}

func TestClaimAll(t *testing.T) {
	h := func(context.Context, *Request) (Response, error) { return Response{}, nil }
	c := &claimCtx{}
	if err := ClaimAll(c, Claim{Key: kmsg.Heartbeat, Max: 4, Handler: h}, Claim{Key: kmsg.JoinGroup, Max: 9, Handler: h}); err != nil {
		t.Fatal(err)
	}
	if len(c.got) != 2 || c.got[0] != 12 || c.got[1] != 11 {
		t.Fatalf("claimed %v, want [12 11]", c.got)
	}
	if err := ClaimAll(c, Claim{Key: kmsg.Heartbeat}); err == nil {
		t.Fatal("a claim without a handler was accepted")
	}
	c.err = errors.New("taken")
	if err := ClaimAll(c, Claim{Key: kmsg.Heartbeat, Handler: h}); err == nil {
		t.Fatal("a failed claim was not reported")
	}
}
