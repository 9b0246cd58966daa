package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Wire layout of a magic-2 record batch (all integers big-endian). The CRC is CRC-32C
// (Castagnoli) over everything from Attributes to the end of the batch, so BaseOffset and
// PartitionLeaderEpoch can be rewritten without recomputing it.
//
//	offset  size  field
//	     0     8  BaseOffset
//	     8     4  BatchLength           bytes after this field (total = BatchLength + 12)
//	    12     4  PartitionLeaderEpoch
//	    16     1  Magic                 always 2
//	    17     4  CRC                   crc32c(bytes[21:])
//	    21     2  Attributes            bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
//	    23     4  LastOffsetDelta
//	    27     8  BaseTimestamp
//	    35     8  MaxTimestamp
//	    43     8  ProducerID
//	    51     2  ProducerEpoch
//	    53     4  BaseSequence
//	    57     4  RecordCount
//	    61     -  Records (compressed as a whole when codec != 0)
//
// These offsets are frozen by the Kafka protocol.
const (
	OffBaseOffset      = 0
	OffBatchLength     = 8
	OffLeaderEpoch     = 12
	OffMagic           = 16
	OffCRC             = 17
	OffAttributes      = 21
	OffLastOffsetDelta = 23
	OffBaseTimestamp   = 27
	OffMaxTimestamp    = 35
	OffProducerID      = 43
	OffProducerEpoch   = 51
	OffBaseSequence    = 53
	OffRecordCount     = 57
	HeaderSize         = 61
	// LogOverhead is the BaseOffset and BatchLength prefix, not counted in BatchLength.
	LogOverhead = 12
)

// Attribute bits.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
	// AttrDeleteHorizon (KIP-534): BaseTimestamp holds the delete horizon the cleaner
	// set when it first kept a tombstone or transaction marker of the batch; the
	// records' timestamp deltas are relative to it, so their timestamps are unchanged.
	AttrDeleteHorizon = 0x40
)

// Codecs (attribute bits 0-2).
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// Errors. Every sentinel below satisfies errors.Is(err, ErrCorrupt) (callers map that to
// CORRUPT_MESSAGE) while staying distinguishable from the others with errors.Is.
var (
	// ErrShort: fewer bytes than the header or the declared length.
	ErrShort error = corrupt("record batch: truncated")
	// ErrMagic: magic is not 2.
	ErrMagic error = corrupt("record batch: unsupported magic")
	// ErrCRC: the CRC does not match.
	ErrCRC error = corrupt("record batch: crc mismatch")
	// ErrLength: BatchLength is impossible, or disagrees with the bytes given.
	ErrLength error = corrupt("record batch: bad length")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed part of a batch.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the batch's total size in bytes.
func (h *Header) Size() int { return int(h.BatchLength) + LogOverhead }

// LastOffset is BaseOffset + LastOffsetDelta.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression codec.
func (h *Header) Codec() int { return int(h.Attributes & AttrCodecMask) }

// IsControl reports a control (transaction marker) batch.
func (h *Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// IsTransactional reports a transactional batch.
func (h *Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// ParseHeader decodes the fixed header at the start of b. It checks only that b holds a
// whole header and that BatchLength is plausible; it does not check the CRC.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, ErrShort
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[OffBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[OffBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[OffLeaderEpoch:]))
	h.Magic = int8(b[OffMagic])
	h.CRC = binary.BigEndian.Uint32(b[OffCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[OffAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[OffLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[OffBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[OffMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[OffProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[OffProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[OffBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[OffRecordCount:]))
	if h.Magic != 2 {
		return h, fmt.Errorf("%w %d", ErrMagic, h.Magic)
	}
	if h.BatchLength < HeaderSize-LogOverhead {
		return h, fmt.Errorf("%w: %d", ErrLength, h.BatchLength)
	}
	return h, nil
}

// CheckCRC verifies the CRC of the whole batch b (len(b) == h.Size()).
func CheckCRC(b []byte) error {
	if len(b) < HeaderSize {
		return ErrShort
	}
	want := binary.BigEndian.Uint32(b[OffCRC:])
	if crc32.Checksum(b[OffAttributes:], castagnoli) != want {
		return ErrCRC
	}
	return nil
}

// SetCRC recomputes and stores the CRC of batch b (after changing a covered field).
func SetCRC(b []byte) {
	binary.BigEndian.PutUint32(b[OffCRC:], crc32.Checksum(b[OffAttributes:], castagnoli))
}

// SetBaseOffset rewrites the base offset of batch b (not covered by the CRC).
func SetBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[OffBaseOffset:], uint64(off)) }

// Split calls fn for each whole batch in b, in order. It stops at the first malformed or
// truncated batch and returns the error (wrapping ErrShort/ErrMagic/ErrLength); bytes
// before it were handed to fn already. It does not check CRCs.
func Split(b []byte, fn func(h Header, batch []byte) error) error {
	for len(b) > 0 {
		h, err := ParseHeader(b)
		if err != nil {
			return err
		}
		n := h.Size()
		if n > len(b) {
			return ErrShort
		}
		if err := fn(h, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
