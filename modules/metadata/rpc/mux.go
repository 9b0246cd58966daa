package rpc

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// sniffTimeout bounds how long a new connection may take to send its first byte.
const sniffTimeout = 10 * time.Second

// handshakeTimeout bounds a TLS handshake on the raft port, in Accept and in Dial.
const handshakeTimeout = 10 * time.Second

// TLS is the raft port's mutual TLS: Server is the listener's config (it must require
// and verify client certificates), Client returns the config of one dial to a host
// (presenting this broker's certificate). A nil *TLS is plaintext.
type TLS struct {
	Server *tls.Config
	Client func(serverName string) *tls.Config
}

// Mux is the raft.StreamLayer of the raft port: it accepts connections on one
// listener and looks at each one's first byte. Magic[0] hands the connection to
// the controller RPC server (serve); anything else goes to raft's NetworkTransport
// through Accept, with the byte read put back in front.
//
// With TLS, every accepted connection first completes the TLS handshake, on its own
// goroutine and within handshakeTimeout; only then is its first byte sniffed.
//
// Invariant: a connection is either raft's or the RPC server's, never both, and every
// accepted connection is closed by its owner (raft, serve, or Close for connections
// still being sniffed or queued).
type Mux struct {
	ln        net.Listener
	advertise net.Addr
	log       *slog.Logger
	tls       *TLS // nil: plaintext
	refused   logLimit
	serve     func(net.Conn) // owns conn; runs on a goroutine the mux tracks

	raftCh chan net.Conn
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{} // connections being sniffed or served as RPC, closed by Close
}

// NewMux starts accepting on ln. sec, when not nil, makes the port mutual TLS for
// accepted connections and for Dial.
func NewMux(ln net.Listener, advertise net.Addr, log *slog.Logger, serve func(net.Conn), sec *TLS) *Mux {
	m := &Mux{
		ln: ln, advertise: advertise, log: log, serve: serve, tls: sec,
		raftCh: make(chan net.Conn), done: make(chan struct{}),
		conns: map[net.Conn]struct{}{},
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.log.Warn("raft port accept", "err", err)
			select {
			case <-m.done:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		m.wg.Add(1)
		go m.sniff(c)
	}
}

// sniff reads the first byte of c and routes it.
// The connection is tracked (Close closes it) until it is handed to raft, which owns
// it from then on.
func (m *Mux) sniff(raw net.Conn) {
	defer m.wg.Done()
	if !m.track(raw) {
		_ = raw.Close()
		return
	}
	c := raw
	if m.tls != nil {
		tc := tls.Server(raw, m.tls.Server)
		_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
		if err := tc.Handshake(); err != nil {
			m.untrack(raw)
			_ = raw.Close()
			if ok, dropped := m.refused.allow(time.Now()); ok {
				m.log.Warn("refused raft port connection: TLS handshake (brokers need a certificate of the cluster's CA)",
					"remote", raw.RemoteAddr().String(), "err", err, "dropped", dropped)
			}
			return
		}
		_ = tc.SetDeadline(time.Time{})
		c = tc
	}
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReaderSize(c, 4096)
	first, err := br.Peek(1)
	if err != nil {
		m.untrack(raw)
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &peekedConn{Conn: c, r: br}
	if first[0] != Magic[0] {
		m.untrack(raw)
		select {
		case m.raftCh <- pc:
		case <-m.done:
			_ = c.Close()
		}
		return
	}
	defer m.untrack(raw)
	m.serve(pc)
}

func (m *Mux) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

// Tracked is how many connections are being sniffed or served as RPC.
func (m *Mux) Tracked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.conns)
}

func (m *Mux) untrack(c net.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conns, c)
}

// Accept returns the next raft connection.
func (m *Mux) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftCh:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, closes the RPC connections and waits for the mux's
// goroutines (the RPC handlers among them).
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.mu.Lock()
		for c := range m.conns {
			_ = c.Close()
		}
		m.conns = nil
		m.mu.Unlock()
	})
	m.wg.Wait()
	return err
}

// Addr is the advertised address when there is one.
func (m *Mux) Addr() net.Addr {
	if m.advertise != nil {
		return m.advertise
	}
	return m.ln.Addr()
}

// Dial opens a raft connection.
func (m *Mux) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+handshakeTimeout)
	defer cancel()
	return dial(ctx, string(address), timeout, m.tls)
}

// dial connects to addr, within timeout, and runs the TLS handshake of sec (nil:
// plaintext) within ctx.
func dial(ctx context.Context, addr string, timeout time.Duration, sec *TLS) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil || sec == nil {
		return nc, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	tc := tls.Client(nc, sec.Client(host))
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if dl, ok := hctx.Deadline(); ok {
		_ = tc.SetDeadline(dl)
	}
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("raft port %s: TLS handshake: %w", addr, err)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// logLimit lets one log line through per second.
type logLimit struct {
	mu      sync.Mutex
	last    time.Time
	dropped int
}

// allow reports whether a line may be logged now, and how many were held back since
// the last one.
func (l *logLimit) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) < time.Second {
		l.dropped++
		return false, 0
	}
	d := l.dropped
	l.last, l.dropped = now, 0
	return true, d
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

var _ raft.StreamLayer = (*Mux)(nil)
