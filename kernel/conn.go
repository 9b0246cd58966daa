package kernel

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Connection handling.
//
// Each connection has two goroutines: a reader that reads and decodes frames (reading
// ahead up to pipelineDepth requests, and no more unanswered bytes than
// socket.request.max.bytes unless one request alone is that big), and a processor that
// runs handlers one request at a time and writes each response before taking the next.
// So responses go out in request order, and requests on one connection are applied in
// order (a producer's pipelined batches to one partition keep their order, which
// idempotence relies on).
// Clients that want concurrency open more connections, as with Kafka.

const (
	pipelineDepth = 16
	// readBufferSize is the reader's buffer: one read syscall takes in a small
	// request's size prefix and body together (and any small requests pipelined after
	// it), instead of one read for the prefix and one for the body. Reads larger than
	// it bypass the buffer and land in the frame directly.
	readBufferSize = 16 << 10
	// defaultWriteTimeout bounds how long a response write may make no progress
	// (per writeStep bytes, not per response).
	defaultWriteTimeout = 30 * time.Second
)

type conn struct {
	k      *Kernel
	nc     net.Conn
	info   *ConnInfo
	log    *slog.Logger
	closed atomic.Bool
	// stop makes the reader stop taking new requests (graceful shutdown).
	stopOnce sync.Once
	stop     chan struct{}
	wbuf     []byte
	// dmu guards the read deadline, so the reader, the processor and stopReading
	// cannot overwrite each other's choice (a stop must not be undone by the reader
	// arming the idle timer).
	dmu      sync.Mutex
	stopped  bool // stopReading was called
	inflight int  // requests read and not yet answered
	// queued is the bytes of requests read (or being read) and not yet answered,
	// bounded by the max request size so one connection pins at most about that much
	// (a client that pipelines big requests and never reads its answers). Guarded by
	// dmu; freed wakes a reader waiting for room; quit closes when the processor ends.
	queued int
	freed  chan struct{}
	quit   chan struct{}

	// sasl is the SASL state on SASL listeners (nil elsewhere); processor goroutine
	// only (sasl.go).
	sasl *saslConn
	// preAuth: a SASL connection not yet authenticated, so frames are bounded by
	// sasl.server.max.receive.size. Set by the processor, read by the reader.
	preAuth atomic.Bool
	// closeAfter: the processor closes the connection once the current response is
	// written (a failed authentication).
	closeAfter bool
	// reserved: the broker-wide budget the frame being read holds, set by admitFrame;
	// reader goroutine only. It passes to the frame once read.
	reserved int64
	// onClose runs once when the connection ends: it gives back its connection-limit
	// slots (connlimit.go).
	onClose func()
	// mutedUntil: the processor takes no request before this time (a throttled
	// client's connection is muted, KIP-219). Processor goroutine only.
	mutedUntil time.Time
}

