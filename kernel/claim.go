package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Claim is one API key a module serves: the versions it implements and the handler.
//
// A module writes each claim as a literal in the key's own file (`NN_name.go`, NN the
// key's number), next to the handler and under the file's header comment
// (`// JoinGroup: v0-9. ...`), so the versions are written once and found by the key's
// number. Never derive Max from kmsg (`(&kmsg.ProduceRequest{}).MaxVersion()`): a kmsg
// upgrade would then advertise versions nobody implemented.
type Claim struct {
	Key      kmsg.Key
	Min, Max int16
	Handler  Handler
}

// ClaimAll claims every claim on ctx, stopping at the first failure.
func ClaimAll(ctx Context, claims ...Claim) error {
	for _, c := range claims {
		if c.Handler == nil {
			return fmt.Errorf("claim %s: no handler", c.Key.Name())
		}
		if err := ctx.Handle(c.Key.Int16(), c.Min, c.Max, c.Handler); err != nil {
			return fmt.Errorf("claim %s: %w", c.Key.Name(), err)
		}
	}
	return nil
}

// ErrBadBody is returned (closing the connection) when a request's body is not of the
// type its handler serves. The kernel decodes every body with kmsg.RequestForKey of the
// claimed key, so this means a claim names the wrong handler: a programmer error.
var ErrBadBody = errors.New("kernel: request body of an unexpected type")

// Typed adapts a handler of one request type to a Handler, so no handler repeats the
// body's type assertion:
//
//	kernel.Claim{Key: kmsg.JoinGroup, Min: 0, Max: 9, Handler: kernel.Typed(m.joinGroup)}
//	func (m *Module) joinGroup(ctx context.Context, req *kernel.Request, r *kmsg.JoinGroupRequest) (kernel.Response, error)
func Typed[B kmsg.Request](fn func(ctx context.Context, req *Request, body B) (Response, error)) Handler {
	return func(ctx context.Context, req *Request) (Response, error) {
		b, ok := req.Body.(B)
		if !ok {
			return Response{}, fmt.Errorf("%w: %T for key %d", ErrBadBody, req.Body, req.Key)
		}
		return fn(ctx, req, b)
	}
}

// Replying adapts a handler that always answers (it never closes the connection) to a
// Handler: Typed, with the response wrapped by Reply.
//
//	kernel.Claim{Key: kmsg.Metadata, Min: 0, Max: 12, Handler: kernel.Replying(m.metadata)}
//	func (m *Module) metadata(ctx context.Context, req *kernel.Request, r *kmsg.MetadataRequest) *kmsg.MetadataResponse
//
// The method value is bound when the claim is built, so its receiver must be set by then.
func Replying[B kmsg.Request, R kmsg.Response](fn func(ctx context.Context, req *Request, body B) R) Handler {
	return Typed(func(ctx context.Context, req *Request, b B) (Response, error) {
		return Reply(fn(ctx, req, b)), nil
	})
}

// Claimed is a claim as the kernel recorded it.
type Claimed struct {
	Key      kmsg.Key
	Min, Max int16
	Owner    string // the claiming module's ID, "kernel" for ApiVersions
}

// Claims returns the API keys claimed, in key order: once Start has returned, exactly
// what ApiVersions advertises. It reads what Start wrote, so call it after Start.
func (k *Kernel) Claims() []Claimed {
	var out []Claimed
	for key, s := range k.handlers {
		if s != nil {
			out = append(out, Claimed{Key: kmsg.Key(key), Min: s.minV, Max: s.maxV, Owner: s.owner})
		}
	}
	return out
}
