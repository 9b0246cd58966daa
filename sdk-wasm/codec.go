package sdk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Input encoding (ABI.md, "Input encoding"): a 54-byte fixed header, the topic,
// then record_count Kafka v2 records.
const (
	inputVersion    = 1
	inputHeaderSize = 54

	// minRecordSize is the smallest possible encoded record: length, attributes,
	// timestampDelta, offsetDelta, keyLength, valueLength and headerCount, one
	// byte each. It bounds record_count so that a corrupt count cannot make the
	// decoder allocate more than the input could hold.
	minRecordSize = 7
	// minHeaderSize is the smallest encoded header: two one-byte lengths.
	minHeaderSize = 2

	// maxOutputs is the number of output indexes the ABI allows (0..7).
	maxOutputs = 8
)

var (
	errShort    = errors.New("truncated input")
	errVarint   = errors.New("malformed varint")
	errNegative = errors.New("negative length")
)

// batchHeader is the fixed part of the input encoding.
type batchHeader struct {
	version       uint32
	partition     int32
	baseOffset    int64
	baseTimestamp int64
	maxTimestamp  int64
	attributes    int16
	producerEpoch int16
	producerID    int64
	baseSequence  int32
	recordCount   int32
	topic         []byte
}

// decoder decodes input batches. It keeps its slices between batches so that,
// once warm, decoding allocates nothing: records and headers alias the input
// buffer and live in reused slices.
type decoder struct {
	records  []Record
	headers  []Header
	hcounts  []int32 // header count of each record, while decoding
	interner interner
	batch    Batch
	hdr      batchHeader
}

// decode parses one batch in the input encoding. The returned Batch and
// everything it points to (other than strings) alias buf and the decoder's
// reused slices: valid until the next call.
func (d *decoder) decode(buf []byte) (*Batch, error) {
	h := &d.hdr
	if err := parseHeader(buf, h); err != nil {
		return nil, err
	}
	p := buf[inputHeaderSize+len(h.topic):]
	if int64(h.recordCount) > int64(len(p)/minRecordSize) {
		return nil, fmt.Errorf("record_count %d does not fit in %d bytes", h.recordCount, len(p))
	}
	n := int(h.recordCount)
	if cap(d.records) < n {
		d.records = make([]Record, n)
	}
	d.records = d.records[:n]
	d.headers = d.headers[:0]
	if cap(d.hcounts) < n {
		d.hcounts = make([]int32, n)
	}
	d.hcounts = d.hcounts[:n]
	inline := h.baseOffset < 0
	for i := range n {
		rec := &d.records[i]
		var err error
		p, d.hcounts[i], err = d.decodeRecord(p, rec, h, inline)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%d trailing bytes after %d records", len(p), n)
	}
	// Headers were appended to d.headers, which may have been reallocated
	// while decoding; slice each record's headers only now.
	off := 0
	for i := range d.records {
		rec := &d.records[i]
		k := int(d.hcounts[i])
		if k == 0 {
			rec.Headers = nil
			continue
		}
		rec.Headers = d.headers[off : off+k : off+k]
		off += k
	}
	b := &d.batch
	*b = Batch{
		Topic:         d.interner.get(h.topic),
		Partition:     h.partition,
		Records:       d.records,
		BaseOffset:    h.baseOffset,
		BaseTimestamp: time.UnixMilli(h.baseTimestamp),
		MaxTimestamp:  time.UnixMilli(h.maxTimestamp),
		Attributes:    h.attributes,
		ProducerID:    h.producerID,
		ProducerEpoch: h.producerEpoch,
		BaseSequence:  h.baseSequence,
	}
	return b, nil
}

func parseHeader(buf []byte, h *batchHeader) error {
	if len(buf) < inputHeaderSize {
		return fmt.Errorf("batch header: %w (%d bytes)", errShort, len(buf))
	}
	le := binary.LittleEndian
	h.version = le.Uint32(buf[0:])
	if h.version != inputVersion {
		return fmt.Errorf("unsupported input encoding version %d", h.version)
	}
	h.partition = int32(le.Uint32(buf[4:]))
	h.baseOffset = int64(le.Uint64(buf[8:]))
	h.baseTimestamp = int64(le.Uint64(buf[16:]))
	h.maxTimestamp = int64(le.Uint64(buf[24:]))
	h.attributes = int16(le.Uint16(buf[32:]))
	h.producerEpoch = int16(le.Uint16(buf[34:]))
	h.producerID = int64(le.Uint64(buf[36:]))
	h.baseSequence = int32(le.Uint32(buf[44:]))
	h.recordCount = int32(le.Uint32(buf[48:]))
	if h.recordCount < 0 {
		return fmt.Errorf("negative record_count %d", h.recordCount)
	}
	n := int(le.Uint16(buf[52:]))
	if len(buf)-inputHeaderSize < n {
		return fmt.Errorf("topic: %w", errShort)
	}
	h.topic = buf[inputHeaderSize : inputHeaderSize+n]
	return nil
}

