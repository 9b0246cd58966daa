package recordbatch

import "fmt"

// Record is one record of a batch, as the iterator returns it and as Builder.Add takes it.
//
// From the iterator, Key, Value and header slices point into the batch (uncompressed) or
// into the Decoder's buffer (compressed); they are valid until the next call that reuses
// that buffer, and must not be modified. A null key or value is nil; an empty one is a
// non-nil slice of length 0.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	Headers        []RecordHeader

	// Offset and Timestamp are filled by the iterator only (Builder.Add ignores them):
	// Offset is BaseOffset + OffsetDelta; Timestamp is BaseTimestamp + TimestampDelta,
	// or the batch's MaxTimestamp when the batch uses LogAppendTime.
	Offset    int64
	Timestamp int64
}

// RecordHeader is one record header. Key is never null; a null Value is nil.
type RecordHeader struct {
	Key   []byte
	Value []byte
}

// Varint limits: Kafka's varint is a zigzag int32 (at most 5 bytes), varlong a zigzag
// int64 (at most 10 bytes). The last byte may carry only the bits that are left.
const (
	maxVarintLen32 = 5
	maxVarintLen64 = 10
)

// cursor decodes the fields of one record. It never panics: a read past the end or a
// malformed varint records the first failing field in bad and returns a zero value.
type cursor struct {
	b   []byte
	p   int
	bad string
}

func (c *cursor) fail(field string) {
	if c.bad == "" {
		c.bad = field
	}
	c.p = len(c.b)
}

func (c *cursor) uvarint(maxLen int, lastMax byte, field string) uint64 {
	var x uint64
	var s uint
	for i := 0; i < maxLen; i++ {
		if c.p >= len(c.b) {
			c.fail(field)
			return 0
		}
		v := c.b[c.p]
		c.p++
		if v < 0x80 {
			if i == maxLen-1 && v > lastMax {
				c.fail(field)
				return 0
			}
			return x | uint64(v)<<s
		}
		x |= uint64(v&0x7f) << s
		s += 7
	}
	c.fail(field)
	return 0
}

// varint reads a zigzag int32. Most varints in a record are one byte: that path is
// small enough to inline.
func (c *cursor) varint(field string) int32 {
	if c.p < len(c.b) {
		if v := c.b[c.p]; v < 0x80 {
			c.p++
			return int32(v>>1) ^ -int32(v&1)
		}
	}
	return c.varintSlow(field)
}

//go:noinline
func (c *cursor) varintSlow(field string) int32 {
	u := uint32(c.uvarint(maxVarintLen32, 0x0f, field))
	return int32(u>>1) ^ -int32(u&1)
}

// varlong reads a zigzag int64.
func (c *cursor) varlong(field string) int64 {
	u := c.uvarint(maxVarintLen64, 0x01, field)
	return int64(u>>1) ^ -int64(u&1)
}

func (c *cursor) int8(field string) int8 {
	if c.p >= len(c.b) {
		c.fail(field)
		return 0
	}
	v := int8(c.b[c.p])
	c.p++
	return v
}

// bytes reads a varint length and that many bytes; -1 is null (nil) when nullable.
func (c *cursor) bytes(nullable bool, field string) []byte {
	n := c.varint(field)
	if c.bad != "" {
		return nil
	}
	if n < 0 {
		if n == -1 && nullable {
			return nil
		}
		c.fail(field)
		return nil
	}
	if int(n) > len(c.b)-c.p {
		c.fail(field)
		return nil
	}
	v := c.b[c.p : c.p+int(n) : c.p+int(n)]
	c.p += int(n)
	return v
}

// scanResult is what a pass over the records section learned.
type scanResult struct {
	n            int
	minTS, maxTS int64
	nullKeys     int // records whose key is null
}

