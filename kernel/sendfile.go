package kernel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// writeChunks writes hdr then chunks to nc: runs of byte chunks with one writev, file
// ranges with sendfile(2) at explicit offsets (the files' seek positions are never used,
// so concurrent readers of one segment file do not interfere). Connections that are not
// plain TCP (TLS, in-memory pipes) get the file bytes through a bounded copy.
func writeChunks(nc net.Conn, hdr []byte, chunks []Chunk) error {
	bufs := net.Buffers{hdr}
	flush := func() error {
		if len(bufs) == 0 {
			return nil
		}
		_, err := bufs.WriteTo(nc)
		bufs = bufs[:0]
		return err
	}
	for i := range chunks {
		ch := &chunks[i]
		if ch.File == nil {
			if len(ch.Bytes) > 0 {
				bufs = append(bufs, ch.Bytes)
			}
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if ch.N == 0 {
			continue
		}
		if err := sendFile(nc, ch.File, ch.Off, ch.N); err != nil {
			return err
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