// decodeRecord decodes one record from p into rec and returns the rest of p.
// Its headers are appended to d.headers and their number returned; decode sets
// rec.Headers once all records are decoded.
func (d *decoder) decodeRecord(p []byte, rec *Record, h *batchHeader, inline bool) (rest []byte, nh int32, err error) {
	length, p, err := readVarint(p)
	if err != nil {
		return nil, 0, fmt.Errorf("length: %w", err)
	}
	if length < 0 {
		return nil, 0, fmt.Errorf("length %d: %w", length, errNegative)
	}
	if int64(length) > int64(len(p)) {
		return nil, 0, fmt.Errorf("length %d: %w (%d bytes left)", length, errShort, len(p))
	}
	rest = p[length:]
	p = p[:length]

	if len(p) < 1 {
		return nil, 0, fmt.Errorf("attributes: %w", errShort)
	}
	p = p[1:] // record attributes: unused in v2
	tsDelta, p, err := readVarlong(p)
	if err != nil {
		return nil, 0, fmt.Errorf("timestampDelta: %w", err)
	}
	offDelta, p, err := readVarint(p)
	if err != nil {
		return nil, 0, fmt.Errorf("offsetDelta: %w", err)
	}
	if rec.Key, p, err = readBytes(p); err != nil {
		return nil, 0, fmt.Errorf("key: %w", err)
	}
	if rec.Value, p, err = readBytes(p); err != nil {
		return nil, 0, fmt.Errorf("value: %w", err)
	}
	nh, p, err = readVarint(p)
	if err != nil {
		return nil, 0, fmt.Errorf("headerCount: %w", err)
	}
	if nh < 0 {
		return nil, 0, fmt.Errorf("headerCount %d: %w", nh, errNegative)
	}
	if int64(nh) > int64(len(p)/minHeaderSize) {
		return nil, 0, fmt.Errorf("headerCount %d: %w", nh, errShort)
	}
	for j := int32(0); j < nh; j++ {
		var k, v []byte
		if k, p, err = readBytes(p); err != nil {
			return nil, 0, fmt.Errorf("header %d key: %w", j, err)
		}
		if k == nil {
			return nil, 0, fmt.Errorf("header %d: null key", j)
		}
		if v, p, err = readBytes(p); err != nil {
			return nil, 0, fmt.Errorf("header %d value: %w", j, err)
		}
		d.headers = append(d.headers, Header{Key: d.interner.get(k), Value: v})
	}
	if len(p) != 0 {
		return nil, 0, fmt.Errorf("%d bytes left inside the record after its headers", len(p))
	}
	rec.Timestamp = time.UnixMilli(h.baseTimestamp + tsDelta)
	if inline {
		rec.Offset = -1
	} else {
		rec.Offset = h.baseOffset + int64(offDelta)
	}
	return rest, nh, nil
}

// readBytes reads a varint length and that many bytes; -1 is null (nil). A
// zero length gives a non-nil empty slice.
func readBytes(p []byte) ([]byte, []byte, error) {
	n, p, err := readVarint(p)
	if err != nil {
		return nil, nil, err
	}
	if n == -1 {
		return nil, p, nil
	}
	if n < -1 {
		return nil, nil, fmt.Errorf("length %d: %w", n, errNegative)
	}
	if int64(n) > int64(len(p)) {
		return nil, nil, fmt.Errorf("length %d: %w (%d bytes left)", n, errShort, len(p))
	}
	return p[:n:n], p[n:], nil
}

// readUvarint reads an unsigned LEB128 value of at most maxBytes bytes whose
// value fits in bits bits.
func readUvarint(p []byte, maxBytes int, bits uint) (uint64, []byte, error) {
	var x uint64
	var s uint
	for i := 0; i < maxBytes; i++ {
		if i >= len(p) {
			return 0, nil, errShort
		}
		b := p[i]
		x |= uint64(b&0x7f) << s
		if b < 0x80 {
			if i == maxBytes-1 && bits < 64 && x>>bits != 0 {
				return 0, nil, errVarint
			}
			if i == maxBytes-1 && bits == 64 && b > 1 {
				return 0, nil, errVarint
			}
			return x, p[i+1:], nil
		}
		s += 7
	}
	return 0, nil, errVarint
}