func (k *Kernel) acceptLoop(ln net.Listener, l *listener, ll *listenerLimits) {
	name := l.name
	defer k.acceptWG.Done()
	var delay time.Duration
	blocked := func(reason string) {
		k.mConnThrottled.Add(1)
		if ok, dropped := k.limitLog.Allow(time.Now()); ok {
			k.log.Warn("connection accept delayed", "listener", name, "limit", reason, "dropped_similar", dropped)
		}
	}
	for {
		// max.connections and the creation rate: wait before accepting (connlimit.go).
		if !k.limits.waitSlot(ll, k.acceptStop, blocked) {
			return
		}
		nc, err := ln.Accept()
		if err != nil {
			k.limits.putSlot(ll)
		}
		if err != nil {
			if k.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors (EMFILE, ENFILE) or another failure: the pending
			// connection stays in the backlog, so retrying at once would spin. Back
			// off (5 ms doubling to 1 s, as net/http does), log at most one line per
			// acceptLogEvery, and retry until it works again.
			delay = acceptBackoff(delay)
			k.mAcceptErrors.Add(1)
			if ok, dropped := k.acceptLog.Allow(time.Now()); ok {
				k.log.Warn("accept failed; backing off", "listener", name, "err", err, "retry_in", delay, "dropped_similar", dropped,
					"hint", "out of file descriptors? raise the broker's RLIMIT_NOFILE (ulimit -n) or lower max.connections")
			}
			if !k.acceptPause(delay) {
				return
			}
			continue
		}
		delay = 0
		remote := nc.RemoteAddr()
		ip, ok := k.limits.addIP(remote)
		if !ok {
			// max.connections.per.ip: closed at once, as Kafka does. Counted first, so
			// whoever sees the close also sees the count.
			k.mConnRefused.Add(1)
			nc.Close()
			k.limits.putSlot(ll)
			if ok, dropped := k.limitLog.Allow(time.Now()); ok {
				k.log.Warn("connection refused: too many from one address (max.connections.per.ip)",
					"listener", name, "remote", remote.String(), "limit", k.limits.limitFor(ip), "dropped_similar", dropped)
			}
			continue
		}
		if k.quotas != nil {
			if d := k.quotas.AdmitConnection(addrIP(remote), time.Now()); d > 0 {
				k.throttleConn(nc, d, func() { k.limits.dropIP(ip); k.limits.putSlot(ll) })
				if ok, dropped := k.limitLog.Allow(time.Now()); ok {
					k.log.Warn("connection throttled: the address is over its connection_creation_rate quota; closing it after the throttle time",
						"listener", name, "remote", remote.String(), "throttle", d, "dropped_similar", dropped)
				}
				continue
			}
		}
		k.mConns.Add(1)
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if l.tls != nil {
			// No I/O here: the handshake runs on the connection's goroutine.
			nc = tls.Server(nc, l.tls)
		}
		c := &conn{
			k:     k,
			nc:    nc,
			info:  &ConnInfo{ID: k.connID.Add(1), Listener: name, Protocol: l.protocol, Remote: remote, Principal: Anonymous, host: hostOf(remote)},
			stop:  make(chan struct{}),
			freed: make(chan struct{}, 1),
			quit:  make(chan struct{}),
			onClose: func() {
				k.limits.dropIP(ip)
				k.limits.putSlot(ll)
			},
		}
		if l.protocol == ProtocolSASLPlaintext || l.protocol == ProtocolSASLSSL {
			c.sasl = &saslConn{}
			c.preAuth.Store(true)
		}
		c.log = k.log.With("conn", c.info.ID, "remote", remote.String())
		k.conns.Store(c, struct{}{})
		k.connWG.Add(1)
		go c.serve()
	}
}

// throttleConn holds nc, a connection over its address's connection_creation_rate, for
// d (at most maxMute) without reading it, then closes it and calls release (KIP-612:
// the client sees its connection closed only after the throttle time, so it does not
// reconnect at once). Its slot stays taken meanwhile, so max.connections bounds the
// connections held. Shutdown closes it at once.
func (k *Kernel) throttleConn(nc net.Conn, d time.Duration, release func()) {
	k.mConnThrottledQuota.Add(1)
	k.connWG.Add(1)
	go func() {
		defer k.connWG.Done()
		t := time.NewTimer(min(d, maxMute))
		defer t.Stop()
		select {
		case <-t.C:
		case <-k.acceptStop:
		}
		nc.Close()
		release()
	}()
}

// acceptBackoff is the wait after a failed accept, given the last one (0 after a
// success): 5 ms, doubling, at most 1 s.
func acceptBackoff(last time.Duration) time.Duration {
	return min(max(2*last, 5*time.Millisecond), time.Second)
}

// acceptLogEvery bounds "accept failed" lines: one per window per broker, with the
// count of those dropped.
const acceptLogEvery = 10 * time.Second

