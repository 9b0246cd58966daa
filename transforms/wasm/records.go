package wasm

import (
	"encoding/binary"
	"errors"
	"math"
)

// errMalformed is the parse error for a bad record or payload encoding.
var errMalformed = errors.New("malformed record encoding")

// readVarint reads a Kafka varint (zigzag, at most 32 bits) from b[i:].
func readVarint(b []byte, i int) (int32, int, error) {
	v, n := binary.Varint(b[i:])
	if n <= 0 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, i, errMalformed
	}
	return int32(v), i + n, nil
}

// readVarlong reads a Kafka varlong (zigzag, 64 bits) from b[i:].
func readVarlong(b []byte, i int) (int64, int, error) {
	v, n := binary.Varint(b[i:])
	if n <= 0 {
		return 0, i, errMalformed
	}
	return v, i + n, nil
}

// span locates bytes in an outBuilder's buffer; n == -1 is null.
type span struct{ off, n int32 }

type outRecord struct {
	index      int
	tsDelta    int64
	key, value span
	hdrs       [2]int32 // [start, end) in outBuilder.hdrs
}

type outHeader struct {
	key   [2]int32 // [start, end) in outBuilder.keys
	value span
}

// outBuilder collects the output of one batch. Everything is appended to a few
// flat buffers; finish turns them into []Output with a handful of allocations
// per batch, whatever the number of records.
type outBuilder struct {
	buf   []byte // keys and values of records, values of headers
	keys  []byte // header keys
	recs  []outRecord
	hdrs  []outHeader
	size  int    // bytes accepted from the guest so far
	err   *Error // first error of the batch, if any
	errno int32  // what emit returns once err is set
	hint  int    // capacity of buf for the next batch
	// outs and hdrsOut are finish's result slices, reused when keep is set.
	outs    []Output
	hdrsOut []Header
	keep    bool // the batch's outputs are dead before the next batch starts
}

// reset starts a batch. With keep (Pool.TransformFunc: the caller is done with the
// previous batch's outputs before this one starts), the buffers the previous outputs
// point into are reused; otherwise the outputs own their memory and a new buffer is
// allocated on the first payload.
func (o *outBuilder) reset(keep bool) {
	o.keep = keep
	if keep {
		o.buf = o.buf[:0]
	} else {
		o.buf, o.outs, o.hdrsOut = nil, nil, nil
	}
	o.clear()
}

// clear drops the batch's bookkeeping, not the buffers.
func (o *outBuilder) clear() {
	o.keys = o.keys[:0]
	o.recs = o.recs[:0]
	o.hdrs = o.hdrs[:0]
	o.size = 0
	o.err = nil
	o.errno = 0
}

func (o *outBuilder) fail(errno int32, msg string) int32 {
	if o.err == nil {
		o.err = &Error{Kind: KindMalformed, Msg: msg}
		o.errno = errno
	}
	return errno
}

// appendBytes reads a varint length and that many bytes (or null) from b[i:].
func (o *outBuilder) appendBytes(b []byte, i int) (span, int, error) {
	n, i, err := readVarint(b, i)
	if err != nil || n < -1 || int(n) > len(b)-i {
		return span{}, i, errMalformed
	}
	if n == -1 {
		return span{n: -1}, i, nil
	}
	if len(o.buf)+int(n) > math.MaxInt32 {
		return span{}, i, errMalformed
	}
	s := span{off: int32(len(o.buf)), n: n}
	o.buf = append(o.buf, b[i:i+int(n)]...)
	return s, i + int(n), nil
}

// appendPayload parses exactly b as a record payload (key, value, header count,
// headers) and appends it as output index idx. On error nothing is added.
func (o *outBuilder) appendPayload(b []byte, idx int, tsDelta int64) error {
	if o.buf == nil {
		o.buf = make([]byte, 0, max(o.hint, 256))
	}
	bufLen, keysLen, hdrsLen := len(o.buf), len(o.keys), len(o.hdrs)
	err := o.appendPayloadUndo(b, idx, tsDelta)
	if err != nil {
		o.buf, o.keys, o.hdrs = o.buf[:bufLen], o.keys[:keysLen], o.hdrs[:hdrsLen]
	}
	return err
}

