package recordbatch

import (
	"encoding/binary"
)

// Recompressor rewrites batches with another codec (a topic's compression.type other
// than producer, as Kafka's broker does). Reuse one to keep its buffers and
// compressors; not safe for concurrent use.
type Recompressor struct {
	b   *Builder
	dec Decoder
}

// Recompress returns records (one or more valid, concatenated batches) with every
// batch not already in codec rebuilt in codec at level (Options.Level): the same base
// offset, leader epoch, flags, producer fields, base and max timestamps, records and
// their offset and timestamp deltas; a new CRC. A batch already in codec is copied as
// it is; when none needs rebuilding, records itself is returned. Decompression is
// bounded as in Decoder (maxUncompressed <= 0: the default for the batch's size).
func (rc *Recompressor) Recompress(records []byte, codec, level, maxUncompressed int) ([]byte, error) {
	if !NeedsRecompress(records, codec) {
		return records, nil
	}
	if rc.b == nil {
		rc.b = new(Builder)
	}
	rc.dec.MaxUncompressed = maxUncompressed
	out := make([]byte, 0, len(records))
	err := Split(records, func(h Header, batch []byte) error {
		if h.Codec() == codec {
			out = append(out, batch...)
			return nil
		}
		opts := OptionsFrom(h)
		opts.Codec, opts.Level = codec, level
		if err := rc.b.Reset(opts); err != nil {
			return err
		}
		if _, err := rc.dec.Records(batch, func(r *Record) error {
			rc.b.Add(r)
			return nil
		}); err != nil {
			return err
		}
		start := len(out)
		var err error
		if out, err = rc.b.AppendTo(out); err != nil {
			return err
		}
		// The header's max timestamp as the input had it (a LogAppendTime stamp, or
		// the records' largest), then the CRC over it.
		nb := out[start:]
		binary.BigEndian.PutUint64(nb[OffMaxTimestamp:], uint64(h.MaxTimestamp))
		SetCRC(nb)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NeedsRecompress reports whether Recompress would rebuild a batch of records (one
// not in codec); false for records that do not split into batches, which Recompress
// returns as they are.
func NeedsRecompress(records []byte, codec int) bool {
	need := false
	if err := Split(records, func(h Header, _ []byte) error {
		need = need || h.Codec() != codec
		return nil
	}); err != nil {
		return false
	}
	return need
}
