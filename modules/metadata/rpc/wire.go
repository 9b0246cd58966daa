package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// The controller RPC (see the metadata package's doc.go, "Controller RPC"): a
// connection to a voter's raft port that starts with Magic carries Kafka-framed
// requests and responses, one request at a time per connection.

// Magic opens a controller RPC connection. Its first byte, 'S' (0x53), is never a
// raft rpc type (0-4 in hashicorp/raft 1.8), which is how the raft port tells the two
// apart. Frozen.
var Magic = [4]byte{'S', 'L', 'C', 1}

// Controller RPC API keys. Kafka's own keys where Kafka has the API; Sluice's own
// messages use keys from 32000 (Kafka's keys are far below). Frozen.
const (
	rpcKeyDescribeQuorum     int16 = 55 // kmsg.DescribeQuorum
	rpcKeyUpdateFeatures     int16 = 57 // kmsg.UpdateFeatures
	rpcKeyBrokerRegistration int16 = 62 // kmsg.BrokerRegistration
	KeyBrokerHeartbeat       int16 = 63 // kmsg.BrokerHeartbeat
	rpcKeyAddRaftVoter       int16 = 80 // kmsg.AddRaftVoter
	rpcKeyRemoveRaftVoter    int16 = 81 // kmsg.RemoveRaftVoter
	rpcKeyUpdateRaftVoter    int16 = 82 // kmsg.UpdateRaftVoter
	KeyForward               int16 = 32000
	KeyAddObserver           int16 = 32001
)

// Versions this code sends and accepts.
const (
	VerDescribeQuorum     int16 = 2
	VerBrokerRegistration int16 = 4
	VerBrokerHeartbeat    int16 = 1
	VerForward            int16 = 0
	VerAddObserver        int16 = 0
	VerAddRaftVoter       int16 = 1
	VerRemoveRaftVoter    int16 = 0
	VerUpdateRaftVoter    int16 = 0
	VerUpdateFeatures     int16 = 2
)

// maxFrame bounds one frame: a forwarded Extension entry of kernel's
// MaxExtensionValueBytes (32 MiB) is ~43 MB once base64'd in JSON.
const maxFrame = 64 << 20

// ErrFrame marks bytes that are not a valid controller RPC frame or message.
var ErrFrame = errors.New("metadata: malformed controller rpc frame")

// header is a request header (Kafka request header v2: flexible, with tags).
type header struct {
	key, version int16
	correlation  int32
}

// readFrame reads one size-prefixed frame into a new buffer with the kernel's frame
// reader (it grows the buffer as bytes arrive, so a peer that claims a large size and
// sends nothing costs nothing); a size outside [1, maxSize] is ErrFrame.
func readFrame(r io.Reader, maxSize int) ([]byte, error) {
	buf, err := kernel.ReadFrame(r, nil, int32(min(maxSize, math.MaxInt32)), nil)
	if err != nil {
		if errors.Is(err, kernel.ErrFrameSize) {
			err = fmt.Errorf("%w: %w", ErrFrame, err)
		}
		return nil, err
	}
	return buf, nil
}

// parseRequestFrame splits a request frame (after the size) into its header and body.
// Every controller RPC request uses the flexible header (v2): key, version,
// correlation id, nullable client id, tagged fields.
func parseRequestFrame(b []byte) (header, []byte, error) {
	if len(b) < 10 {
		return header{}, nil, fmt.Errorf("%w: header of %d bytes", ErrFrame, len(b))
	}
	h := header{
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
		return h, nil, fmt.Errorf("%w: client id length %d", ErrFrame, l)
	}
	body, err := skipTaggedFields(b)
	return h, body, err
}

// skipTaggedFields skips a tagged-field section.
func skipTaggedFields(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: tagged fields", ErrFrame)
	}
	b = b[used:]
	for range n {
		if _, used = binary.Uvarint(b); used <= 0 {
			return nil, fmt.Errorf("%w: tag", ErrFrame)
		}
		b = b[used:]
		sz, used := binary.Uvarint(b)
		if used <= 0 || sz > uint64(len(b)-used) {
			return nil, fmt.Errorf("%w: tag size", ErrFrame)
		}
		b = b[used+int(sz):]
	}
	return b, nil
}

// AppendRequestFrame appends a whole request frame: size, header v2 (client id
// "sluice-controller", no tags), body.
func AppendRequestFrame(dst []byte, key, version int16, corr int32, body []byte) []byte {
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
		return nil, fmt.Errorf("%w: response of %d bytes", ErrFrame, len(b))
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return nil, fmt.Errorf("%w: correlation id %d, want %d", ErrFrame, got, corr)
	}
	return skipTaggedFields(b[4:])
}

// reader reads big-endian fields of Sluice's own messages, remembering the first
// error: a short or malformed body never panics.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrFrame, what)
	}
	r.b = nil
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.fail(what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) i16() int16 {
	if b := r.take(2, "int16"); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) i32() int32 {
	if b := r.take(4, "int32"); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) i64() int64 {
	if b := r.take(8, "int64"); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// str reads | len i16 | bytes | (-1: "").
func (r *reader) str() string {
	n := r.i16()
	if n == -1 {
		return ""
	}
	return string(r.take(int(n), "string"))
}

// bytes reads | len i32 | bytes |.
func (r *reader) bytes() []byte {
	return r.take(int(r.i32()), "bytes")
}

// count reads an array length and checks that each element can take at least minSize
// bytes, so a garbage count cannot make the caller allocate a huge slice.
func (r *reader) count(minSize int) int {
	n := r.i32()
	if n < 0 || int64(n)*int64(minSize) > int64(len(r.b)) {
		r.fail("array length")
		return 0
	}
	return int(n)
}

// done reports the first error, or trailing bytes.
func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrFrame, len(r.b))
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