func (o *outBuilder) appendPayloadUndo(b []byte, idx int, tsDelta int64) error {
	r := outRecord{index: idx, tsDelta: tsDelta}
	var err error
	i := 0
	if r.key, i, err = o.appendBytes(b, i); err != nil {
		return err
	}
	if r.value, i, err = o.appendBytes(b, i); err != nil {
		return err
	}
	var count int32
	if count, i, err = readVarint(b, i); err != nil || count < 0 || int(count) > len(b)-i {
		return errMalformed
	}
	r.hdrs[0] = int32(len(o.hdrs))
	for range count {
		var kl int32
		if kl, i, err = readVarint(b, i); err != nil || kl < 0 || int(kl) > len(b)-i {
			return errMalformed
		}
		if len(o.keys)+int(kl) > math.MaxInt32 {
			return errMalformed
		}
		h := outHeader{key: [2]int32{int32(len(o.keys)), int32(len(o.keys) + int(kl))}}
		o.keys = append(o.keys, b[i:i+int(kl)]...)
		i += int(kl)
		if h.value, i, err = o.appendBytes(b, i); err != nil {
			return err
		}
		o.hdrs = append(o.hdrs, h)
	}
	if i != len(b) {
		return errMalformed
	}
	r.hdrs[1] = int32(len(o.hdrs))
	o.recs = append(o.recs, r)
	return nil
}

// appendRecords parses b as a sequence of output entries in the output encoding
// of ABI.md (output u8 | Kafka record) and returns the emit errno.
func (o *outBuilder) appendRecords(b []byte, outputs int) int32 {
	i := 0
	for i < len(b) {
		idx := int(b[i])
		i++
		if idx >= outputs {
			return o.fail(errnoIndex, "output index out of range")
		}
		length, j, err := readVarint(b, i)
		if err != nil || length < 0 || int(length) > len(b)-j {
			return o.fail(errnoMalformed, "malformed output record length")
		}
		rec := b[j : j+int(length)]
		i = j + int(length)
		// attributes i8 (ignored), timestampDelta varlong, offsetDelta varint (ignored)
		if len(rec) < 1 {
			return o.fail(errnoMalformed, "malformed output record")
		}
		tsDelta, k, err := readVarlong(rec, 1)
		if err != nil {
			return o.fail(errnoMalformed, "malformed output record timestamp delta")
		}
		if _, k, err = readVarint(rec, k); err != nil {
			return o.fail(errnoMalformed, "malformed output record offset delta")
		}
		if err := o.appendPayload(rec[k:], idx, tsDelta); err != nil {
			return o.fail(errnoMalformed, "malformed output record payload")
		}
	}
	return 0
}

// finish returns the batch's outputs (nil error) or its error and resets o.
func (o *outBuilder) finish() ([]Output, error) {
	defer o.clear()
	if o.err != nil {
		return nil, o.err
	}
	if len(o.recs) == 0 {
		return nil, nil
	}
	buf := o.buf
	o.hint = len(buf) + len(buf)/8
	bytesOf := func(s span) []byte {
		if s.n < 0 {
			return nil
		}
		return buf[s.off : s.off+s.n : s.off+s.n]
	}
	keys := string(o.keys) // one allocation; header keys are substrings
	var hdrs []Header
	if len(o.hdrs) > 0 {
		hdrs = grow(o.hdrsOut, len(o.hdrs), o.keep)
		for i, h := range o.hdrs {
			hdrs[i] = Header{Key: keys[h.key[0]:h.key[1]], Value: bytesOf(h.value)}
		}
	}
	out := grow(o.outs, len(o.recs), o.keep)
	if o.keep {
		o.outs, o.hdrsOut = out, hdrs
	}
	for i, r := range o.recs {
		out[i] = Output{
			Index:          r.index,
			Key:            bytesOf(r.key),
			Value:          bytesOf(r.value),
			TimestampDelta: r.tsDelta,
		}
		if r.hdrs[1] > r.hdrs[0] {
			out[i].Headers = hdrs[r.hdrs[0]:r.hdrs[1]:r.hdrs[1]]
		}
	}
	return out, nil
}

// grow returns s resized to n, reusing its array when reuse is set and it is large
// enough, else a new slice.
func grow[T any](s []T, n int, reuse bool) []T {
	if reuse && cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// inRecord is one parsed input record (Redpanda ABI).
type inRecord struct {
	attrs    uint8
	tsDelta  int64
	offDelta int32
	payload  [2]int // [start, end) in Batch.Records
}

// parseRecords indexes a Kafka v2 records section into recs (reused) and
// returns it with the largest payload size.
func parseRecords(b []byte, recs []inRecord) ([]inRecord, int, error) {
	recs = recs[:0]
	maxPayload := 0
	i := 0
	for i < len(b) {
		length, j, err := readVarint(b, i)
		if err != nil || length < 0 || int(length) > len(b)-j {
			return recs, 0, errMalformed
		}
		end := j + int(length)
		rec := b[:end]
		if j >= end {
			return recs, 0, errMalformed
		}
		r := inRecord{attrs: rec[j]}
		k := j + 1
		if r.tsDelta, k, err = readVarlong(rec, k); err != nil {
			return recs, 0, err
		}
		if r.offDelta, k, err = readVarint(rec, k); err != nil {
			return recs, 0, err
		}
		r.payload = [2]int{k, end}
		maxPayload = max(maxPayload, end-k)
		recs = append(recs, r)
		i = end
	}
	return recs, maxPayload, nil
}
