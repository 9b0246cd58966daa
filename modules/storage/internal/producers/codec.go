package producers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sluicehq/sluice/kernel"
)

// Snapshot file format (version 1), all integers big-endian:
//
//	| version u16 | crc32c u32 | offset i64 | count u32 | count × entry |
//	entry: | producer_id i64 | epoch i16 | last_seq i32 | last_ts i64 |
//	       | coordinator_epoch i32 | txn_start_offset i64 | last_offset i64 |
//	       | n u8 (<= 5) | n × batch |
//	batch: | first_seq i32 | last_seq i32 | base_offset i64 | last_offset i64 | append_ms i64 |
//
// The CRC (Castagnoli) covers everything after the crc field. offset is the log end
// offset the snapshot describes (also the file name). A reader accepts version 1 only;
// a new version bumps SnapshotVersion and keeps decoding the previous one.
const (
	SnapshotVersion    = 1
	snapshotHeaderSize = 2 + 4 + 8 + 4
	entryFixedSize     = 8 + 2 + 4 + 8 + 4 + 8 + 8 + 1
	batchSize          = 4 + 4 + 8 + 8 + 8
)

// ErrBadSnapshot marks a snapshot that does not decode (torn, corrupt, unknown version).
var ErrBadSnapshot = errors.New("bad producer snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeSnapshot encodes the producers of s as a snapshot at offset.
func EncodeSnapshot(s *State, offset int64) []byte {
	b := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(s.producers)*(entryFixedSize+2*batchSize))
	binary.BigEndian.PutUint16(b, SnapshotVersion)
	binary.BigEndian.PutUint64(b[6:], uint64(offset))
	binary.BigEndian.PutUint32(b[14:], uint32(len(s.producers)))
	s.Entries(func(e *Entry) {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(e.LastSequence))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastTimestamp))
		b = binary.BigEndian.AppendUint32(b, uint32(e.CoordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.TxnStartOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
		b = append(b, byte(e.N))
		for _, sb := range e.Batches[:e.N] {
			b = binary.BigEndian.AppendUint32(b, uint32(sb.FirstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(sb.LastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(sb.BaseOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(sb.LastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(sb.AppendMs))
		}
	})
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
	return b
}

// DecodeSnapshot decodes a snapshot. It allocates at most one Entry per
// entryFixedSize bytes of input and never panics. Entries are by producer id,
// strictly increasing, as EncodeSnapshot writes them.
func DecodeSnapshot(b []byte) (offset int64, es []Entry, err error) {
	if len(b) < snapshotHeaderSize {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(b))
	}
	if v := binary.BigEndian.Uint16(b); v != SnapshotVersion {
		return 0, nil, fmt.Errorf("%w: version %d", ErrBadSnapshot, v)
	}
	if crc := crc32.Checksum(b[6:], castagnoli); crc != binary.BigEndian.Uint32(b[2:]) {
		return 0, nil, fmt.Errorf("%w: crc mismatch", ErrBadSnapshot)
	}
	offset = int64(binary.BigEndian.Uint64(b[6:]))
	count := binary.BigEndian.Uint32(b[14:])
	rest := b[snapshotHeaderSize:]
	if offset < 0 || uint64(count) > uint64(len(rest)/entryFixedSize) {
		return 0, nil, fmt.Errorf("%w: offset %d, %d entries in %d bytes", ErrBadSnapshot, offset, count, len(rest))
	}
	es = make([]Entry, 0, count)
	prev := int64(-1)
	for range count {
		if len(rest) < entryFixedSize {
			return 0, nil, fmt.Errorf("%w: truncated entry", ErrBadSnapshot)
		}
		var e Entry
		e.ProducerID = int64(binary.BigEndian.Uint64(rest))
		e.Epoch = int16(binary.BigEndian.Uint16(rest[8:]))
		e.LastSequence = int32(binary.BigEndian.Uint32(rest[10:]))
		e.LastTimestamp = int64(binary.BigEndian.Uint64(rest[14:]))
		e.CoordinatorEpoch = int32(binary.BigEndian.Uint32(rest[22:]))
		e.TxnStartOffset = int64(binary.BigEndian.Uint64(rest[26:]))
		e.LastOffset = int64(binary.BigEndian.Uint64(rest[34:]))
		n := int(rest[42])
		rest = rest[entryFixedSize:]
		if e.ProducerID <= prev || n > MaxBatches || len(rest) < n*batchSize || e.TxnStartOffset < -1 {
			return 0, nil, fmt.Errorf("%w: bad entry for producer %d", ErrBadSnapshot, e.ProducerID)
		}
		prev = e.ProducerID
		for i := range n {
			e.Batches[i] = SeqBatch{
				FirstSeq:   int32(binary.BigEndian.Uint32(rest)),
				LastSeq:    int32(binary.BigEndian.Uint32(rest[4:])),
				BaseOffset: int64(binary.BigEndian.Uint64(rest[8:])),
				LastOffset: int64(binary.BigEndian.Uint64(rest[16:])),
				AppendMs:   int64(binary.BigEndian.Uint64(rest[24:])),
			}
			rest = rest[batchSize:]
		}
		e.N = n
		es = append(es, e)
	}
	if len(rest) != 0 {
		return 0, nil, fmt.Errorf("%w: %d trailing bytes", ErrBadSnapshot, len(rest))
	}
	return offset, es, nil
}

// TxnIndexEntrySize is the size of one .txnindex entry (Kafka's AbortedTxn):
//
//	| version i16 (0) | producer_id i64 | first_offset i64 | last_offset i64 | last_stable_offset i64 |
const TxnIndexEntrySize = 34

// ErrBadTxnIndex marks a .txnindex entry that does not decode.
var ErrBadTxnIndex = errors.New("bad transaction index")

// AppendTxnIndexEntry appends a's .txnindex entry to dst.
func AppendTxnIndexEntry(dst []byte, a Aborted) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.LastStable))
}

// ParseTxnIndex decodes the whole entries of a .txnindex file's bytes. It returns the
// entries before the first bad one (an unknown version, offsets out of order) with
// an error; a partial trailing entry (a torn write) is ignored and reported through
// torn. It allocates at most one Aborted per TxnIndexEntrySize bytes of input.
func ParseTxnIndex(b []byte) (out []Aborted, torn bool, err error) {
	n := len(b) / TxnIndexEntrySize
	torn = len(b)%TxnIndexEntrySize != 0
	out = make([]Aborted, 0, n)
	for i := range n {
		e := b[i*TxnIndexEntrySize:]
		if v := int16(binary.BigEndian.Uint16(e)); v != 0 {
			return out, torn, fmt.Errorf("%w: entry %d has version %d", ErrBadTxnIndex, i, v)
		}
		a := Aborted{AbortedTxn: kernel.AbortedTxn{
			ProducerID:  int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset: int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:  int64(binary.BigEndian.Uint64(e[18:])),
		}, LastStable: int64(binary.BigEndian.Uint64(e[26:]))}
		if a.FirstOffset > a.LastOffset || (len(out) > 0 && a.LastOffset <= out[len(out)-1].LastOffset) {
			return out, torn, fmt.Errorf("%w: entry %d (first %d, last %d) out of order", ErrBadTxnIndex, i, a.FirstOffset, a.LastOffset)
		}
		out = append(out, a)
	}
	return out, torn, nil
}
