package interbroker

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kclient"
	"github.com/sluicehq/sluice/kernel"
)

// Peers sends requests to the other brokers of the cluster: one connection per broker,
// dialed on first use with this broker's security (Security.Dial) and dropped when a
// request on it fails, so the next request dials again. A module that forwards work to
// another broker (the group coordinator's share state, the transaction coordinator's
// markers and partition additions) keeps one Peers and closes it when it stops.
//
// Invariant: a request goes out at the highest version both this build (kmsg) and the
// broker (its ApiVersions at dial time) know, never above MaxVersion; a broker that
// does not serve the key fails the request without sending it.
//
// Safe for concurrent use; each connection carries one request at a time (kclient.Conn).
type Peers struct {
	sec      *Security
	image    func() *kernel.Image
	clientID string

	mu     sync.Mutex
	conns  map[int32]*peerConn
	closed bool
}

type peerConn struct {
	conn *kclient.Conn
	vers map[int16]int16
}

// NewPeers returns a Peers dialing with sec and finding the brokers' endpoints in
// image(). With a nil sec every request fails (unit tests without a cluster).
func NewPeers(sec *Security, image func() *kernel.Image, clientID string) *Peers {
	return &Peers{sec: sec, image: image, clientID: clientID, conns: map[int32]*peerConn{}}
}

// Request sends req to broker id at the highest version both sides know (req's version
// is set) and returns its response. A failed request closes the connection.
func (p *Peers) Request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	c, err := p.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	max, ok := c.vers[req.Key()]
	if !ok {
		return nil, fmt.Errorf("broker %d does not serve %s", id, kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(min(max, req.MaxVersion()))
	resp, err := c.conn.Request(ctx, req)
	if err != nil {
		p.drop(id, c)
		return nil, fmt.Errorf("broker %d: %s: %w", id, kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// MaxVersion returns the highest version of key broker id serves (dialing it if need
// be), or -1 when it does not serve key.
func (p *Peers) MaxVersion(ctx context.Context, id int32, key int16) (int16, error) {
	c, err := p.conn(ctx, id)
	if err != nil {
		return -1, err
	}
	if v, ok := c.vers[key]; ok {
		return v, nil
	}
	return -1, nil
}

func (p *Peers) conn(ctx context.Context, id int32) (*peerConn, error) {
	p.mu.Lock()
	c, closed := p.conns[id], p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return nil, fmt.Errorf("broker %d: %w", id, net.ErrClosed)
	case c != nil:
		return c, nil
	case p.sec == nil:
		return nil, fmt.Errorf("broker %d: no inter-broker security configured", id)
	}
	conn, vers, err := p.sec.Dial(ctx, p.image(), id, p.clientID, kclient.DefaultMaxResponseBytes)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", id, err)
	}
	c = &peerConn{conn: conn, vers: vers}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch old := p.conns[id]; {
	case p.closed:
		_ = conn.Close()
		return nil, fmt.Errorf("broker %d: %w", id, net.ErrClosed)
	case old != nil:
		_ = conn.Close() // another request dialed first
		return old, nil
	}
	p.conns[id] = c
	return c, nil
}

// drop forgets c (if it is still broker id's connection) and closes it.
func (p *Peers) drop(id int32, c *peerConn) {
	p.mu.Lock()
	if p.conns[id] == c {
		delete(p.conns, id)
	}
	p.mu.Unlock()
	_ = c.conn.Close()
}

// Close closes every connection; later requests fail. Requests in flight fail too.
func (p *Peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id, c := range p.conns {
		_ = c.conn.Close()
		delete(p.conns, id)
	}
}
