package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Framing and request headers.
//
// Every request and response is a size-prefixed frame:
//
//	| size int32 | payload (size bytes) |
//
// A request payload starts with a header whose version follows from the API key and
// version (kmsg tells whether a request version is "flexible"):
//
//	v0: | api_key int16 | api_version int16 | correlation_id int32 |
//	v1: v0 + | client_id nullable_string (int16 length, -1 = null) |
//	v2: v1 + | tagged_fields (uvarint count, then uvarint tag, uvarint size, bytes) |
//
// Every request but ControlledShutdown v0 uses header v1 or v2 (v2 when flexible).
// Response headers are | correlation_id int32 | (+ an empty tagged-field byte when the
// response is flexible; ApiVersions responses always use header v0 so clients that
// sent an unknown version can still read them).

// Frame and header errors. A connection that sends one is closed.
var (
	// ErrFrameSize: the size prefix is <= 0 or above the limit (socket.request.max.bytes
	// for requests).
	ErrFrameSize = errors.New("invalid frame size")
	// ErrHeader: the request header is truncated or malformed.
	ErrHeader = errors.New("malformed request header")
)

// ReadFrame reads one size-prefixed frame into buf (reused when large enough). It grows
// the buffer as bytes arrive rather than trusting the prefix, so a peer that claims a
// large size but sends nothing costs no memory. admit, when not nil, is called with the
// frame's size before its payload is read; an error from it is returned. A size outside
// [1, maxSize] is ErrFrameSize; a frame cut short is io.ErrUnexpectedEOF.
//
// It is the one frame reader of the tree: the kernel's connections, the metadata
// module's controller RPC and internal/kclient all read Kafka frames with it.
func ReadFrame(r io.Reader, buf []byte, maxSize int32, admit func(n int) error) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return buf, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n <= 0 || n > maxSize {
		return buf, fmt.Errorf("%w: %d (max %d)", ErrFrameSize, n, maxSize)
	}
	if admit != nil {
		if err := admit(int(n)); err != nil {
			return buf, err
		}
	}
	const step = 1 << 20
	buf = buf[:0]
	for remaining := int(n); remaining > 0; {
		c := min(remaining, step)
		if cap(buf)-len(buf) < c {
			want := len(buf) + max(c, min(remaining, 2*len(buf)))
			if want >= int(n) {
				// The last growth: leave an eighth of headroom, so a reused buffer
				// (kernel/framepool.go) fits the next, slightly larger frame without
				// growing again (each growth copies what was read so far).
				want = min(int(n)+int(n)/8, int(maxSize))
			}
			nb := make([]byte, len(buf), want)
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+c])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
		remaining -= c
	}
	return buf, nil
}

// header is a parsed request header.
type header struct {
	key, version int16
	correlation  int32
	clientID     string
}

// parseHeaderPrefix reads the fields common to every header version.
func parseHeaderPrefix(b []byte) (header, error) {
	if len(b) < 8 {
		return header{}, fmt.Errorf("%w: %d bytes", ErrHeader, len(b))
	}
	return header{
		key:         int16(binary.BigEndian.Uint16(b)),
		version:     int16(binary.BigEndian.Uint16(b[2:])),
		correlation: int32(binary.BigEndian.Uint32(b[4:])),
	}, nil
}

// parseHeaderRest reads client_id (v1+) and tagged fields (v2) after the 8-byte prefix,
// returning the body.
func parseHeaderRest(h *header, b []byte, flexible bool) ([]byte, error) {
	b = b[8:]
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: no client id", ErrHeader)
	}
	l := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	if l >= 0 {
		if int(l) > len(b) {
			return nil, fmt.Errorf("%w: client id length %d", ErrHeader, l)
		}
		h.clientID = string(b[:l])
		b = b[l:]
	} else if l != -1 {
		return nil, fmt.Errorf("%w: client id length %d", ErrHeader, l)
	}
	if !flexible {
		return b, nil
	}
	return skipTags(b)
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: tagged fields", ErrHeader)
	}
	b = b[used:]
	for i := uint64(0); i < n; i++ {
		_, used = binary.Uvarint(b) // tag
		if used <= 0 {
			return nil, fmt.Errorf("%w: tag", ErrHeader)
		}
		b = b[used:]
		sz, used := binary.Uvarint(b)
		if used <= 0 || sz > uint64(len(b)-used) {
			return nil, fmt.Errorf("%w: tag size", ErrHeader)
		}
		b = b[used+int(sz):]
	}
	return b, nil
}

// appendResponseHeader starts a response frame: a size placeholder (filled by
// finishFrame), the correlation id and, for flexible responses, an empty tag section.
func appendResponseHeader(dst []byte, correlation int32, flexibleHeader bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlation))
	if flexibleHeader {
		dst = append(dst, 0)
	}
	return dst
}

// setFrameSize writes the size prefix: total is the frame length without the prefix.
func setFrameSize(frame []byte, total int64) {
	binary.BigEndian.PutUint32(frame, uint32(total))
}