// acceptPause waits d after a failed accept; false when accepting stopped meanwhile.
func (k *Kernel) acceptPause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-k.acceptStop:
		return false
	}
}

// stopReading stops the reader at the next frame boundary; requests already read are
// still processed and answered.
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.dmu.Lock()
		defer c.dmu.Unlock()
		c.stopped = true
		// Wake a reader blocked waiting for the next frame.
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

// armReadDeadline sets the read deadline for the frame the reader waits for: now once
// stopping; none while a request is in flight (a connection waiting for its answer is
// not idle, however long the handler takes); otherwise connections.max.idle.ms.
func (c *conn) armReadDeadline() {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	switch {
	case c.stopped:
		_ = c.nc.SetReadDeadline(time.Now())
	case c.inflight > 0 || c.k.idle <= 0:
		_ = c.nc.SetReadDeadline(time.Time{})
	default:
		_ = c.nc.SetReadDeadline(time.Now().Add(c.k.idle))
	}
}

// addInflight counts requests read but not yet answered.
func (c *conn) addInflight(n int) {
	c.dmu.Lock()
	c.inflight += n
	c.dmu.Unlock()
}

// errStopped: the reader stopped while waiting for room for the next request.
var errStopped = errors.New("connection stopping")

// admit waits until a frame of n bytes fits in the connection's request budget of
// limit bytes (a frame always fits when nothing else is queued), then counts it.
func (c *conn) admit(n, limit int) error {
	for {
		c.dmu.Lock()
		ok := c.queued == 0 || c.queued+n <= limit
		if ok {
			c.queued += n
		}
		c.dmu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-c.freed:
		case <-c.stop:
			return errStopped
		case <-c.quit:
			return net.ErrClosed
		}
	}
}

// admitFrame bounds a frame whose size prefix was just read: before a SASL connection
// authenticated, by sasl.server.max.receive.size (an anonymous client must not make the
// broker allocate a request's worth; preAuth is read here, once the size arrived, as
// the processor clears it before it answers the last authentication step), then by the
// connection's request budget (admit).
func (c *conn) admitFrame(n int) error {
	limit := int(c.k.maxReq)
	if c.preAuth.Load() {
		if n > int(c.k.saslMaxRecv) {
			return fmt.Errorf("%w: %d before authentication (sasl.server.max.receive.size %d)", ErrFrameSize, n, c.k.saslMaxRecv)
		}
		// The read-ahead budget shrinks too: pipelined pre-auth frames pin at most
		// about one sasl.server.max.receive.size, not pipelineDepth of them.
		limit = int(c.k.saslMaxRecv)
	}
	if err := c.admit(n, limit); err != nil {
		return err
	}
	// Then by the broker-wide budget (queued.max.request.bytes, reqbudget.go).
	if b := c.k.reqBudget; b != nil {
		blocked := func() {
			c.k.mBudgetWaits.Add(1)
			if ok, dropped := c.k.budgetLog.Allow(time.Now()); ok {
				c.log.Info("request budget spent; pausing reads (queued.max.request.bytes)",
					"frame_bytes", n, "in_use", b.inUse(), "limit", b.limit, "dropped_similar", dropped)
			}
		}
		if err := b.acquire(int64(n), c.stop, c.quit, blocked); err != nil {
			c.release(n)
			if errors.Is(err, errBudgetCancelled) {
				return errStopped
			}
			return err
		}
		c.reserved = int64(n)
	}
	return nil
}

// releaseGlobal returns a frame's reservation to the broker-wide budget.
func (c *conn) releaseGlobal(n int64) {
	if c.k.reqBudget != nil && n > 0 {
		c.k.reqBudget.release(n)
	}
}

