package storagetest

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// Batch builds a valid, uncompressed magic-2 record batch with n records (n >= 1) at
// base offset base. Record i has offset base+i, timestamp baseTs+i, no key, and a value
// of valueSize bytes. The CRC is computed with recordbatch.SetCRC.
func Batch(base, baseTs int64, n, valueSize int) []byte {
	return AppendBatch(nil, base, baseTs, n, valueSize)
}

// AppendBatch appends Batch(base, baseTs, n, valueSize) to dst.
func AppendBatch(dst []byte, base, baseTs int64, n, valueSize int) []byte {
	if n < 1 {
		panic("storagetest: a batch needs at least one record")
	}
	start := len(dst)
	dst = append(dst, make([]byte, recordbatch.HeaderSize)...)
	h := dst[start:]
	binary.BigEndian.PutUint64(h[recordbatch.OffBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(h[recordbatch.OffLeaderEpoch:], 0)
	h[recordbatch.OffMagic] = 2
	binary.BigEndian.PutUint16(h[recordbatch.OffAttributes:], 0)
	binary.BigEndian.PutUint32(h[recordbatch.OffLastOffsetDelta:], uint32(n-1))
	binary.BigEndian.PutUint64(h[recordbatch.OffBaseTimestamp:], uint64(baseTs))
	binary.BigEndian.PutUint64(h[recordbatch.OffMaxTimestamp:], uint64(baseTs+int64(n-1)))
	binary.BigEndian.PutUint64(h[recordbatch.OffProducerID:], ^uint64(0))
	binary.BigEndian.PutUint16(h[recordbatch.OffProducerEpoch:], 0xffff)
	binary.BigEndian.PutUint32(h[recordbatch.OffBaseSequence:], ^uint32(0))
	binary.BigEndian.PutUint32(h[recordbatch.OffRecordCount:], uint32(n))
	var body [4 * binary.MaxVarintLen64]byte
	for i := 0; i < n; i++ {
		// attributes, timestamp delta, offset delta, key length -1, value length
		b := body[:0]
		b = append(b, 0)
		b = binary.AppendVarint(b, int64(i))
		b = binary.AppendVarint(b, int64(i))
		b = binary.AppendVarint(b, -1)
		b = binary.AppendVarint(b, int64(valueSize))
		recLen := len(b) + valueSize + 1 // + header count varint(0)
		dst = binary.AppendVarint(dst, int64(recLen))
		dst = append(dst, b...)
		for j := 0; j < valueSize; j++ {
			dst = append(dst, byte('a'+(i+j)%26))
		}
		dst = binary.AppendVarint(dst, 0)
	}
	b := dst[start:]
	binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], uint32(len(b)-recordbatch.LogOverhead))
	recordbatch.SetCRC(b)
	return dst
}

// ReadAll returns the bytes of a read result's chunks, concatenated. It reads file
// chunks with ReadAt at their offsets.
func ReadAll(rr kernel.ReadResult) ([]byte, error) {
	out := make([]byte, 0, rr.Size)
	for _, c := range rr.Chunks {
		if c.File == nil {
			out = append(out, c.Bytes...)
			continue
		}
		buf := make([]byte, c.N)
		if _, err := c.File.ReadAt(buf, c.Off); err != nil && err != io.EOF {
			return nil, fmt.Errorf("read chunk at %d+%d: %w", c.Off, c.N, err)
		}
		out = append(out, buf...)
	}
	return out, nil
}

// BatchInfo is a parsed batch of a read result.
type BatchInfo struct {
	Base, Last, MaxTs int64
	Size              int
}

// ParseAll splits b into whole batches, checking each CRC.
func ParseAll(b []byte) ([]BatchInfo, error) {
	var out []BatchInfo
	err := recordbatch.Split(b, func(h recordbatch.Header, batch []byte) error {
		if err := recordbatch.CheckCRC(batch); err != nil {
			return fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
		out = append(out, BatchInfo{Base: h.BaseOffset, Last: h.LastOffset(), MaxTs: h.MaxTimestamp, Size: len(batch)})
		return nil
	})
	return out, err
}

// SetLeaderEpoch sets the partition leader epoch of every batch in records, in place
// (the CRC does not cover it), and returns records.
func SetLeaderEpoch(records []byte, epoch int32) []byte {
	for b := records; len(b) >= recordbatch.HeaderSize; {
		h, err := recordbatch.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			break
		}
		binary.BigEndian.PutUint32(b[recordbatch.OffLeaderEpoch:], uint32(epoch))
		b = b[h.Size():]
	}
	return records
}
