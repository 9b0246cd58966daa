package recordbatch

// STUB: the record-batch work replaces this with the full implementation.

// Info is what Validate learned about a batch.
type Info struct {
	Header
	// Records is the number of records actually decoded (== Header.RecordCount).
	Records int
	// MinTimestamp and MaxTimestamp are over the records' absolute timestamps
	// (BaseTimestamp + timestamp delta).
	MinTimestamp, MaxTimestamp int64
	// UncompressedBytes is the size of the records section after decompression.
	UncompressedBytes int
}

// Validate fully checks one whole batch (len(batch) == header size): header, magic, CRC,
// codec, decompresses the records section when compressed (without keeping the result),
// decodes every record's framing (varint lengths, key/value/header lengths within the
// record), checks the record count against RecordCount, offset deltas 0..n-1 in order
// and LastOffsetDelta == n-1. Any failure wraps ErrCorrupt-class errors (ErrShort,
// ErrMagic, ErrCRC, ErrLength, ErrRecords, ErrCodec).
func Validate(batch []byte) (Info, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return Info{}, err
	}
	if h.Size() != len(batch) {
		return Info{}, ErrLength
	}
	if err := CheckCRC(batch); err != nil {
		return Info{}, err
	}
	return Info{Header: h, Records: int(h.RecordCount), MinTimestamp: h.BaseTimestamp, MaxTimestamp: h.MaxTimestamp}, nil
}
