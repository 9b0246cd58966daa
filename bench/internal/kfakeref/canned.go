package kfakeref

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The v2 record batch, as far as the front writes and reads it (Kafka's layout):
//
//	| base offset i64 | batch length i32 | leader epoch i32 | magic i8 = 2 | crc u32 |
//	| attributes i16 | last offset delta i32 | base timestamp i64 | max timestamp i64 |
//	| producer id i64 | producer epoch i16 | base sequence i32 | record count i32 | records |
//
// The batch length counts the bytes after itself; the crc is CRC-32C over attributes to
// the end. The low three bits of attributes name the codec of the records section.
const (
	batchHeaderSize = 61
	logOverhead     = 12 // base offset and batch length, which the batch length leaves out
	offBatchLength  = 8
	offMagic        = 16
	offCRC          = 17
	offAttributes   = 21
	offRecordCount  = 57
)

// CannedBatch builds the batch a Front serves: records values of recordBytes bytes
// (their last randomFrac random, from a fixed seed; the rest repeats the record's index)
// filling about fill bytes uncompressed, compressed with codec (none, gzip, snappy, lz4,
// zstd). It returns the batch and its record count. The batch is the same, byte for
// byte, on every run and for every build (canned_test.go pins it), so the ceiling's
// figures stay comparable: no producer id, leader epoch -1, timestamps 0, no keys.
func CannedBatch(recordBytes int, randomFrac float64, codec string, fill int) ([]byte, int64, error) {
	if recordBytes < 0 || randomFrac < 0 || randomFrac > 1 || fill < 1 {
		return nil, 0, fmt.Errorf("%w: canned batch of %d-byte records, random %v, fill %d", ErrBadOptions, recordBytes, randomFrac, fill)
	}
	c, err := codecNumber(codec)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	value := make([]byte, recordBytes)
	split := recordBytes - int(float64(recordBytes)*randomFrac)
	var x uint64 = 0x9e3779b97f4a7c15 // xorshift state: the same batch every run
	var records, scratch []byte
	n := 0
	for size := 0; n == 0 || size < fill; n++ {
		digits := strconv.AppendInt(nil, int64(n), 10)
		digits = append(digits, ' ')
		for i := 0; i < split; i += len(digits) {
			copy(value[i:split], digits)
		}
		for i := split; i < recordBytes; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			value[i] = byte(x)
		}
		// A record is its length (a varint) and its body; encode it with length 0 (one
		// byte) to learn the body's size.
		r := kmsg.Record{OffsetDelta: int32(n), Value: value}
		scratch = r.AppendTo(scratch[:0])
		records = binary.AppendVarint(records, int64(len(scratch)-1))
		records = append(records, scratch[1:]...)
		size += recordBytes + 8
	}
	section, err := compress(c, records)
	if err != nil {
		return nil, 0, err
	}
	b := kmsg.RecordBatch{
		Length:               int32(batchHeaderSize - logOverhead + len(section)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(c),
		LastOffsetDelta:      int32(n - 1),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(n),
		Records:              section,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return out, int64(n), nil
}

// Codec numbers of the attributes field.
const (
	codecNone = iota
	codecGzip
	codecSnappy
	codecLZ4
	codecZstd
)

func codecNumber(name string) (int, error) {
	switch strings.ToLower(name) {
	case "", "none":
		return codecNone, nil
	case "gzip":
		return codecGzip, nil
	case "snappy":
		return codecSnappy, nil
	case "lz4":
		return codecLZ4, nil
	case "zstd":
		return codecZstd, nil
	}
	return 0, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// compress returns records compressed with codec, as Kafka clients do: gzip and lz4
// frames at their default levels, one raw snappy block, one zstd frame.
func compress(codec int, records []byte) ([]byte, error) {
	var buf bytes.Buffer
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	switch codec {
	case codecNone:
		return records, nil
	case codecSnappy:
		return snappy.Encode(nil, records), nil
	case codecZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer enc.Close()
		return enc.EncodeAll(records, nil), nil
	case codecGzip:
		w = gzip.NewWriter(&buf)
	case codecLZ4:
		w = lz4.NewWriter(&buf)
	}
	if _, err := w.Write(records); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	return buf.Bytes(), nil
}

// checkBatch reports whether b starts with a v2 batch header that can be served.
func checkBatch(b []byte) error {
	switch {
	case len(b) < batchHeaderSize:
		return errors.New("shorter than a batch header")
	case b[offMagic] != 2:
		return fmt.Errorf("magic %d, want 2", b[offMagic])
	case int32(binary.BigEndian.Uint32(b[offBatchLength:])) < batchHeaderSize-logOverhead:
		return fmt.Errorf("batch length %d", int32(binary.BigEndian.Uint32(b[offBatchLength:])))
	}
	return nil
}
