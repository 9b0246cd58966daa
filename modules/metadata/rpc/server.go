package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"
)

// Server-side bounds of the controller RPC.
const (
	// rpcServerIdle closes a connection that sends no request for this long.
	rpcServerIdle = 5 * time.Minute
	// rpcIOTimeout bounds reading the rest of a frame once it started, and writing a
	// response.
	rpcIOTimeout = 30 * time.Second
)

// ServeConn serves one controller RPC connection (the mux has read nothing but peeked
// at its first byte) until ctx is cancelled: handle answers each decoded request with
// its response body. Requests are answered one at a time, in order. A frame that does
// not parse closes the connection, after a log line on log.
func ServeConn(ctx context.Context, c net.Conn, log *slog.Logger, handle func(ctx context.Context, msg any) []byte) {
	defer c.Close()
	var magic [4]byte
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	if _, err := io.ReadFull(c, magic[:]); err != nil || magic != Magic {
		log.Warn("refused controller rpc connection: bad preamble", "remote", c.RemoteAddr().String())
		return
	}
	for ctx.Err() == nil {
		_ = c.SetReadDeadline(time.Now().Add(rpcServerIdle))
		frame, err := readFrame(c, maxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug("controller rpc connection closed", "remote", c.RemoteAddr().String(), "err", err)
			}
			if errors.Is(err, ErrFrame) {
				log.Warn("refused controller rpc frame", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		h, msg, err := decodeRequest(frame)
		if err != nil {
			log.Warn("refused controller rpc request", "remote", c.RemoteAddr().String(), "key", h.key, "err", err)
			return
		}
		body := handle(ctx, msg)
		_ = c.SetWriteDeadline(time.Now().Add(rpcIOTimeout))
		if _, err := c.Write(appendResponseFrame(nil, h.correlation, body)); err != nil {
			return
		}
	}
}
