package sdk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// tRecord is a record as the input encoding carries it.
type tRecord struct {
	attr       int8
	tsDelta    int64
	offDelta   int32
	key, value []byte
	headers    []Header
}

// tBatch is a batch as the input encoding carries it.
type tBatch struct {
	partition     int32
	baseOffset    int64
	baseTimestamp int64
	maxTimestamp  int64
	attributes    int16
	producerEpoch int16
	producerID    int64
	baseSequence  int32
	topic         string
	records       []tRecord
	// recordCount overrides len(records) if non-nil.
	recordCount *int32
}

// encodeRecord encodes one record in Kafka's record format.
func encodeRecord(r tRecord) []byte {
	var body []byte
	body = append(body, byte(r.attr))
	body = appendVarlong(body, r.tsDelta)
	body = appendVarint(body, r.offDelta)
	body = appendBytes(body, r.key)
	body = appendBytes(body, r.value)
	body = appendVarint(body, int32(len(r.headers)))
	for _, h := range r.headers {
		body = appendString(body, h.Key)
		body = appendBytes(body, h.Value)
	}
	out := appendVarint(nil, int32(len(body)))
	return append(out, body...)
}

// encodeHeader encodes the fixed header and topic.
func encodeHeader(b tBatch) []byte {
	le := binary.LittleEndian
	buf := make([]byte, inputHeaderSize, inputHeaderSize+len(b.topic))
	le.PutUint32(buf[0:], inputVersion)
	le.PutUint32(buf[4:], uint32(b.partition))
	le.PutUint64(buf[8:], uint64(b.baseOffset))
	le.PutUint64(buf[16:], uint64(b.baseTimestamp))
	le.PutUint64(buf[24:], uint64(b.maxTimestamp))
	le.PutUint16(buf[32:], uint16(b.attributes))
	le.PutUint16(buf[34:], uint16(b.producerEpoch))
	le.PutUint64(buf[36:], uint64(b.producerID))
	le.PutUint32(buf[44:], uint32(b.baseSequence))
	n := int32(len(b.records))
	if b.recordCount != nil {
		n = *b.recordCount
	}
	le.PutUint32(buf[48:], uint32(n))
	le.PutUint16(buf[52:], uint16(len(b.topic)))
	return append(buf, b.topic...)
}

// encodeBatch encodes a whole batch in the input encoding.
func encodeBatch(b tBatch) []byte {
	buf := encodeHeader(b)
	for _, r := range b.records {
		buf = append(buf, encodeRecord(r)...)
	}
	return buf
}

// reencode encodes a decoded batch again, for round-trip checks.
func reencode(b *Batch) []byte {
	tb := tBatch{
		partition:     b.Partition,
		baseOffset:    b.BaseOffset,
		baseTimestamp: b.BaseTimestamp.UnixMilli(),
		maxTimestamp:  b.MaxTimestamp.UnixMilli(),
		attributes:    b.Attributes,
		producerEpoch: b.ProducerEpoch,
		producerID:    b.ProducerID,
		baseSequence:  b.BaseSequence,
		topic:         b.Topic,
	}
	for _, r := range b.Records {
		tr := tRecord{
			tsDelta: r.Timestamp.UnixMilli() - tb.baseTimestamp,
			key:     r.Key,
			value:   r.Value,
			headers: r.Headers,
		}
		if !b.Inline() {
			tr.offDelta = int32(r.Offset - b.BaseOffset)
		}
		tb.records = append(tb.records, tr)
	}
	return encodeBatch(tb)
}

// outRecord is one entry of the output encoding.
type outRecord struct {
	output     int
	attr       int8
	tsDelta    int64
	offDelta   int32
	key, value []byte
	headers    []Header
}

