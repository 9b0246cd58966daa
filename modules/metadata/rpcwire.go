package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The controller RPC (see doc.go, "Controller RPC"): a connection to a voter's raft port
// that starts with rpcMagic carries Kafka-framed requests and responses, one request at
// a time per connection.

// rpcMagic opens a controller RPC connection. Its first byte, 'S' (0x53), is never a
// raft rpc type (0-4 in hashicorp/raft 1.8), which is how the raft port tells the two
// apart. Frozen.
var rpcMagic = [4]byte{'S', 'L', 'C', 1}

// Controller RPC API keys. Kafka's own keys where Kafka has the API; Sluice's own
// messages use keys from 32000 (Kafka's keys are far below). Frozen.
const (
	rpcKeyDescribeQuorum     int16 = 55 // kmsg.DescribeQuorum
	rpcKeyBrokerRegistration int16 = 62 // kmsg.BrokerRegistration
	rpcKeyBrokerHeartbeat    int16 = 63 // kmsg.BrokerHeartbeat
	rpcKeyForward            int16 = 32000
	rpcKeyAddObserver        int16 = 32001
)

// Versions this code sends and accepts.
const (
	rpcVerDescribeQuorum     int16 = 2
	rpcVerBrokerRegistration int16 = 4
	rpcVerBrokerHeartbeat    int16 = 1
	rpcVerForward            int16 = 0
	rpcVerAddObserver        int16 = 0
)

// maxRPCFrame bounds one frame: a forwarded Extension entry of kernel's
// MaxExtensionValueBytes (32 MiB) is ~43 MB once base64'd in JSON.
const maxRPCFrame = 64 << 20

// errRPCFrame marks bytes that are not a valid controller RPC frame or message.
var errRPCFrame = errors.New("metadata: malformed controller rpc frame")

// rpcHeader is a request header (Kafka request header v2: flexible, with tags).
type rpcHeader struct {
	key, version int16
	correlation  int32
}

// readFrame reads one size-prefixed frame, refusing sizes outside [0, max]. It grows
// its buffer as bytes arrive, so a peer that claims a large size and sends nothing
// costs nothing.
func readFrame(r io.Reader, maxSize int) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 0 || int(n) > maxSize {
		return nil, fmt.Errorf("%w: frame of %d bytes, at most %d", errRPCFrame, n, maxSize)
	}
	buf := make([]byte, 0, min(int(n), 64<<10))
	for len(buf) < int(n) {
		c := min(int(n)-len(buf), 1<<20)
		if cap(buf)-len(buf) < c {
			nb := make([]byte, len(buf), len(buf)+max(c, len(buf)))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+c])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// parseRequestFrame splits a request frame (after the size) into its header and body.
// Every controller RPC request uses the flexible header (v2): key, version,
// correlation id, nullable client id, tagged fields.
func parseRequestFrame(b []byte) (rpcHeader, []byte, error) {
	if len(b) < 10 {
		return rpcHeader{}, nil, fmt.Errorf("%w: header of %d bytes", errRPCFrame, len(b))
	}
	h := rpcHeader{
		key:         int16(binary.BigEndian.Uint16(b)),
		version:     int16(binary.BigEndian.Uint16(b[2:])),
		correlation: int32(binary.BigEndian.Uint32(b[4:])),
	}
	l := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	switch {
	case l >= 0 && int(l) <= len(b):
		b = b[l:]
	case l == -1:
	default:
		return h, nil, fmt.Errorf("%w: client id length %d", errRPCFrame, l)
	}
	body, err := skipTaggedFields(b)
	return h, body, err
}

// skipTaggedFields skips a tagged-field section.
func skipTaggedFields(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: tagged fields", errRPCFrame)
	}
	b = b[used:]
	for range n {
		if _, used = binary.Uvarint(b); used <= 0 {
			return nil, fmt.Errorf("%w: tag", errRPCFrame)
		}
		b = b[used:]
		sz, used := binary.Uvarint(b)
		if used <= 0 || sz > uint64(len(b)-used) {
			return nil, fmt.Errorf("%w: tag size", errRPCFrame)
		}
		b = b[used+int(sz):]
	}
	return b, nil
}

