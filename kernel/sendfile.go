package kernel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// writeStep is how many bytes one write deadline covers: renew is called before each
// step, so a write timeout bounds a stall, not a whole response (a 50 MB fetch to a
// slow link may take minutes and still be progressing).
const writeStep = 1 << 20

// Small file ranges are read into memory and written with the bytes around them.
//
// A response that names many partitions with a little data each (a consumer at the
// tail of a thousand partitions) would otherwise cost two syscalls per partition, a
// writev of the bytes before the range and a sendfile of the range, at ~5-8 us each on
// a VM. A range of at most inlineMax bytes is read with one pread into a pooled buffer
// instead and the whole run goes out in one writev: one syscall per partition plus one,
// and a copy of a few KiB that costs less than the syscall it saves. Larger ranges are
// sent with sendfile (zero-copy), and at most inlineBudget bytes per response are
// inlined.
const (
	inlineMax    = 16 << 10
	inlineBudget = 256 << 10
)

// inlinePool holds inlineBudget-sized buffers for inlined file ranges (one per Kernel;
// the zero value is ready).
type inlinePool struct{ p sync.Pool }

func (ip *inlinePool) get() *[]byte {
	if b, ok := ip.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, inlineBudget)
	return &b
}

func (ip *inlinePool) put(b *[]byte) {
	*b = (*b)[:0]
	ip.p.Put(b)
}

// writeChunks writes hdr then chunks to nc: runs of byte chunks (and small file ranges
// read into memory, see inlineMax) with writev, other file ranges with sendfile(2) at
// explicit offsets (the files' seek positions are never used, so concurrent readers of
// one segment file do not interfere). Connections that are not plain TCP (TLS,
// in-memory pipes) get the file bytes through a bounded copy. renew (re)arms the write
// deadline; it is called before every writeStep bytes at most. pool lends the buffers
// for inlined ranges.
func writeChunks(nc net.Conn, hdr []byte, chunks []Chunk, renew func(), pool *inlinePool) error {
	bufs := net.Buffers{hdr}
	pending := len(hdr)
	var inline *[]byte // pooled; its bytes are referenced by bufs until the last flush
	defer func() {
		if inline != nil {
			pool.put(inline)
		}
	}()
	flush := func() error {
		if len(bufs) == 0 {
			return nil
		}
		renew()
		_, err := bufs.WriteTo(nc)
		bufs, pending = bufs[:0], 0
		return err
	}
	for i := range chunks {
		ch := &chunks[i]
		if ch.File == nil {
			b := ch.Bytes
			for len(b) > 0 {
				n := min(len(b), writeStep-pending)
				bufs = append(bufs, b[:n])
				pending += n
				b = b[n:]
				if pending >= writeStep {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			continue
		}
		if ch.N <= inlineMax && pending+int(ch.N) < writeStep {
			if inline == nil {
				inline = pool.get()
			}
			if b := *inline; cap(b)-len(b) >= int(ch.N) {
				// Appending within capacity: the slices already in bufs stay valid.
				at := len(b)
				b = b[:at+int(ch.N)]
				if m, err := ch.File.ReadAt(b[at:], ch.Off); m < int(ch.N) {
					if err == nil || errors.Is(err, io.EOF) {
						err = errShortFile
					}
					return err
				}
				*inline = b
				bufs = append(bufs, b[at:])
				pending += int(ch.N)
				continue
			}
		}
		if err := flush(); err != nil {
			return err
		}
		for off, n := ch.Off, ch.N; n > 0; {
			step := min(n, writeStep)
			renew()
			if err := sendFile(nc, ch.File, off, step); err != nil {
				return err
			}
			off, n = off+step, n-step
		}
	}
	return flush()
}

// errShortFile: the file ended before the range did (it was truncated under us). The
// connection must be closed: the frame length already promised those bytes.
var errShortFile = errors.New("file shorter than the range to send")

func sendFile(nc net.Conn, f *os.File, off, n int64) error {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		w, err := io.Copy(nc, io.NewSectionReader(f, off, n))
		if err == nil && w < n {
			err = errShortFile
		}
		return err
	}
	sc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	fc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	ctlErr := fc.Control(func(ffd uintptr) {
		werr := sc.Write(func(sfd uintptr) bool {
			for n > 0 {
				w, e := unix.Sendfile(int(sfd), int(ffd), &off, int(min(n, 1<<30)))
				if w > 0 {
					n -= int64(w)
				}
				switch {
				case e == unix.EAGAIN:
					return false // wait until writable (honours the write deadline)
				case e == unix.EINTR:
					continue
				case e != nil:
					sendErr = fmt.Errorf("sendfile: %w", e)
					return true
				case w == 0:
					sendErr = errShortFile
					return true
				}
			}
			return true
		})
		if werr != nil && sendErr == nil {
			sendErr = werr
		}
	})
	if ctlErr != nil {
		return ctlErr
	}
	if errors.Is(sendErr, syscall.EPIPE) || errors.Is(sendErr, syscall.ECONNRESET) {
		return net.ErrClosed
	}
	return sendErr
}