// readVarint reads a zigzag-encoded int32 (at most 5 bytes).
func readVarint(p []byte) (int32, []byte, error) {
	u, p, err := readUvarint(p, 5, 32)
	if err != nil {
		return 0, nil, err
	}
	return int32(uint32(u)>>1) ^ -int32(u&1), p, nil
}

// readVarlong reads a zigzag-encoded int64 (at most 10 bytes).
func readVarlong(p []byte) (int64, []byte, error) {
	u, p, err := readUvarint(p, 10, 64)
	if err != nil {
		return 0, nil, err
	}
	return int64(u>>1) ^ -int64(u&1), p, nil
}

func appendUvarint(b []byte, u uint64) []byte {
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

func zigzag32(v int32) uint64 { return uint64(uint32(v<<1) ^ uint32(v>>31)) }
func zigzag64(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func appendVarint(b []byte, v int32) []byte  { return appendUvarint(b, zigzag32(v)) }
func appendVarlong(b []byte, v int64) []byte { return appendUvarint(b, zigzag64(v)) }

func uvarintLen(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func varintLen(v int32) int  { return uvarintLen(zigzag32(v)) }
func varlongLen(v int64) int { return uvarintLen(zigzag64(v)) }

// bytesLen is the encoded size of a nullable byte string.
func bytesLen(p []byte) int {
	if p == nil {
		return varintLen(-1)
	}
	return varintLen(int32(len(p))) + len(p)
}

func appendBytes(b, p []byte) []byte {
	if p == nil {
		return appendVarint(b, -1)
	}
	b = appendVarint(b, int32(len(p)))
	return append(b, p...)
}

func appendString(b []byte, s string) []byte {
	b = appendVarint(b, int32(len(s)))
	return append(b, s...)
}

// maxFieldLen bounds keys, values and header fields so their lengths fit
// the varint (int32) encoding.
const maxFieldLen = 1<<31 - 1

var errTooLarge = errors.New("sluice sdk: record field longer than 2 GiB")

// appendOutput appends one entry of the output encoding: the output index and
// the record, with timestampDelta relative to baseTimestamp. Attributes and
// offsetDelta are written as 0 (the host ignores them).
func appendOutput(b []byte, output int, r *Record, tsDelta int64) ([]byte, error) {
	if len(r.Key) > maxFieldLen || len(r.Value) > maxFieldLen {
		return b, errTooLarge
	}
	body := 1 + varlongLen(tsDelta) + varintLen(0) + bytesLen(r.Key) + bytesLen(r.Value) +
		varintLen(int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		if len(h.Key) > maxFieldLen || len(h.Value) > maxFieldLen {
			return b, errTooLarge
		}
		body += varintLen(int32(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	if body > maxFieldLen {
		return b, errTooLarge
	}
	b = append(b, byte(output))
	b = appendVarint(b, int32(body))
	b = append(b, 0) // attributes
	b = appendVarlong(b, tsDelta)
	b = appendVarint(b, 0) // offsetDelta
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	b = appendVarint(b, int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		b = appendString(b, h.Key)
		b = appendBytes(b, h.Value)
	}
	return b, nil
}

// interner turns byte strings that recur from batch to batch (topic names,
// header keys) into strings without allocating once it has seen them.
type interner struct {
	m map[string]string
}

const (
	internMaxEntries = 1024
	internMaxLen     = 128
)

func (in *interner) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := in.m[string(b)]; ok { // no allocation: the compiler optimises this lookup
		return s
	}
	s := string(b)
	if len(b) <= internMaxLen {
		if in.m == nil {
			in.m = make(map[string]string)
		}
		if len(in.m) < internMaxEntries {
			in.m[s] = s
		}
	}
	return s
}

// Source encoding (ABI.md, batch_source): three fields, each a u16
// little-endian length and that many bytes: principal type, principal name,
// client id. A later minor version may append fields; bytes after the three
// are ignored.
const (
	// minSourceSize is the encoding of three empty fields; a -len from
	// batch_source is at most -minSourceSize, below every errno.
	minSourceSize = 6
	// maxSourceSize bounds the encoding of the three fields.
	maxSourceSize = 3 * (2 + 0xFFFF)
	// initialSourceSize fits the usual principal and client id.
	initialSourceSize = 256
)

// decodeSource decodes the source encoding.
func decodeSource(p []byte) (Source, error) {
	var f [3]string
	for i := range f {
		if len(p) < 2 {
			return Source{}, errShort
		}
		n := int(binary.LittleEndian.Uint16(p))
		p = p[2:]
		if n > len(p) {
			return Source{}, errShort
		}
		f[i] = string(p[:n])
		p = p[n:]
	}
	return Source{PrincipalType: f[0], PrincipalName: f[1], ClientID: f[2]}, nil
}