// release returns a frame's bytes to the budget.
func (c *conn) release(n int) {
	c.dmu.Lock()
	c.queued -= n
	c.dmu.Unlock()
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// frame is a request read off the wire, not yet decoded.
type frame struct {
	buf []byte
	// produce: a Produce request, whose buffer goes back to the pool once answered
	// (framepool.go).
	produce bool
	// reserved: the bytes this frame holds of the broker-wide budget.
	reserved int64
	// readAt: when the frame was read whole (the start of its request's time).
	readAt time.Time
}

func (c *conn) serve() {
	defer c.k.connWG.Done()
	if c.onClose != nil {
		defer c.onClose()
	}
	defer c.k.conns.Delete(c)
	defer c.nc.Close()

	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := c.handshake(c.k.baseCtx, tc); err != nil {
			select {
			case <-c.stop: // shutting down: not the client's fault
				c.log.Debug("TLS handshake cut by shutdown", "err", err)
			default:
				c.logRejected("TLS connection refused", err)
			}
			return
		}
	}
	frames := make(chan frame, pipelineDepth)
	var readerDone sync.WaitGroup
	readerDone.Add(1)
	go func() {
		defer readerDone.Done()
		defer close(frames)
		c.readLoop(frames)
	}()
	ctx := c.k.baseCtx
	for f := range frames {
		// Before authentication no buffer goes back to the pool: a raw SASL token may
		// look like a Produce frame, and the exchange may keep its bytes.
		recycle := f.produce && !c.preAuth.Load()
		c.waitMuted()
		err := c.process(ctx, f.buf, f.readAt)
		c.release(len(f.buf))
		c.releaseGlobal(f.reserved)
		if recycle {
			c.k.frames.put(f.buf)
		}
		if err == nil {
			c.addInflight(-1)
			c.armReadDeadline() // the idle clock starts again once nothing is in flight
		}
		if err != nil {
			if !c.closed.Load() {
				c.log.Debug("closing connection", "err", err)
			}
			c.closed.Store(true)
			close(c.quit)
			c.nc.Close() // unblocks the reader
			for f := range frames {
				c.releaseGlobal(f.reserved)
			}
			break
		}
	}
	readerDone.Wait()
}

func (c *conn) readLoop(out chan<- frame) {
	// produce: the last frame was a Produce request, so the next likely is one too and
	// is read into a pooled buffer (a producer's connection carries little else).
	produce := false
	br := bufio.NewReaderSize(c.nc, readBufferSize)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		c.armReadDeadline()
		var buf []byte
		if produce {
			buf = c.k.frames.get()
		}
		c.reserved = 0
		buf, err := ReadFrame(br, buf, c.k.maxReq, c.admitFrame)
		if err != nil {
			// A frame cut short (or a closed connection) gives its reservation back.
			c.releaseGlobal(c.reserved)
			c.reserved = 0
			switch {
			case errors.Is(err, errStopped):
			case errors.Is(err, ErrFrameSize):
				c.k.mBadReqs.Add(1)
				c.log.Warn("rejecting frame; closing connection", "err", err)
			case errors.Is(err, os.ErrDeadlineExceeded):
				select {
				case <-c.stop:
				default:
					c.log.Debug("closing idle connection", "idle", c.k.idle)
				}
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET):
			default:
				if !c.closed.Load() {
					c.log.Debug("read failed", "err", err)
				}
			}
			return
		}
		c.addInflight(1)
		produce = isProduceFrame(buf)
		f := frame{buf: buf, produce: produce, reserved: c.reserved, readAt: time.Now()}
		c.reserved = 0
		select {
		case out <- f:
		case <-c.stop:
			c.releaseGlobal(f.reserved)
			return
		}
	}
}

