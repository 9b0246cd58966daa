package kernel

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler serves one decoded request. A returned error means "close this connection"
// (the request was so malformed that no response fits); per-resource failures are error
// codes inside the response.
type Handler func(ctx context.Context, req *Request) (Response, error)

// Request is one decoded request with what the kernel knows of its connection.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
	// Body is the decoded request (kmsg.RequestForKey(Key), version set).
	Body kmsg.Request
	// Conn is the connection the request came on.
	Conn *ConnInfo
	// Authorizer answers whether Conn.Principal may act on a resource. Handlers must ask
	// it before touching a resource. Never nil.
	Authorizer Authorizer
}

// Allowed reports whether the request's principal may perform op on the resource.
func (r *Request) Allowed(ctx context.Context, op Operation, typ ResourceType, name string) bool {
	return r.Authorizer.Authorize(ctx, r.Conn.Principal, r.Conn.Host(), op, Resource{Type: typ, Name: name})
}

// ConnInfo is per-connection state visible to handlers. The kernel sets Principal when
// the connection authenticates (a TLS client certificate, or SASL); it changes only on
// the connection's processing goroutine, between requests, so a handler reads it
// without locks.
type ConnInfo struct {
	ID       uint64
	Listener string
	// Protocol is the listener's security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or
	// SASL_SSL (listener.security.protocol.map).
	Protocol  string
	Remote    net.Addr
	Principal Principal
	// TLS is the connection's TLS state after the handshake; nil on a plaintext
	// listener.
	TLS *tls.ConnectionState
	// ClientSoftwareName and ClientSoftwareVersion are what the client said in its
	// last ApiVersions v3+ (KIP-511), at most MaxClientSoftwareLen bytes each; empty
	// before it. Client telemetry (KIP-714) selects subscriptions on them.
	ClientSoftwareName, ClientSoftwareVersion string
	// host caches Host() (set by the kernel when it accepts the connection).
	host string
}

// Host is the remote IP address without the port, as ACLs name hosts ("" when the
// connection has no IP address). Every authorization asks it, so the kernel computes
// it once per connection (host); a ConnInfo built elsewhere computes it per call.
func (c *ConnInfo) Host() string {
	if c.host != "" {
		return c.host
	}
	return hostOf(c.Remote)
}

func hostOf(remote net.Addr) string {
	switch a := remote.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case nil:
		return ""
	}
	host, _, err := net.SplitHostPort(remote.String())
	if err != nil {
		return ""
	}
	return host
}

// Response is what a handler returns. Exactly one of Msg, Body or NoResponse is set.
type Response struct {
	// Msg is encoded by the kernel at the request's version.
	Msg kmsg.Response
	// Body is a pre-encoded response body (everything after the response header),
	// written with writev + sendfile.
	Body *Body
	// NoResponse sends nothing (Produce with acks=0).
	NoResponse bool
	// Throttle is the throttle time a handler charged for a Body response (it wrote it
	// into the body; see Body.ThrottleFirst): the kernel holds the connection that long
	// after the answer (seam_quotas.go). Msg responses carry theirs in the message.
	Throttle time.Duration
}

// Reply wraps a kmsg response.
func Reply(msg kmsg.Response) Response { return Response{Msg: msg} }

// Body is a response body made of chunks: bytes, or ranges of files sent with sendfile
// at explicit offsets (the file's seek position is never used or moved).
type Body struct {
	Chunks []Chunk
	// ThrottleFirst: Chunks[0].Bytes begins with the response's throttle_time_ms (an
	// int32, as Fetch v1+ does), so the kernel can raise it to a request-time throttle.
	ThrottleFirst bool
	// Release is called once after the body was written or dropped (it unpins files).
	Release func()
}

// Size returns the body's length in bytes.
func (b *Body) Size() int64 {
	var n int64
	for i := range b.Chunks {
		n += b.Chunks[i].Len()
	}
	return n
}

// Chunk is either Bytes or a File range [Off, Off+N).
type Chunk struct {
	Bytes []byte
	File  *os.File
	Off   int64
	N     int64
}

// Len is the chunk's length in bytes.
func (c *Chunk) Len() int64 {
	if c.File != nil {
		return c.N
	}
	return int64(len(c.Bytes))
}