// appendRequestFrame appends a whole request frame: size, header v2 (client id
// "sluice-controller", no tags), body.
func appendRequestFrame(dst []byte, key, version int16, corr int32, body []byte) []byte {
	const clientID = "sluice-controller"
	size := 2 + 2 + 4 + 2 + len(clientID) + 1 + len(body)
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst = binary.BigEndian.AppendUint16(dst, uint16(key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	dst = append(dst, 0) // no tagged fields
	return append(dst, body...)
}

// appendResponseFrame appends a response frame: size, correlation id, an empty
// tagged-field section (response header v1), body.
func appendResponseFrame(dst []byte, corr int32, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+1+len(body)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = append(dst, 0)
	return append(dst, body...)
}

// parseResponseFrame checks a response frame's correlation id and returns its body.
func parseResponseFrame(b []byte, corr int32) ([]byte, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%w: response of %d bytes", errRPCFrame, len(b))
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return nil, fmt.Errorf("%w: correlation id %d, want %d", errRPCFrame, got, corr)
	}
	return skipTaggedFields(b[4:])
}

// rpcReader reads big-endian fields of Sluice's own messages, remembering the first
// error: a short or malformed body never panics.
type rpcReader struct {
	b   []byte
	err error
}

func (r *rpcReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errRPCFrame, what)
	}
	r.b = nil
}

func (r *rpcReader) take(n int, what string) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.fail(what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *rpcReader) i16() int16 {
	if b := r.take(2, "int16"); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *rpcReader) i32() int32 {
	if b := r.take(4, "int32"); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *rpcReader) i64() int64 {
	if b := r.take(8, "int64"); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// str reads | len i16 | bytes | (-1: "").
func (r *rpcReader) str() string {
	n := r.i16()
	if n == -1 {
		return ""
	}
	return string(r.take(int(n), "string"))
}

// bytes reads | len i32 | bytes |.
func (r *rpcReader) bytes() []byte {
	return r.take(int(r.i32()), "bytes")
}

// count reads an array length and checks that each element can take at least minSize
// bytes, so a garbage count cannot make the caller allocate a huge slice.
func (r *rpcReader) count(minSize int) int {
	n := r.i32()
	if n < 0 || int64(n)*int64(minSize) > int64(len(r.b)) {
		r.fail("array length")
		return 0
	}
	return int(n)
}

// done reports the first error, or trailing bytes.
func (r *rpcReader) done() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errRPCFrame, len(r.b))
	}
	return r.err
}

func appendStr(dst []byte, s string) []byte {
	if len(s) > math.MaxInt16 {
		s = s[:math.MaxInt16]
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// forwardRequest (key 32000, v0) asks the controller to propose encoded metadata log
// entries (records.go) and answer once they are applied on it:
//
//	| timeout_ms i32 | count i32 | count × ( len i32 | entry ) |
type forwardRequest struct {
	TimeoutMs int32
	Entries   [][]byte
}

func (f *forwardRequest) appendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(f.TimeoutMs))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.Entries)))
	for _, e := range f.Entries {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e)))
		dst = append(dst, e...)
	}
	return dst
}

func decodeForwardRequest(b []byte) (*forwardRequest, error) {
	r := rpcReader{b: b}
	f := &forwardRequest{TimeoutMs: r.i32()}
	n := r.count(4)
	for range n {
		f.Entries = append(f.Entries, r.bytes())
	}
	return f, r.done()
}

// forwardResult is one entry's outcome: code 0 = applied and accepted, otherwise a
// forwardCode (the reason Apply rejected it, or why it was not proposed).
type forwardResult struct {
	Code            int16
	Message         string
	Index           int64
	FirstProducerID int64
}

