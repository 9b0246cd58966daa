package kclient

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/sluicehq/sluice/kernel"
)

// Errors of a Conn.
var (
	// ErrCorrelation: a response carried another correlation id than its request.
	ErrCorrelation = errors.New("kclient: correlation id mismatch")
	// ErrFrameSize: a response frame is empty, negative or above MaxResponseBytes.
	ErrFrameSize = errors.New("kclient: invalid response size")
	// ErrBroken: an earlier request failed mid-stream; the Conn must be closed.
	ErrBroken = errors.New("kclient: connection broken by an earlier error")
	// ErrClosed: the Conn was closed.
	ErrClosed = errors.New("kclient: connection closed")
	// ErrTLS: the TLS handshake failed (a certificate the other side refused, or
	// one we could not verify).
	ErrTLS = errors.New("kclient: TLS handshake failed")
	// ErrSASL: SASL authentication failed: the broker refused the mechanism or the
	// credentials, or the exchange broke off. Dialling again with the same options
	// fails the same way; callers back off.
	ErrSASL = errors.New("kclient: SASL authentication failed")
)

// Defaults of Options.
const (
	DefaultDialTimeout      = 10 * time.Second
	DefaultMaxResponseBytes = 256 << 20
)

// Options configure a Conn.
type Options struct {
	// ClientID is sent in every request header ("" sends a null client id).
	ClientID string
	// DialTimeout bounds the TCP connect (default DefaultDialTimeout); the dial also
	// ends with its context.
	DialTimeout time.Duration
	// MaxResponseBytes bounds a response frame (default DefaultMaxResponseBytes).
	MaxResponseBytes int32
	// TLS, when set, runs a TLS handshake on the new connection (within the dial's
	// deadline). An empty ServerName is filled in with addr's host.
	TLS *tls.Config
	// SASL, when set, authenticates the connection after the TLS handshake (within
	// the dial's deadline): ApiVersions, SaslHandshake v1 naming the mechanism, then
	// SaslAuthenticate until the mechanism is done.
	SASL sasl.Mechanism
}

// Conn is one client connection to a Kafka-protocol broker.
type Conn struct {
	addr     string
	clientID string
	maxResp  int32

	mu     sync.Mutex // one request in flight; guards everything below
	nc     net.Conn
	corr   int32
	wbuf   []byte
	rbuf   []byte
	broken error // non-nil: the stream is unusable

	// Set by Dial, read-only after.
	versions    map[int16]int16 // from the ApiVersions a SASL dial sent; nil otherwise
	reauthAfter time.Time       // zero: the SASL session does not expire

	closeOnce sync.Once
}

// Dial connects to addr (host:port), runs the TLS handshake and SASL authentication
// the options ask for, all bounded by DialTimeout and ctx.
func Dial(ctx context.Context, addr string, o Options) (*Conn, error) {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kclient: dial %s: %w", addr, err)
	}
	if o.TLS != nil {
		cfg := o.TLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if dl, ok := ctx.Deadline(); ok {
			_ = tc.SetDeadline(dl)
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("%w: %s: %w", ErrTLS, addr, err)
		}
		_ = tc.SetDeadline(time.Time{})
		nc = tc
	}
	c := &Conn{addr: addr, clientID: o.ClientID, maxResp: o.MaxResponseBytes, nc: nc}
	if o.SASL != nil {
		if err := c.authenticate(ctx, o.SASL); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// ReauthAfter is when the connection should be replaced: a little before the SASL
// session lifetime the broker announced (connections.max.reauth.ms, KIP-368) ends,
// after which the broker closes it. Zero: never.
func (c *Conn) ReauthAfter() time.Time { return c.reauthAfter }

// Addr is the address the Conn was dialled to.
func (c *Conn) Addr() string { return c.addr }

// Close closes the connection. A running Request fails.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.nc.Close() })
	return err
}

