package recordbatch

import "fmt"

// Info is what Validate learned about a batch.
type Info struct {
	Header
	// Records is the number of records actually decoded (== Header.RecordCount).
	Records int
	// MinTimestamp and MaxTimestamp are over the records' absolute timestamps
	// (BaseTimestamp + timestamp delta), whatever the timestamp type. For a batch with
	// no records both are Header.MaxTimestamp.
	MinTimestamp, MaxTimestamp int64
	// UncompressedBytes is the size of the records section after decompression.
	UncompressedBytes int
	// NullKeys is the number of records with a null key (an empty key is a key), which
	// a compacted topic refuses.
	NullKeys int
}

// Validate fully checks one whole batch (len(batch) == header size): header, magic, CRC,
// codec, decompresses the records section when compressed (without keeping the result),
// decodes every record's framing (varint lengths, key/value/header lengths within the
// record), checks the record count against RecordCount, offset deltas 0..n-1 in order
// and LastOffsetDelta == n-1. Any failure wraps ErrCorrupt-class errors (ErrShort,
// ErrMagic, ErrCRC, ErrLength, ErrRecords, ErrCodec, ErrTooLarge).
//
// Decompression is bounded by DefaultMaxUncompressed(len(batch)); see ValidateWithLimit.
// Validate is safe for concurrent use and does not allocate per record.
func Validate(batch []byte) (Info, error) {
	return ValidateWithLimit(batch, 0)
}

// ValidateWithLimit is Validate with an explicit bound on the decompressed size of the
// records section; exceeding it fails with ErrTooLarge, and no more than about
// maxUncompressed bytes are allocated for output on the way. maxUncompressed <= 0 means
// DefaultMaxUncompressed(len(batch)).
func ValidateWithLimit(batch []byte, maxUncompressed int) (Info, error) {
	h, err := checkBatch(batch)
	if err != nil {
		return Info{Header: h}, err
	}
	data := batch[HeaderSize:]
	if h.Codec() != CodecNone {
		d := getDecompressor()
		defer putDecompressor(d)
		d.buf, err = d.decompress(h.Codec(), data, d.buf, limitFor(batch, maxUncompressed))
		if err != nil {
			return Info{Header: h}, err
		}
		data = d.buf
	}
	res, err := checkRecords(&h, data)
	if err != nil {
		return Info{Header: h}, err
	}
	return info(&h, res, len(data)), nil
}

// maxLimit caps any decompression limit (1 TiB), keeping limit+1 arithmetic safe.
const maxLimit = 1 << 40

func limitFor(batch []byte, maxUncompressed int) int {
	if maxUncompressed <= 0 {
		return DefaultMaxUncompressed(len(batch))
	}
	return min(maxUncompressed, maxLimit)
}

func info(h *Header, res scanResult, uncompressed int) Info {
	in := Info{Header: *h, Records: res.n, MinTimestamp: res.minTS, MaxTimestamp: res.maxTS, UncompressedBytes: uncompressed, NullKeys: res.nullKeys}
	if res.n == 0 {
		in.MinTimestamp, in.MaxTimestamp = h.MaxTimestamp, h.MaxTimestamp
	}
	return in
}

// checkBatch checks everything before the records section: header, magic, exact
// length, CRC and codec number.
func checkBatch(batch []byte) (Header, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return h, err
	}
	switch n := h.Size(); {
	case n > len(batch):
		return h, fmt.Errorf("%w: batch length %d, have %d bytes", ErrShort, n, len(batch))
	case n < len(batch):
		return h, fmt.Errorf("%w: batch length %d, given %d bytes", ErrLength, n, len(batch))
	}
	if err := CheckCRC(batch); err != nil {
		return h, err
	}
	if c := h.Codec(); c > CodecZstd {
		return h, fmt.Errorf("%w: unknown codec %d", ErrCodec, c)
	}
	return h, nil
}

// Decoder iterates the records of batches, decompressing into a buffer it keeps between
// calls, so a long-lived Decoder does not allocate in the steady state. The zero value is
// ready to use. A Decoder is not safe for concurrent use.
type Decoder struct {
	// MaxUncompressed bounds decompression as in ValidateWithLimit; <= 0 means
	// DefaultMaxUncompressed(len(batch)).
	MaxUncompressed int
	// Compacted accepts batches read back from a log the cleaner compacted (Kafka's
	// and Sluice's cleaners keep a batch's base offset, LastOffsetDelta and record
	// offset deltas when they remove records): offset deltas need only increase
	// strictly within [0, LastOffsetDelta], and there may be fewer records than
	// LastOffsetDelta+1. Readers of stored data set it; produce validation does not.
	Compacted bool

	dec *decompressor
	rec Record
}