// forwardResponse (key 32000, v0):
//
//	| error_code i16 | leader_id i32 | applied_index i64 | count i32 |
//	  count × ( code i16 | message str16 | index i64 | first_producer_id i64 ) |
//
// error_code is a Kafka code for the whole request (NOT_CONTROLLER with leader_id the
// controller this voter knows of, or -1); applied_index is the highest index of the
// entries proposed, which the caller waits for in its own image.
type forwardResponse struct {
	ErrorCode    int16
	LeaderID     int32
	AppliedIndex int64
	Results      []forwardResult
}

func (f *forwardResponse) appendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(f.ErrorCode))
	dst = binary.BigEndian.AppendUint32(dst, uint32(f.LeaderID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(f.AppliedIndex))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.Results)))
	for _, r := range f.Results {
		dst = binary.BigEndian.AppendUint16(dst, uint16(r.Code))
		dst = appendStr(dst, r.Message)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Index))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.FirstProducerID))
	}
	return dst
}

func decodeForwardResponse(b []byte) (*forwardResponse, error) {
	r := rpcReader{b: b}
	f := &forwardResponse{ErrorCode: r.i16(), LeaderID: r.i32(), AppliedIndex: r.i64()}
	n := r.count(2 + 2 + 8 + 8)
	for range n {
		f.Results = append(f.Results, forwardResult{Code: r.i16(), Message: r.str(), Index: r.i64(), FirstProducerID: r.i64()})
	}
	return f, r.done()
}

// addObserverRequest (key 32001, v0) asks the controller to add a broker to the raft
// configuration as a non-voter:
//
//	| node_id i32 | raft_address str16 |
//
// The response is | error_code i16 | leader_id i32 |.
type addObserverRequest struct {
	NodeID  int32
	Address string
}

func (a *addObserverRequest) appendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.NodeID))
	return appendStr(dst, a.Address)
}

func decodeAddObserverRequest(b []byte) (*addObserverRequest, error) {
	r := rpcReader{b: b}
	a := &addObserverRequest{NodeID: r.i32(), Address: r.str()}
	return a, r.done()
}

type addObserverResponse struct {
	ErrorCode int16
	LeaderID  int32
}

func (a *addObserverResponse) appendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(a.ErrorCode))
	return binary.BigEndian.AppendUint32(dst, uint32(a.LeaderID))
}

func decodeAddObserverResponse(b []byte) (*addObserverResponse, error) {
	r := rpcReader{b: b}
	a := &addObserverResponse{ErrorCode: r.i16(), LeaderID: r.i32()}
	return a, r.done()
}

// decodeRPCRequest parses a request frame (after the size) into its header and
// message: a kmsg request for Kafka's keys, a Sluice message otherwise. It is the
// fuzzed entry point of the server side.
func decodeRPCRequest(b []byte) (rpcHeader, any, error) {
	h, body, err := parseRequestFrame(b)
	if err != nil {
		return h, nil, err
	}
	switch h.key {
	case rpcKeyDescribeQuorum, rpcKeyBrokerRegistration, rpcKeyBrokerHeartbeat:
		req := kmsg.RequestForKey(h.key)
		if h.version < 0 || h.version > req.MaxVersion() {
			return h, nil, fmt.Errorf("%w: %s version %d", errRPCFrame, kmsg.NameForKey(h.key), h.version)
		}
		req.SetVersion(h.version)
		if err := req.ReadFrom(body); err != nil {
			return h, nil, fmt.Errorf("%w: %s: %v", errRPCFrame, kmsg.NameForKey(h.key), err)
		}
		return h, req, nil
	case rpcKeyForward:
		if h.version != rpcVerForward {
			return h, nil, fmt.Errorf("%w: forward version %d", errRPCFrame, h.version)
		}
		req, err := decodeForwardRequest(body)
		return h, req, err
	case rpcKeyAddObserver:
		if h.version != rpcVerAddObserver {
			return h, nil, fmt.Errorf("%w: add observer version %d", errRPCFrame, h.version)
		}
		req, err := decodeAddObserverRequest(body)
		return h, req, err
	}
	return h, nil, fmt.Errorf("%w: unknown key %d", errRPCFrame, h.key)
}