// process decodes, dispatches and answers one request read at readAt. An error closes
// the connection.
func (c *conn) process(ctx context.Context, buf []byte, readAt time.Time) error {
	if c.sasl != nil && c.sasl.state == saslRawTokens {
		return c.saslRawToken(ctx, buf)
	}
	c.k.mRequests.Add(1)
	h, err := parseHeaderPrefix(buf)
	if err != nil {
		c.k.mBadReqs.Add(1)
		c.log.Warn("malformed request; closing connection", "err", err)
		return err
	}
	if c.sasl != nil {
		if err := c.sasl.admit(h.key, time.Now()); err != nil {
			c.logRejected("closing connection", err)
			return err
		}
	}
	if h.key == kmsg.SASLHandshake.Int16() || h.key == kmsg.SASLAuthenticate.Int16() {
		ctx = context.WithValue(ctx, connCtxKey{}, c)
	}
	var slot *handlerSlot
	if h.key >= 0 && int(h.key) < len(c.k.handlers) {
		slot = c.k.handlers[h.key]
	}
	if slot == nil {
		c.k.mBadReqs.Add(1)
		c.log.Warn("unknown api key; closing connection", "api_key", h.key, "api_version", h.version)
		return fmt.Errorf("unknown api key %d", h.key)
	}
	if h.version < slot.minV || h.version > slot.maxV {
		if h.key == kmsg.ApiVersions.Int16() {
			// KIP-511: answer an unknown ApiVersions version with v0 and
			// UNSUPPORTED_VERSION, listing what we support, so the client can retry.
			return c.writeMsg(h, c.k.apiVersionsFallback())
		}
		if resp := c.decodeUnsupported(h, buf); resp != nil {
			c.log.Warn("unsupported api version; answered UNSUPPORTED_VERSION", "api", kmsg.NameForKey(h.key), "api_version", h.version, "client_id", h.clientID)
			return c.writeMsg(h, resp)
		}
		c.k.mBadReqs.Add(1)
		c.log.Warn("unsupported api version; closing connection", "api_key", h.key, "api", kmsg.NameForKey(h.key), "api_version", h.version, "supported", fmt.Sprintf("%d-%d", slot.minV, slot.maxV))
		return fmt.Errorf("unsupported version %d of api %d", h.version, h.key)
	}
	body := kmsg.RequestForKey(h.key)
	body.SetVersion(h.version)
	rest, err := parseHeaderRest(&h, buf, body.IsFlexible())
	if err != nil {
		c.k.mBadReqs.Add(1)
		c.log.Warn("malformed request header; closing connection", "api_key", h.key, "err", err)
		return err
	}
	if err := decodeBody(body, rest); err != nil {
		c.k.mBadReqs.Add(1)
		c.log.Warn("malformed request body; closing connection", "api", kmsg.NameForKey(h.key), "api_version", h.version, "client_id", h.clientID, "err", err)
		return err
	}
	slot.m.count.Inc()
	slot.m.queue.Observe(time.Since(readAt).Seconds())
	defer slot.m.observeDone(readAt)
	req := &Request{Key: h.key, Version: h.version, CorrelationID: h.correlation, ClientID: h.clientID,
		Body: body, Conn: c.info, Authorizer: c.k.authz}
	var (
		waited  atomic.Int64
		started = time.Now()
	)
	hctx := ctx
	if c.k.quotas != nil {
		hctx = withWaitNote(ctx, &waited)
	}
	resp, err := c.runHandler(hctx, slot, req)
	if err != nil {
		c.log.Warn("request failed; closing connection", "api", kmsg.NameForKey(h.key), "api_version", h.version, "client_id", h.clientID, "err", err)
		return err
	}
	var requestThrottle time.Duration
	if c.k.quotas != nil && !exemptFromRequestQuota(req) {
		now := time.Now()
		requestThrottle = c.k.quotas.RequestThrottle(QuotaClientOf(req), h.key, now.Sub(started)-time.Duration(waited.Load()), now)
	}
	switch {
	case resp.NoResponse:
		c.mute(max(requestThrottle, resp.Throttle))
		return nil
	case resp.Body != nil:
		t := max(requestThrottle, resp.Throttle)
		if t > resp.Throttle && resp.Body.ThrottleFirst && len(resp.Body.Chunks) > 0 && len(resp.Body.Chunks[0].Bytes) >= 4 {
			binary.BigEndian.PutUint32(resp.Body.Chunks[0].Bytes, uint32(throttleMillis(t)))
		}
		if err := c.writeBody(h, body.IsFlexible(), resp.Body); err != nil {
			return err
		}
		c.mute(t)
		return nil
	case resp.Msg != nil:
		resp.Msg.SetVersion(h.version)
		after := c.applyThrottle(resp.Msg, requestThrottle)
		if err := c.writeMsg(h, resp.Msg); err != nil {
			return err
		}
		c.mute(after)
		if c.closeAfter {
			return errCloseAfterResponse
		}
		return nil
	default:
		return fmt.Errorf("handler for %s returned no response", kmsg.NameForKey(h.key))
	}
}

