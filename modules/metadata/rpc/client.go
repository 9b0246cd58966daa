package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client-side bounds of the controller RPC.
const (
	rpcDialTimeout = 5 * time.Second
	// CallTimeout bounds a call whose ctx has no deadline.
	CallTimeout = 30 * time.Second
	// rpcMaxIdle is how many idle connections are kept per controller address.
	rpcMaxIdle = 4
	// rpcIdleFor is how long an idle connection is kept; the server closes idle
	// connections after rpcServerIdle, which is longer.
	rpcIdleFor = 60 * time.Second
)

// ErrNotSent: the request was not (entirely) written, so it is safe to retry it
// elsewhere. Other call errors may follow a request the controller executed.
var ErrNotSent = errors.New("metadata: controller rpc not sent")

// Client calls controllers. Connections are reused: a call takes an idle one for its
// address (or dials), and puts it back once it has the whole response.
type Client struct {
	mu     sync.Mutex
	idle   map[string][]*conn
	closed bool
	// errClosed is what a call after close wraps (with errRPCNotSent).
	errClosed error
	corr      int32
	tls       *TLS // nil: plaintext; read-only
}

type conn struct {
	c    net.Conn
	r    *bufio.Reader
	used time.Time
}

// NewClient returns a client whose calls after close fail with an error wrapping
// errRPCNotSent and errClosed. sec, when not nil, dials with mutual TLS (sec.Client).
func NewClient(errClosed error, sec *TLS) *Client {
	return &Client{idle: map[string][]*conn{}, errClosed: errClosed, tls: sec}
}

func (c *Client) get(ctx context.Context, addr string) (*conn, int32, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, 0, fmt.Errorf("%w: %w", ErrNotSent, c.errClosed)
	}
	c.corr++
	corr := c.corr
	c.mu.Unlock()
	for {
		c.mu.Lock()
		list := c.idle[addr]
		if len(list) == 0 {
			c.mu.Unlock()
			break
		}
		rc := list[len(list)-1]
		c.idle[addr] = list[:len(list)-1]
		c.mu.Unlock()
		if time.Since(rc.used) < rpcIdleFor && alive(rc) {
			return rc, corr, nil
		}
		_ = rc.c.Close()
	}
	nc, err := dial(ctx, addr, rpcDialTimeout, c.tls)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: dial %s: %w", ErrNotSent, addr, err)
	}
	_ = nc.SetWriteDeadline(time.Now().Add(rpcDialTimeout))
	if _, err := nc.Write(Magic[:]); err != nil {
		_ = nc.Close()
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrNotSent, addr, err)
	}
	return &conn{c: nc, r: bufio.NewReader(nc)}, corr, nil
}

// alive checks that the peer has not closed an idle connection: a read that times out
// at once means nothing is pending and the connection is open; EOF (or stray bytes)
// means it is unusable. This keeps a request from going out on a connection to a
// controller that has since stopped, where it could not tell "not sent" from "lost".
func alive(rc *conn) bool {
	// A deadline already passed fails the read before it looks at the socket, so
	// give the read a moment to see a pending EOF.
	_ = rc.c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := rc.r.Peek(1)
	_ = rc.c.SetReadDeadline(time.Time{})
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *Client) put(addr string, rc *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[addr]) >= rpcMaxIdle {
		_ = rc.c.Close()
		return
	}
	rc.used = time.Now()
	c.idle[addr] = append(c.idle[addr], rc)
}

// Close closes the idle connections; calls in flight close theirs when they end.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, list := range c.idle {
		for _, rc := range list {
			_ = rc.c.Close()
		}
	}
	c.idle = nil
}

// Call sends one request and returns the response body. A cancelled ctx interrupts the
// Call at once (the connection's deadline is moved to now).
func (c *Client) Call(ctx context.Context, addr string, key, version int16, body []byte) ([]byte, error) {
	rc, corr, err := c.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(CallTimeout)
	}
	_ = rc.c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = rc.c.SetDeadline(time.Now()) })
	frame := AppendRequestFrame(nil, key, version, corr, body)
	if _, err := rc.c.Write(frame); err != nil {
		stop()
		_ = rc.c.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrNotSent, addr, err)
	}
	resp, err := readFrame(rc.r, maxFrame)
	if err == nil {
		resp, err = parseResponseFrame(resp, corr)
	}
	if !stop() || err != nil {
		_ = rc.c.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("controller rpc to %s: %w", addr, err)
	}
	_ = rc.c.SetDeadline(time.Time{})
	c.put(addr, rc)
	return resp, nil
}

// CallKmsg sends a Kafka request and decodes its response.
func (c *Client) CallKmsg(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	body, err := c.Call(ctx, addr, req.Key(), req.GetVersion(), req.AppendTo(nil))
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s response: %v", ErrFrame, kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
