package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// NoProducerID is the ProducerID of a batch from a non-idempotent producer.
const NoProducerID = -1

// xerialChunk is the uncompressed size of each xerial snappy chunk Builder writes
// (snappy-java's default block size).
const xerialChunk = 32 << 10

// Options are the batch-level fields Builder writes. Fields are written as given (note
// that Kafka uses ProducerID -1, NoProducerID, for "no producer"); OptionsFrom copies
// them from an existing batch's header.
type Options struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	// Codec is CodecNone..CodecZstd.
	Codec int
	// Level is the compression level in Kafka's terms (compression.gzip.level 1-9,
	// compression.lz4.level 1-17, compression.zstd.level -131072-22); 0 (or -1 for
	// gzip) is the codec's default. lz4 levels above 9 compress as 9 (the encoder's
	// highest). Ignored by snappy and uncompressed batches.
	Level int
	// SnappyXerial writes snappy data in the xerial framing of the Java client instead of
	// one raw block (librdkafka and franz-go style). Only used with CodecSnappy.
	SnappyXerial  bool
	Transactional bool
	Control       bool
	// LogAppendTime sets the timestamp-type bit; MaxTimestamp is still the largest record
	// timestamp (use SetLogAppendTime to stamp the broker's time afterwards).
	LogAppendTime bool
	// BaseTimestamp is the batch's base; records carry deltas from it.
	BaseTimestamp int64
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32

	// DeleteHorizon sets AttrDeleteHorizon (BaseTimestamp is then the horizon).
	DeleteHorizon bool
	// Keep, when set, rebuilds a batch with fewer records than it had (the cleaner):
	// Add takes each record's OffsetDelta as given (strictly increasing, at most
	// Keep.LastOffsetDelta), and the header's LastOffsetDelta and MaxTimestamp are
	// Keep's, so the batch spans the same offsets and times as the original.
	Keep *Kept
}

// Kept is the shape of the original batch that Options.Keep preserves.
type Kept struct {
	LastOffsetDelta int32
	MaxTimestamp    int64
}

// OptionsFrom returns the Options that rebuild a batch with header h: same base offset,
// epoch, codec, flags, base timestamp and producer fields (for re-encoding transformed
// records with the input's codec). Snappy framing is not visible in the header; set
// SnappyXerial yourself if it matters.
func OptionsFrom(h Header) Options {
	return Options{
		BaseOffset:           h.BaseOffset,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Codec:                h.Codec(),
		Transactional:        h.IsTransactional(),
		Control:              h.IsControl(),
		LogAppendTime:        h.Attributes&AttrLogAppendTime != 0,
		BaseTimestamp:        h.BaseTimestamp,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		BaseSequence:         h.BaseSequence,
	}
}

func (o *Options) attributes() int16 {
	a := int16(o.Codec)
	if o.LogAppendTime {
		a |= AttrLogAppendTime
	}
	if o.Transactional {
		a |= AttrTransactional
	}
	if o.Control {
		a |= AttrControl
	}
	if o.DeleteHorizon {
		a |= AttrDeleteHorizon
	}
	return a
}

// Builder encodes records into a magic-2 batch. Reuse one Builder (Reset, Add...,
// AppendTo) to keep its buffers and compressors. Not safe for concurrent use.
type Builder struct {
	opts  Options
	recs  []byte // uncompressed records section
	n     int32
	maxTS int64

	comp bytes.Buffer // stream compressors' output
	out  []byte       // block compressors' output
	gz   *gzip.Writer
	lz   *lz4.Writer
	zs   *zstd.Encoder
	// the levels gz and zs were made with (a Reset to another level makes new ones)
	gzLevel, zsLevel int
}

// NewBuilder returns a Builder for a batch with opts.
func NewBuilder(opts Options) (*Builder, error) {
	b := new(Builder)
	if err := b.Reset(opts); err != nil {
		return nil, err
	}
	return b, nil
}

// Reset starts a new batch with opts, dropping records added so far.
func (b *Builder) Reset(opts Options) error {
	if opts.Codec < CodecNone || opts.Codec > CodecZstd {
		return fmt.Errorf("recordbatch: build: unknown codec %d", opts.Codec)
	}
	b.opts = opts
	b.recs = b.recs[:0]
	b.n = 0
	b.maxTS = 0
	return nil
}