// maxMute bounds how long one response may mute a connection, whatever a quota said.
const maxMute = 5 * time.Minute

// throttleMillis is d as throttle_time_ms.
func throttleMillis(d time.Duration) int32 {
	return int32(min(d, maxMute).Milliseconds())
}

// applyThrottle raises msg's throttle_time_ms to requestThrottle and returns how long to
// mute the connection after writing msg. For versions whose clients wait before they
// send the request rather than after the response (before KIP-219), it waits here,
// before the response goes out, as Kafka delays such responses.
func (c *conn) applyThrottle(msg kmsg.Response, requestThrottle time.Duration) (after time.Duration) {
	tr, ok := msg.(kmsg.ThrottleResponse)
	if !ok {
		return requestThrottle
	}
	cur, throttlesAfter := tr.Throttle()
	t := max(requestThrottle, time.Duration(cur)*time.Millisecond)
	if t <= 0 {
		return 0
	}
	if st, ok := msg.(kmsg.SetThrottleResponse); ok && t > time.Duration(cur)*time.Millisecond {
		st.SetThrottle(throttleMillis(t))
	}
	if throttlesAfter {
		return t
	}
	c.mute(t)
	c.waitMuted()
	return 0
}

// mute holds the connection for d from now: the next request is taken only then.
func (c *conn) mute(d time.Duration) {
	if d <= 0 {
		return
	}
	if until := time.Now().Add(min(d, maxMute)); until.After(c.mutedUntil) {
		c.mutedUntil = until
	}
}

// waitMuted waits until the connection is no longer muted, or the broker stops.
func (c *conn) waitMuted() {
	d := time.Until(c.mutedUntil)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.stop:
	case <-c.k.baseCtx.Done():
	}
}

// exemptFromRequestQuota reports requests no request quota applies to: the version and
// authentication handshakes, and fetches of follower replicas (inter-broker traffic,
// which replication throttles govern).
func exemptFromRequestQuota(req *Request) bool {
	switch req.Key {
	case kmsg.ApiVersions.Int16(), kmsg.SASLHandshake.Int16(), kmsg.SASLAuthenticate.Int16():
		return true
	case kmsg.Fetch.Int16():
		if f, ok := req.Body.(*kmsg.FetchRequest); ok {
			return f.ReplicaID >= 0 || f.ReplicaState.ID >= 0
		}
	}
	return false
}

// decodeUnsupported decodes a request at a version kmsg knows but no module claims and
// returns the UNSUPPORTED_VERSION answer for it, or nil to close the connection.
func (c *conn) decodeUnsupported(h header, buf []byte) kmsg.Response {
	body := kmsg.RequestForKey(h.key)
	if body == nil || h.version < 0 || h.version > body.MaxVersion() {
		return nil
	}
	body.SetVersion(h.version)
	rest, err := parseHeaderRest(&h, buf, body.IsFlexible())
	if err != nil || decodeBody(body, rest) != nil {
		return nil
	}
	resp := unsupportedVersionResponse(body)
	if resp != nil {
		resp.SetVersion(h.version)
	}
	return resp
}