// scan decodes every record of the (uncompressed) records section data of the batch
// with header h. With fn == nil it only checks framing and collects timestamps; with
// fn != nil it fills rec and calls fn for each record, and returns fn's error as is.
// Offset deltas must be 0, 1, 2, ... and LastOffsetDelta the last of them; with gaps
// (a batch read back from a compacted log, see Decoder.Compacted) they must only
// increase strictly within [0, LastOffsetDelta].
// Nothing here allocates in proportion to counts read from the wire: headers are
// appended to rec.Headers as they are decoded, each costing at least two input bytes.
func scan(h *Header, data []byte, rec *Record, fn func(*Record) error, gaps bool) (scanResult, error) {
	var res scanResult
	if h.RecordCount < 0 {
		return res, fmt.Errorf("%w: negative record count %d", ErrRecords, h.RecordCount)
	}
	want := int(h.RecordCount)
	logAppend := h.Attributes&AttrLogAppendTime != 0
	p := 0
	prevDelta := int32(-1)
	for p < len(data) {
		i := res.n
		if i >= want {
			return res, fmt.Errorf("%w: %d bytes after record %d of %d", ErrRecords, len(data)-p, i, want)
		}
		c := cursor{b: data, p: p}
		length := c.varint("length")
		if c.bad != "" || length < 0 || int(length) > len(data)-c.p {
			return res, fmt.Errorf("%w: record %d at byte %d: bad length", ErrRecords, i, p)
		}
		end := c.p + int(length)
		c.b = data[:end]
		attrs := c.int8("attributes")
		tsDelta := c.varlong("timestamp delta")
		offDelta := c.varint("offset delta")
		key := c.bytes(true, "key")
		value := c.bytes(true, "value")
		nh := c.varint("header count")
		if nh < 0 {
			c.fail("header count")
		}
		if fn != nil {
			rec.Headers = rec.Headers[:0]
		}
		for j := int32(0); j < nh && c.bad == ""; j++ {
			hk := c.bytes(false, "header key")
			hv := c.bytes(true, "header value")
			if fn != nil && c.bad == "" {
				rec.Headers = append(rec.Headers, RecordHeader{Key: hk, Value: hv})
			}
		}
		if c.bad != "" {
			return res, fmt.Errorf("%w: record %d at byte %d: bad %s", ErrRecords, i, p, c.bad)
		}
		if c.p != end {
			return res, fmt.Errorf("%w: record %d at byte %d: %d bytes left inside the record", ErrRecords, i, p, end-c.p)
		}
		if gaps {
			if offDelta <= prevDelta || offDelta > h.LastOffsetDelta {
				return res, fmt.Errorf("%w: record %d has offset delta %d after %d (last offset delta %d)", ErrRecords, i, offDelta, prevDelta, h.LastOffsetDelta)
			}
			prevDelta = offDelta
		} else if int(offDelta) != i {
			return res, fmt.Errorf("%w: record %d has offset delta %d", ErrRecords, i, offDelta)
		}
		ts := h.BaseTimestamp + tsDelta
		if i == 0 || ts < res.minTS {
			res.minTS = ts
		}
		if i == 0 || ts > res.maxTS {
			res.maxTS = ts
		}
		if key == nil {
			res.nullKeys++
		}
		if fn != nil {
			rec.Attributes = attrs
			rec.TimestampDelta = tsDelta
			rec.OffsetDelta = offDelta
			rec.Key = key
			rec.Value = value
			rec.Offset = h.BaseOffset + int64(offDelta)
			rec.Timestamp = ts
			if logAppend {
				rec.Timestamp = h.MaxTimestamp
			}
			if err := fn(rec); err != nil {
				return res, err
			}
		}
		res.n++
		p = end
	}
	if res.n != want {
		return res, fmt.Errorf("%w: %d records, header says %d", ErrRecords, res.n, want)
	}
	if want > 0 && !gaps && int(h.LastOffsetDelta) != want-1 {
		return res, fmt.Errorf("%w: last offset delta %d with %d records", ErrRecords, h.LastOffsetDelta, want)
	}
	return res, nil
}