// ForwardRequest (key 32000, v0) asks the controller to propose encoded metadata log
// entries (records.go) and answer once they are applied on it:
//
//	| timeout_ms i32 | count i32 | count × ( len i32 | entry ) |
type ForwardRequest struct {
	TimeoutMs int32
	Entries   [][]byte
}

func (f *ForwardRequest) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(f.TimeoutMs))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.Entries)))
	for _, e := range f.Entries {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e)))
		dst = append(dst, e...)
	}
	return dst
}

func decodeForwardRequest(b []byte) (*ForwardRequest, error) {
	r := reader{b: b}
	f := &ForwardRequest{TimeoutMs: r.i32()}
	n := r.count(4)
	for range n {
		f.Entries = append(f.Entries, r.bytes())
	}
	return f, r.done()
}

// ForwardResult is one entry's outcome: code 0 = applied and accepted, otherwise a
// forwardCode (the reason Apply rejected it, or why it was not proposed).
type ForwardResult struct {
	Code            int16
	Message         string
	Index           int64
	FirstProducerID int64
}

// ForwardResponse (key 32000, v0):
//
//	| error_code i16 | leader_id i32 | applied_index i64 | count i32 |
//	  count × ( code i16 | message str16 | index i64 | first_producer_id i64 ) |
//
// error_code is a Kafka code for the whole request (NOT_CONTROLLER with leader_id the
// controller this voter knows of, or -1); applied_index is the highest index of the
// entries proposed, which the caller waits for in its own image.
type ForwardResponse struct {
	ErrorCode    int16
	LeaderID     int32
	AppliedIndex int64
	Results      []ForwardResult
}

func (f *ForwardResponse) AppendTo(dst []byte) []byte {
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

func DecodeForwardResponse(b []byte) (*ForwardResponse, error) {
	r := reader{b: b}
	f := &ForwardResponse{ErrorCode: r.i16(), LeaderID: r.i32(), AppliedIndex: r.i64()}
	n := r.count(2 + 2 + 8 + 8)
	for range n {
		f.Results = append(f.Results, ForwardResult{Code: r.i16(), Message: r.str(), Index: r.i64(), FirstProducerID: r.i64()})
	}
	return f, r.done()
}

// AddObserverRequest (key 32001, v0) asks the controller to add a broker to the raft
// configuration as a non-voter:
//
//	| node_id i32 | raft_address str16 |
//
// The response is | error_code i16 | leader_id i32 |.
type AddObserverRequest struct {
	NodeID  int32
	Address string
}

func (a *AddObserverRequest) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.NodeID))
	return appendStr(dst, a.Address)
}

func decodeAddObserverRequest(b []byte) (*AddObserverRequest, error) {
	r := reader{b: b}
	a := &AddObserverRequest{NodeID: r.i32(), Address: r.str()}
	return a, r.done()
}

type AddObserverResponse struct {
	ErrorCode int16
	LeaderID  int32
}

func (a *AddObserverResponse) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(a.ErrorCode))
	return binary.BigEndian.AppendUint32(dst, uint32(a.LeaderID))
}

func DecodeAddObserverResponse(b []byte) (*AddObserverResponse, error) {
	r := reader{b: b}
	a := &AddObserverResponse{ErrorCode: r.i16(), LeaderID: r.i32()}
	return a, r.done()
}

// decodeRequest parses a request frame (after the size) into its header and
// message: a kmsg request for Kafka's keys, a Sluice message otherwise. It is the
// fuzzed entry point of the server side.
func decodeRequest(b []byte) (header, any, error) {
	h, body, err := parseRequestFrame(b)
	if err != nil {
		return h, nil, err
	}
	switch h.key {
	case rpcKeyDescribeQuorum, rpcKeyBrokerRegistration, KeyBrokerHeartbeat,
		rpcKeyAddRaftVoter, rpcKeyRemoveRaftVoter, rpcKeyUpdateRaftVoter, rpcKeyUpdateFeatures:
		req := kmsg.RequestForKey(h.key)
		if h.version < 0 || h.version > req.MaxVersion() {
			return h, nil, fmt.Errorf("%w: %s version %d", ErrFrame, kmsg.NameForKey(h.key), h.version)
		}
		req.SetVersion(h.version)
		if err := req.ReadFrom(body); err != nil {
			return h, nil, fmt.Errorf("%w: %s: %v", ErrFrame, kmsg.NameForKey(h.key), err)
		}
		return h, req, nil
	case KeyForward:
		if h.version != VerForward {
			return h, nil, fmt.Errorf("%w: forward version %d", ErrFrame, h.version)
		}
		req, err := decodeForwardRequest(body)
		return h, req, err
	case KeyAddObserver:
		if h.version != VerAddObserver {
			return h, nil, fmt.Errorf("%w: add observer version %d", ErrFrame, h.version)
		}
		req, err := decodeAddObserverRequest(body)
		return h, req, err
	}
	return h, nil, fmt.Errorf("%w: unknown key %d", ErrFrame, h.key)
}