// decodeBody decodes a request body, turning a decoder panic into an error: a malformed
// request must never take the broker down.
func decodeBody(r kmsg.Request, b []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decode panicked: %v", p)
		}
	}()
	return r.ReadFrom(b)
}

// runHandler calls a handler, turning a panic into a closed connection and a log line
// with the stack, so one bad request cannot take the broker down.
func (c *conn) runHandler(ctx context.Context, slot *handlerSlot, req *Request) (resp Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("handler panicked", "api", kmsg.NameForKey(req.Key), "api_version", req.Version, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return slot.h(ctx, req)
}

func (c *conn) writeMsg(h header, msg kmsg.Response) error {
	flexHeader := msg.IsFlexible() && h.key != kmsg.ApiVersions.Int16()
	b := appendResponseHeader(c.wbuf[:0], h.correlation, flexHeader)
	b = msg.AppendTo(b)
	setFrameSize(b, int64(len(b)-4))
	c.wbuf = b
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // don't pin a large buffer on an idle connection
	}
	for len(b) > 0 {
		n := min(len(b), writeStep)
		c.renewWriteDeadline()
		if _, err := c.nc.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// renewWriteDeadline gives the next write (at most writeStep bytes) k.writeTimeout.
func (c *conn) renewWriteDeadline() {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.k.writeTimeout))
}

func (c *conn) writeBody(h header, flexible bool, body *Body) error {
	if body.Release != nil {
		defer body.Release()
	}
	hdr := appendResponseHeader(make([]byte, 0, 9), h.correlation, flexible && h.key != kmsg.ApiVersions.Int16())
	setFrameSize(hdr, int64(len(hdr)-4)+body.Size())
	if _, ok := c.nc.(*tls.Conn); !ok {
		return writeChunks(c.nc, hdr, body.Chunks, c.renewWriteDeadline, &c.k.inline)
	}
	// Under TLS there is no sendfile, and every Write is at least one TLS record and
	// one syscall: a fetch of many partitions would go out as a record per chunk. The
	// chunks are gathered into tlsWriteBuffer-sized writes instead, and file ranges
	// are read straight into the buffer (bufio.Writer.ReadFrom), with no copy buffer
	// per range.
	bw := c.k.tlsBufs.get(c.nc)
	defer c.k.tlsBufs.put(bw)
	if err := writeChunks(bufferedConn{Conn: c.nc, w: bw}, hdr, body.Chunks, c.renewWriteDeadline, &c.k.inline); err != nil {
		return err
	}
	c.renewWriteDeadline()
	return bw.Flush()
}

// tlsWriteBuffer is the size of the writes of a chunked response under TLS: four
// full TLS records.
const tlsWriteBuffer = 64 << 10

// bufWriterPool lends the buffers of chunked responses under TLS (one per Kernel; the
// zero value is ready).
type bufWriterPool struct{ p sync.Pool }

func (bp *bufWriterPool) get(w io.Writer) *bufio.Writer {
	if bw, ok := bp.p.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, tlsWriteBuffer)
}

func (bp *bufWriterPool) put(bw *bufio.Writer) {
	bw.Reset(nil) // drop the connection (and anything unflushed after an error)
	bp.p.Put(bw)
}

// bufferedConn is a connection whose writes go through w.
type bufferedConn struct {
	net.Conn
	w *bufio.Writer
}

func (b bufferedConn) Write(p []byte) (int, error) { return b.w.Write(p) }

// ReadFrom lets io.Copy of a file range read into the buffer directly.
func (b bufferedConn) ReadFrom(r io.Reader) (int64, error) { return b.w.ReadFrom(r) }

// logRejected logs a refused handshake or authentication, rate limited (a scanner or a
// misconfigured client fleet must not flood the log).
func (c *conn) logRejected(msg string, err error) {
	if ok, dropped := c.k.connLog.Allow(time.Now()); ok {
		c.log.Warn(msg, "listener", c.info.Listener, "err", err, "dropped_similar", dropped)
	}
}