// Records validates batch exactly like Validate and, only if the whole batch is valid,
// calls fn for each record in order. If fn returns an error, iteration stops and that
// error is returned as is. The *Record and every slice in it are valid only until the
// next call to Records on d (they point into batch or into d's buffer); copy what you
// keep, and do not modify them.
func (d *Decoder) Records(batch []byte, fn func(r *Record) error) (Info, error) {
	h, data, err := d.records(batch)
	if err != nil {
		return Info{Header: h}, err
	}
	return iterate(&h, data, &d.rec, fn, d.Compacted)
}

// records checks batch's header and returns it with the records section: batch's own
// bytes for an uncompressed batch, else d's buffer, decompressed into it (bounded by
// d.MaxUncompressed). The records themselves are not checked.
func (d *Decoder) records(batch []byte) (Header, []byte, error) {
	h, err := checkBatch(batch)
	if err != nil {
		return h, nil, err
	}
	data := batch[HeaderSize:]
	if h.Codec() != CodecNone {
		if d.dec == nil {
			d.dec = new(decompressor)
		}
		d.dec.buf, err = d.dec.decompress(h.Codec(), data, d.dec.buf, limitFor(batch, d.MaxUncompressed))
		d.dec.src.Reset(nil)
		if err != nil {
			if cap(d.dec.buf) > pooledBufMax {
				d.dec.buf = nil // do not keep what a bomb made us allocate
			}
			return h, nil, err
		}
		data = d.dec.buf
	}
	return h, data, nil
}

// Records validates batch and calls fn for each record, decompressing into buf (reused
// when large enough) and returning the buffer for the next call. It is the Decoder
// method without the Decoder; the same lifetime rules apply, with buf in place of the
// Decoder's buffer. Decompression is bounded by DefaultMaxUncompressed(len(batch)).
func Records(batch []byte, buf []byte, fn func(r *Record) error) ([]byte, error) {
	h, err := checkBatch(batch)
	if err != nil {
		return buf, err
	}
	data := batch[HeaderSize:]
	if h.Codec() != CodecNone {
		d := getDecompressor()
		out, err := d.decompress(h.Codec(), data, buf, limitFor(batch, 0))
		putDecompressor(d)
		if cap(out) >= cap(buf) {
			buf = out[:0]
		}
		if err != nil {
			return buf, err
		}
		data = out
	}
	var rec Record
	_, err = iterate(&h, data, &rec, fn, false)
	return buf, err
}

// iterate checks the framing of the whole records section first, then calls fn for each
// record, so fn never sees records of a batch that turns out to be corrupt.
func iterate(h *Header, data []byte, rec *Record, fn func(*Record) error, gaps bool) (Info, error) {
	res, err := check(h, data, gaps)
	if err != nil {
		return Info{Header: *h}, err
	}
	if _, err := scan(h, data, rec, fn, gaps); err != nil {
		return Info{Header: *h}, err
	}
	return info(h, res, len(data)), nil
}

// Section validates batch exactly like Records and returns its header and its records
// section, uncompressed: RecordCount records back to back in the record encoding (see
// the package doc). The section is batch's own bytes for an uncompressed batch, else
// d's buffer; it is valid until the next call on d, and must not be modified.
func (d *Decoder) Section(batch []byte) (Header, []byte, error) {
	h, data, err := d.records(batch)
	if err != nil {
		return h, nil, err
	}
	if _, err := check(&h, data, d.Compacted); err != nil {
		return h, nil, err
	}
	return h, data, nil
}

// check validates the framing of a records section: the fast path for produced
// batches, scan for ones that may have offset gaps.
func check(h *Header, data []byte, gaps bool) (scanResult, error) {
	if gaps {
		return scan(h, data, nil, nil, true)
	}
	return checkRecords(h, data)
}

// ScanSection calls fn for each record of sec, the uncompressed records section of a
// batch with header h (as Section returned it: already validated; a section of a
// compacted batch, whose offsets may have gaps, is accepted too). The *Record and its
// slices point into sec and are valid only during fn. fn's error is returned as is.
func ScanSection(h *Header, sec []byte, fn func(r *Record) error) error {
	var rec Record
	_, err := scan(h, sec, &rec, fn, true)
	return err
}
