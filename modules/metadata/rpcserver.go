package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Server-side bounds of the controller RPC.
const (
	// rpcServerIdle closes a connection that sends no request for this long.
	rpcServerIdle = 5 * time.Minute
	// rpcIOTimeout bounds reading the rest of a frame once it started, and writing a
	// response.
	rpcIOTimeout = 30 * time.Second
)

// serveRPCConn serves one controller RPC connection (the mux has read nothing but
// peeked at its first byte). Requests are answered one at a time, in order. A frame
// that does not parse closes the connection, after a log line.
func (m *Module) serveRPCConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	var magic [4]byte
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	if _, err := io.ReadFull(c, magic[:]); err != nil || magic != rpcMagic {
		m.log.Warn("refused controller rpc connection: bad preamble", "remote", c.RemoteAddr().String())
		return
	}
	for ctx.Err() == nil {
		_ = c.SetReadDeadline(time.Now().Add(rpcServerIdle))
		frame, err := readFrame(c, maxRPCFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				m.log.Debug("controller rpc connection closed", "remote", c.RemoteAddr().String(), "err", err)
			}
			if errors.Is(err, errRPCFrame) {
				m.log.Warn("refused controller rpc frame", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		h, msg, err := decodeRPCRequest(frame)
		if err != nil {
			m.log.Warn("refused controller rpc request", "remote", c.RemoteAddr().String(), "key", h.key, "err", err)
			return
		}
		body := m.handleRPC(ctx, msg)
		_ = c.SetWriteDeadline(time.Now().Add(rpcIOTimeout))
		if _, err := c.Write(appendResponseFrame(nil, h.correlation, body)); err != nil {
			return
		}
	}
}

// handleRPC runs one decoded request and returns the response body.
func (m *Module) handleRPC(ctx context.Context, msg any) []byte {
	switch req := msg.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return m.ctlRegister(ctx, req).AppendTo(nil)
	case *kmsg.BrokerHeartbeatRequest:
		return m.ctlHeartbeat(req).AppendTo(nil)
	case *kmsg.DescribeQuorumRequest:
		return m.describeQuorumLocal(req).AppendTo(nil)
	case *forwardRequest:
		return m.serveForward(ctx, req).appendTo(nil)
	case *addObserverRequest:
		return m.ctlAddObserver(ctx, req).appendTo(nil)
	}
	m.log.Error("controller rpc: no handler for message", "type", fmt.Sprintf("%T", msg))
	return nil
}