// Len is the number of records added since the last Reset.
func (b *Builder) Len() int { return int(b.n) }

// Add appends r as the next record. Its offset delta is its position (r.OffsetDelta,
// r.Offset and r.Timestamp are ignored); its timestamp is BaseTimestamp +
// r.TimestampDelta. With Options.Keep the offset delta is r.OffsetDelta instead. Add
// copies what it needs; r may be reused afterwards.
func (b *Builder) Add(r *Record) {
	delta := int64(b.n)
	if b.opts.Keep != nil {
		delta = int64(r.OffsetDelta)
	}
	body := 1 + varlongLen(r.TimestampDelta) + varlongLen(delta) +
		bytesLen(r.Key) + bytesLen(r.Value) + varlongLen(int64(len(r.Headers)))
	for i := range r.Headers {
		body += keyLen(r.Headers[i].Key) + bytesLen(r.Headers[i].Value)
	}
	p := b.recs
	p = appendVarlong(p, int64(body))
	p = append(p, byte(r.Attributes))
	p = appendVarlong(p, r.TimestampDelta)
	p = appendVarlong(p, delta)
	p = appendBytes(p, r.Key)
	p = appendBytes(p, r.Value)
	p = appendVarlong(p, int64(len(r.Headers)))
	for i := range r.Headers {
		p = appendKey(p, r.Headers[i].Key)
		p = appendBytes(p, r.Headers[i].Value)
	}
	b.recs = p
	ts := b.opts.BaseTimestamp + r.TimestampDelta
	if b.n == 0 || ts > b.maxTS {
		b.maxTS = ts
	}
	b.n++
}

// Header keys cannot be null: a nil key is written as an empty one.
func keyLen(k []byte) int { return varlongLen(int64(len(k))) + len(k) }

func appendKey(dst, k []byte) []byte {
	return append(appendVarlong(dst, int64(len(k))), k...)
}