// decodeOutput parses the output encoding strictly.
func decodeOutput(p []byte) ([]outRecord, error) {
	var out []outRecord
	for len(p) > 0 {
		var o outRecord
		o.output = int(p[0])
		p = p[1:]
		length, q, err := readVarint(p)
		if err != nil {
			return nil, fmt.Errorf("length: %w", err)
		}
		if length < 0 || int(length) > len(q) {
			return nil, fmt.Errorf("bad length %d", length)
		}
		body, rest := q[:length], q[length:]
		if len(body) < 1 {
			return nil, fmt.Errorf("no attributes")
		}
		o.attr = int8(body[0])
		body = body[1:]
		if o.tsDelta, body, err = readVarlong(body); err != nil {
			return nil, err
		}
		if o.offDelta, body, err = readVarint(body); err != nil {
			return nil, err
		}
		if o.key, body, err = readBytes(body); err != nil {
			return nil, err
		}
		if o.value, body, err = readBytes(body); err != nil {
			return nil, err
		}
		var nh int32
		if nh, body, err = readVarint(body); err != nil {
			return nil, err
		}
		for range nh {
			var k, v []byte
			if k, body, err = readBytes(body); err != nil {
				return nil, err
			}
			if v, body, err = readBytes(body); err != nil {
				return nil, err
			}
			o.headers = append(o.headers, Header{Key: string(k), Value: v})
		}
		if len(body) != 0 {
			return nil, fmt.Errorf("%d bytes left in record", len(body))
		}
		out = append(out, o)
		p = rest
	}
	return out, nil
}

// fakeHost is an in-memory broker: it serves queued batches and records what
// the guest emits and fails, per batch.
type fakeHost struct {
	abi       int32 // check_abi's result
	batches   [][]byte
	cur       int // index of the current batch, -1 before the first
	retry     bool
	emitRC    int32
	nextCalls int
	bufSizes  []int // len(buf) of each next_batch call

	// sources[i] is batch i's source (the zero Source past the end);
	// sourceRC, if not 0, is what batch_source returns instead.
	sources        []Source
	sourceRC       int32
	sourceBufSizes []int // len(buf) of each batch_source call

	results []batchResult // one per batch served
}

type batchResult struct {
	emits [][]byte
	fails []string
}

func newFakeHost(batches ...[]byte) *fakeHost { return &fakeHost{batches: batches, cur: -1} }

func (h *fakeHost) checkABI(v int32) int32 {
	if v != abiVersion {
		return -1
	}
	return h.abi
}

func (h *fakeHost) nextBatch(buf []byte) (int32, bool) {
	h.nextCalls++
	h.bufSizes = append(h.bufSizes, len(buf))
	if !h.retry { // the call completes the current batch
		h.cur++
		if h.cur < len(h.batches) {
			h.results = append(h.results, batchResult{})
		}
	}
	h.retry = false
	if h.cur >= len(h.batches) {
		return 0, false
	}
	b := h.batches[h.cur]
	if len(buf) < len(b) {
		h.retry = true // the next call gets the same batch
		return -int32(len(b)), true
	}
	copy(buf, b)
	return int32(len(b)), true
}

func (h *fakeHost) emit(buf []byte) int32 {
	if h.cur < 0 {
		return -4
	}
	h.results[h.cur].emits = append(h.results[h.cur].emits, bytes.Clone(buf))
	return h.emitRC
}

func (h *fakeHost) fail(msg []byte) {
	h.results[h.cur].fails = append(h.results[h.cur].fails, string(msg))
}

func (h *fakeHost) batchSource(buf []byte) int32 {
	h.sourceBufSizes = append(h.sourceBufSizes, len(buf))
	if h.cur < 0 || h.cur >= len(h.batches) {
		return -4
	}
	if h.sourceRC != 0 {
		return h.sourceRC
	}
	var s Source
	if h.cur < len(h.sources) {
		s = h.sources[h.cur]
	}
	enc := appendSource(nil, s)
	if len(buf) < len(enc) {
		return -int32(len(enc))
	}
	return int32(copy(buf, enc))
}

// outputs decodes everything emitted for batch i.
func (h *fakeHost) outputs(t *testing.T, i int) []outRecord {
	t.Helper()
	var all []outRecord
	for _, e := range h.results[i].emits {
		recs, err := decodeOutput(e)
		if err != nil {
			t.Fatalf("batch %d: bad output encoding: %v", i, err)
		}
		all = append(all, recs...)
	}
	return all
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// appendSource appends the source encoding of s (fields longer than 65535
// bytes are cut: the host refuses such sources, and tests build them).
func appendSource(b []byte, s Source) []byte {
	for _, f := range [...]string{s.PrincipalType, s.PrincipalName, s.ClientID} {
		f = f[:min(len(f), 0xFFFF)]
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return b
}