// Request sends req at the version it carries (req.SetVersion) and returns its decoded
// response. The response's byte slices alias the Conn's read buffer until the next
// Request. An error other than one wrapping a context error or *kerr.Error means the
// Conn is broken (see ErrBroken).
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroken, c.broken)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp, err := c.roundTrip(ctx, req)
	if err != nil {
		c.broken = err
		ctxErr := ctx.Err()
		if _, ok := ctx.Deadline(); ok && ctxErr == nil && errors.Is(err, os.ErrDeadlineExceeded) {
			// The socket deadline we set from ctx fired a moment before ctx's timer.
			ctxErr = context.DeadlineExceeded
		}
		if ctxErr != nil {
			// The deadline we set from ctx fired (or ctx was cancelled): say so.
			return nil, fmt.Errorf("kclient: %s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, ctxErr)
		}
		return nil, fmt.Errorf("kclient: %s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	return resp, nil
}

// roundTrip writes req and reads its response under c.mu.
func (c *Conn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		if err := c.nc.SetDeadline(dl); err != nil {
			return nil, err
		}
	} else if err := c.nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	// Cancellation without a deadline: a past deadline unblocks the read or write.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.corr++
	corr := c.corr
	c.wbuf = appendRequest(c.wbuf[:0], req, corr, c.clientID)
	if _, err := c.nc.Write(c.wbuf); err != nil {
		return nil, err
	}
	var err error
	c.rbuf, err = readFrame(c.nc, c.rbuf, c.maxResp)
	if err != nil {
		return nil, err
	}
	b := c.rbuf
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d-byte response", ErrFrameSize, len(b))
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return nil, fmt.Errorf("%w: sent %d, got %d", ErrCorrelation, corr, got)
	}
	b = b[4:]
	// The ApiVersions response header is always v0 (no tags), so that a client that
	// sent a version the broker does not know can read it.
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		if b, err = skipTags(b); err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(b); err != nil {
		// A broker that does not know the ApiVersions version asked answers v0.
		if req.Key() != kmsg.ApiVersions.Int16() {
			return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		resp = req.ResponseKind()
		resp.SetVersion(0)
		if err0 := resp.ReadFrom(b); err0 != nil {
			return nil, fmt.Errorf("decode ApiVersions v%d response: %w", req.GetVersion(), err)
		}
	}
	return resp, nil
}

// appendRequest appends the frame of req: size, header (v1, or v2 when flexible), body.
func appendRequest(dst []byte, req kmsg.Request, corr int32, clientID string) []byte {
	dst = append(dst, 0, 0, 0, 0) // size, filled below
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if clientID == "" {
		dst = binary.BigEndian.AppendUint16(dst, 0xffff) // null
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
		dst = append(dst, clientID...)
	}
	if req.IsFlexible() {
		dst = append(dst, 0) // no tagged fields
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst, uint32(len(dst)-4))
	return dst
}

// readFrame reads one response frame with the kernel's frame reader (which grows buf as
// bytes arrive rather than trusting the size prefix); a bad size is also ErrFrameSize.
func readFrame(r io.Reader, buf []byte, maxSize int32) ([]byte, error) {
	buf, err := kernel.ReadFrame(r, buf, maxSize, nil)
	if errors.Is(err, kernel.ErrFrameSize) {
		return buf[:0], fmt.Errorf("%w: %w", ErrFrameSize, err)
	}
	return buf, err
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 || n > uint64(len(b)) {
		return nil, errors.New("kclient: malformed response header tags")
	}
	b = b[used:]
	for range n {
		if _, used = binary.Uvarint(b); used <= 0 {
			return nil, errors.New("kclient: malformed response header tag")
		}
		b = b[used:]
		sz, used := binary.Uvarint(b)
		if used <= 0 || sz > uint64(len(b)-used) {
			return nil, errors.New("kclient: malformed response header tag size")
		}
		b = b[used+int(sz):]
	}
	return b, nil
}

// APIVersions asks the broker which versions it supports and returns each key's
// maximum. It sends ApiVersions v3 (falling back to v0 when the broker answers
// UNSUPPORTED_VERSION, as KIP-511 asks).
func (c *Conn) APIVersions(ctx context.Context) (map[int16]int16, error) {
	if c.versions != nil {
		return maps.Clone(c.versions), nil // asked during a SASL dial
	}
	for _, v := range []int16{3, 0} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice", "1"
		r, err := c.Request(ctx, req)
		if err != nil {
			return nil, err
		}
		resp := r.(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode == kerr.UnsupportedVersion.Code && v > 0 && len(resp.ApiKeys) == 0 {
			continue
		}
		if resp.ErrorCode == kerr.UnsupportedVersion.Code {
			resp.ErrorCode = 0 // the v0 answer lists the keys anyway
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, fmt.Errorf("kclient: ApiVersions: %w", err)
		}
		out := make(map[int16]int16, len(resp.ApiKeys))
		for _, k := range resp.ApiKeys {
			out[k.ApiKey] = k.MaxVersion
		}
		return out, nil
	}
	return nil, fmt.Errorf("kclient: ApiVersions: %w", kerr.UnsupportedVersion)
}