// AppendTo appends the finished batch to dst and returns it. The Builder keeps its
// records; call Reset to start the next batch.
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	section := b.recs
	if b.opts.Codec != CodecNone {
		var err error
		if section, err = b.compress(); err != nil {
			return dst, err
		}
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	h := dst[start:]
	binary.BigEndian.PutUint64(h[OffBaseOffset:], uint64(b.opts.BaseOffset))
	binary.BigEndian.PutUint32(h[OffBatchLength:], uint32(HeaderSize-LogOverhead+len(section)))
	binary.BigEndian.PutUint32(h[OffLeaderEpoch:], uint32(b.opts.PartitionLeaderEpoch))
	h[OffMagic] = 2
	binary.BigEndian.PutUint16(h[OffAttributes:], uint16(b.opts.attributes()))
	lastDelta := b.n - 1
	binary.BigEndian.PutUint64(h[OffBaseTimestamp:], uint64(b.opts.BaseTimestamp))
	maxTS := b.maxTS
	if b.n == 0 {
		maxTS = -1
	}
	if k := b.opts.Keep; k != nil {
		lastDelta, maxTS = k.LastOffsetDelta, k.MaxTimestamp
	}
	binary.BigEndian.PutUint32(h[OffLastOffsetDelta:], uint32(lastDelta))
	binary.BigEndian.PutUint64(h[OffMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(h[OffProducerID:], uint64(b.opts.ProducerID))
	binary.BigEndian.PutUint16(h[OffProducerEpoch:], uint16(b.opts.ProducerEpoch))
	binary.BigEndian.PutUint32(h[OffBaseSequence:], uint32(b.opts.BaseSequence))
	binary.BigEndian.PutUint32(h[OffRecordCount:], uint32(b.n))
	dst = append(dst, section...)
	SetCRC(dst[start:])
	return dst, nil
}

// compress returns the records section compressed with the Builder's codec; the result
// lives in the Builder until the next compress.
func (b *Builder) compress() ([]byte, error) {
	b.comp.Reset()
	var err error
	switch b.opts.Codec {
	case CodecGzip:
		if b.gz == nil || b.gzLevel != b.opts.Level {
			level := b.opts.Level
			if level == 0 {
				level = gzip.DefaultCompression
			}
			if b.gz, err = gzip.NewWriterLevel(&b.comp, level); err != nil {
				return nil, fmt.Errorf("recordbatch: build: gzip level %d: %w", b.opts.Level, err)
			}
			b.gzLevel = b.opts.Level
		} else {
			b.gz.Reset(&b.comp)
		}
		if _, err = b.gz.Write(b.recs); err == nil {
			err = b.gz.Close()
		}
	case CodecSnappy:
		if !b.opts.SnappyXerial {
			b.out = snappy.Encode(b.out[:cap(b.out)], b.recs)
			return b.out, nil
		}
		out := b.out[:0]
		out = append(out, xerialMagic[:]...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		for rest := b.recs; len(rest) > 0; {
			chunk := rest[:min(len(rest), xerialChunk)]
			rest = rest[len(chunk):]
			lenAt := len(out)
			out = append(out, 0, 0, 0, 0)
			out = append(out, make([]byte, snappy.MaxEncodedLen(len(chunk)))...)
			enc := snappy.Encode(out[lenAt+4:], chunk)
			binary.BigEndian.PutUint32(out[lenAt:], uint32(len(enc)))
			out = out[:lenAt+4+len(enc)]
		}
		b.out = out
		return out, nil
	case CodecLZ4:
		if b.lz == nil {
			b.lz = lz4.NewWriter(&b.comp)
		} else {
			b.lz.Reset(&b.comp)
		}
		level := lz4.Fast
		if l := b.opts.Level; l > 0 {
			level = lz4.Level1 << (min(l, 9) - 1)
		}
		if err := b.lz.Apply(lz4.CompressionLevelOption(level)); err != nil {
			return nil, fmt.Errorf("recordbatch: build: lz4 level %d: %w", b.opts.Level, err)
		}
		if _, err = b.lz.Write(b.recs); err == nil {
			err = b.lz.Close()
		}
	case CodecZstd:
		if b.zs == nil || b.zsLevel != b.opts.Level {
			opts := []zstd.EOption{zstd.WithEncoderConcurrency(1)}
			if b.opts.Level != 0 {
				opts = append(opts, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(b.opts.Level)))
			}
			if b.zs, err = zstd.NewWriter(nil, opts...); err != nil {
				return nil, err
			}
			b.zsLevel = b.opts.Level
		}
		b.out = b.zs.EncodeAll(b.recs, b.out[:0])
		return b.out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("recordbatch: build: compress: %w", err)
	}
	return b.comp.Bytes(), nil
}

// Build returns a batch with opts holding records. It panics on an invalid codec: it is
// meant for tests and fixed inputs; use a Builder elsewhere.
func Build(opts Options, records ...Record) []byte {
	b, err := NewBuilder(opts)
	if err != nil {
		panic(err)
	}
	for i := range records {
		b.Add(&records[i])
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		panic(err)
	}
	return out
}

// SetLogAppendTime gives batch Kafka's LogAppendTime semantics: it sets the timestamp-type
// attribute bit and MaxTimestamp to ts (every record then reads as ts) and recomputes the
// CRC. batch must be one whole batch; records are not touched. Call it only on a batch
// that passed Validate: recomputing the CRC would otherwise bless corrupted bytes.
func SetLogAppendTime(batch []byte, ts int64) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	if h.Size() != len(batch) {
		return fmt.Errorf("%w: batch length %d, given %d bytes", ErrLength, h.Size(), len(batch))
	}
	binary.BigEndian.PutUint16(batch[OffAttributes:], uint16(h.Attributes|AttrLogAppendTime))
	binary.BigEndian.PutUint64(batch[OffMaxTimestamp:], uint64(ts))
	SetCRC(batch)
	return nil
}

// Varint encoding (zigzag, 7 bits a byte, low groups first).

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func varlongLen(v int64) int {
	u := zigzag(v)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func appendVarlong(dst []byte, v int64) []byte {
	u := zigzag(v)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// bytesLen and appendBytes handle a length-prefixed byte string; nil is written as -1.
func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varlongLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 1) // zigzag(-1)
	}
	return append(appendVarlong(dst, int64(len(b))), b...)
}
