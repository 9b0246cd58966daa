package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decompression limits.
const (
	// DefaultMaxUncompressedBase plus DefaultMaxUncompressedFactor times the batch size is
	// the default bound on a compressed batch's records section after decompression
	// (see DefaultMaxUncompressed).
	DefaultMaxUncompressedBase   = 64 << 20
	DefaultMaxUncompressedFactor = 32

	// zstdMaxWindow is the largest zstd window accepted. The zstd format recommends
	// decoders support 8 MiB; Kafka producers (zstd-jni, librdkafka, klauspost) stay
	// within it. The streaming decoder allocates a buffer of the window size, so this
	// also bounds what a frame header alone can make us allocate.
	zstdMaxWindow = 8 << 20
	// zstdMaxMemory caps the size a single-segment zstd frame may declare (such frames
	// use their content size as the window). zstdPrecheck already holds every frame's
	// declared size to the per-call limit; this is a backstop in the decoder itself.
	zstdMaxMemory = 256 << 20

	// pooledBufMax: scratch buffers larger than this are not kept in the pool.
	pooledBufMax = 8 << 20
	// snappyMaxRatio bounds a raw snappy block's declared length: the densest element
	// (a 3-byte copy of 64 bytes) expands 64/3 < 22 times, so a larger claim is corrupt.
	snappyMaxRatio = 22
)

// xerialMagic opens snappy data framed the way snappy-java (Kafka's Java client) writes
// it: magic, then big-endian int32 version and compatible version, then repeated
// [int32 length][raw snappy block].
var xerialMagic = [8]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderLen = 16

// DefaultMaxUncompressed is the decompression limit Validate uses for a batch of
// batchLen bytes: 64 MiB plus 32 times the batch size. It allows any realistic producer
// batch (a 1 MiB batch may inflate to 96 MiB) while bounding what a bomb can cost.
func DefaultMaxUncompressed(batchLen int) int {
	return DefaultMaxUncompressedBase + DefaultMaxUncompressedFactor*batchLen
}

// decompressor holds the stream decoders for one goroutine's use, created on first use
// with fixed options and reset for each batch. Pooled in decompressors.
type decompressor struct {
	src bytes.Reader
	gz  *gzip.Reader
	lz  *lz4.Reader
	zs  *zstd.Decoder
	buf []byte // scratch output, owned by whoever holds the decompressor
}

// decompressors is a pool of decompressors; their decoder configuration never changes,
// so sharing them between goroutines (one at a time) is safe.
var decompressors = sync.Pool{New: func() any { return new(decompressor) }}

func getDecompressor() *decompressor { return decompressors.Get().(*decompressor) }

func putDecompressor(d *decompressor) {
	if cap(d.buf) > pooledBufMax {
		d.buf = nil
	}
	d.buf = d.buf[:0]
	d.src.Reset(nil)
	decompressors.Put(d)
}

// Decompress decodes src, compressed with codec (CodecGzip..CodecZstd, Kafka's
// compression ids), into a new slice of at most limit bytes; more is an error wrapping
// ErrTooLarge, a corrupt input one wrapping ErrCodec. For payloads other than record
// batches that Kafka compresses with the same codecs (KIP-714's pushed metrics).
func Decompress(codec int, src []byte, limit int) ([]byte, error) {
	d := getDecompressor()
	defer putDecompressor(d)
	out, err := d.decompress(codec, src, nil, limit)
	if err == nil && len(out) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes once decompressed", ErrTooLarge, limit)
	}
	return out, err
}

// decompress decodes src (a records section compressed with codec) into dst[:0],
// growing dst as needed but never beyond limit+1 bytes, and returns the result.
func (d *decompressor) decompress(codec int, src, dst []byte, limit int) ([]byte, error) {
	d.src.Reset(src)
	switch codec {
	case CodecGzip:
		var err error
		if d.gz == nil {
			d.gz, err = gzip.NewReader(&d.src)
		} else {
			err = d.gz.Reset(&d.src)
		}
		if err != nil {
			return dst[:0], fmt.Errorf("%w: gzip: %v", ErrCodec, err)
		}
		return readLimited(d.gz, dst, limit, "gzip")
	case CodecSnappy:
		return snappyDecode(src, dst, limit)
	case CodecLZ4:
		if d.lz == nil {
			d.lz = lz4.NewReader(&d.src)
		} else {
			d.lz.Reset(&d.src)
		}
		return readLimited(d.lz, dst, limit, "lz4")
	case CodecZstd:
		if err := zstdPrecheck(src, limit); err != nil {
			return dst[:0], err
		}
		if d.zs == nil {
			zs, err := zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(zstdMaxWindow),
				zstd.WithDecoderMaxMemory(zstdMaxMemory))
			if err != nil {
				return dst[:0], fmt.Errorf("%w: zstd: %v", ErrCodec, err)
			}
			d.zs = zs
		}
		if err := d.zs.Reset(&d.src); err != nil {
			return dst[:0], fmt.Errorf("%w: zstd: %v", ErrCodec, err)
		}
		out, err := readLimited(d.zs, dst, limit, "zstd")
		if err != nil {
			// Drop the reference to src and any decoder state from the failed stream.
			_ = d.zs.Reset(nil)
		}
		return out, err
	}
	return dst[:0], fmt.Errorf("%w: unknown codec %d", ErrCodec, codec)
}

// readLimited reads r to EOF into dst[:0]. It grows dst by doubling, capped at limit+1
// bytes, so memory follows the bytes actually produced and never exceeds the limit.
func readLimited(r io.Reader, dst []byte, limit int, name string) ([]byte, error) {
	dst = dst[:0]
	if cap(dst) == 0 {
		dst = make([]byte, 0, min(limit+1, 16<<10))
	}
	stalls := 0
	for {
		if len(dst) == cap(dst) {
			if len(dst) > limit {
				return dst, fmt.Errorf("%w: %s output over %d bytes", ErrTooLarge, name, limit)
			}
			next := make([]byte, len(dst), min(2*cap(dst), limit+1))
			copy(next, dst)
			dst = next
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst, fmt.Errorf("%w: %s output over %d bytes", ErrTooLarge, name, limit)
		}
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst, fmt.Errorf("%w: %s: %v", ErrCodec, name, err)
		case n == 0:
			if stalls++; stalls > 100 {
				return dst, fmt.Errorf("%w: %s: %v", ErrCodec, name, io.ErrNoProgress)
			}
		default:
			stalls = 0
		}
	}
}

// snappyDecode decodes either one raw snappy block or xerial-framed blocks.
func snappyDecode(src, dst []byte, limit int) ([]byte, error) {
	dst = dst[:0]
	if len(src) < xerialHeaderLen || !bytes.Equal(src[:len(xerialMagic)], xerialMagic[:]) {
		return snappyBlock(src, dst, limit)
	}
	for p := xerialHeaderLen; p < len(src); {
		if len(src)-p < 4 {
			return dst, fmt.Errorf("%w: snappy: truncated xerial chunk length", ErrCodec)
		}
		n := binary.BigEndian.Uint32(src[p:])
		p += 4
		if uint64(n) > uint64(len(src)-p) {
			return dst, fmt.Errorf("%w: snappy: xerial chunk of %d bytes, %d left", ErrCodec, n, len(src)-p)
		}
		var err error
		if dst, err = snappyBlock(src[p:p+int(n)], dst, limit); err != nil {
			return dst, err
		}
		p += int(n)
	}
	return dst, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst.
func snappyBlock(block, dst []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, fmt.Errorf("%w: snappy: %v", ErrCodec, err)
	}
	if n > snappyMaxRatio*len(block) {
		return dst, fmt.Errorf("%w: snappy: block of %d bytes claims %d", ErrCodec, len(block), n)
	}
	if n > limit-len(dst) {
		return dst, fmt.Errorf("%w: snappy output over %d bytes", ErrTooLarge, limit)
	}
	if cap(dst)-len(dst) < n {
		next := make([]byte, len(dst), max(len(dst)+n, min(2*cap(dst), limit)))
		copy(next, dst)
		dst = next
	}
	out, err := snappy.Decode(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return dst, fmt.Errorf("%w: snappy: %v", ErrCodec, err)
	}
	if len(out) != n {
		return dst, fmt.Errorf("%w: snappy: decoded %d bytes, header says %d", ErrCodec, len(out), n)
	}
	return dst[:len(dst)+n], nil
}

// zstdPrecheck walks the zstd frames in src without decoding them and rejects, before
// the decoder allocates anything, content sizes that add up to more than limit (a
// single-segment frame's content size is also its window, allocated up front).
//
//	frame:     magic u32le 0xFD2FB528 | descriptor u8 | [window u8] | [dict id 0/1/2/4]
//	           | [content size 0/1/2/4/8] | blocks | [checksum u32 if descriptor bit 2]
//	block:     header u24le (bit 0 last, bits 1-2 type: raw, rle, compressed, reserved;
//	           bits 3-23 size) | size bytes (1 for rle)
//	skippable: magic u32le 0x184D2A5? | size u32le | size bytes
//	descriptor bits: 7-6 content-size flag, 5 single segment, 2 checksum, 1-0 dict id flag.
//
// Structural errors found here are ErrCodec: the decoder would fail on them too.
func zstdPrecheck(src []byte, limit int) error {
	_, err := zstdDeclared(src, limit)
	return err
}

// zstdDeclared is zstdPrecheck returning the content sizes the frames declare, added up
// (frames that declare none count 0).
func zstdDeclared(src []byte, limit int) (uint64, error) {
	const (
		frameMagic     = 0xFD2FB528
		skippableMask  = 0xFFFFFFF0
		skippableMagic = 0x184D2A50
	)
	bad := func(what string) (uint64, error) { return 0, fmt.Errorf("%w: zstd: %s", ErrCodec, what) }
	total := uint64(0)
	for p := 0; p < len(src); {
		if len(src)-p < 4 {
			return bad("truncated frame magic")
		}
		m := binary.LittleEndian.Uint32(src[p:])
		p += 4
		if m&skippableMask == skippableMagic {
			if len(src)-p < 4 {
				return bad("truncated skippable frame")
			}
			n := uint64(binary.LittleEndian.Uint32(src[p:]))
			p += 4
			if n > uint64(len(src)-p) {
				return bad("truncated skippable frame")
			}
			p += int(n)
			continue
		}
		if m != frameMagic {
			return bad("bad frame magic")
		}
		if p >= len(src) {
			return bad("truncated frame header")
		}
		fhd := src[p]
		p++
		single := fhd&0x20 != 0
		if !single {
			p++ // window descriptor
		}
		p += [4]int{0, 1, 2, 4}[fhd&3]
		fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
		if fcsLen == 0 && single {
			fcsLen = 1
		}
		if p+fcsLen > len(src) {
			return bad("truncated frame header")
		}
		if fcsLen > 0 {
			var size uint64
			switch b := src[p:]; fcsLen {
			case 1:
				size = uint64(b[0])
			case 2:
				size = uint64(binary.LittleEndian.Uint16(b)) + 256
			case 4:
				size = uint64(binary.LittleEndian.Uint32(b))
			default:
				size = binary.LittleEndian.Uint64(b)
			}
			if size > uint64(limit) || total+size > uint64(limit) {
				return 0, fmt.Errorf("%w: zstd frames declare over %d bytes", ErrTooLarge, limit)
			}
			total += size
		}
		p += fcsLen
		for last := false; !last; {
			if len(src)-p < 3 {
				return bad("truncated block header")
			}
			bh := uint32(src[p]) | uint32(src[p+1])<<8 | uint32(src[p+2])<<16
			p += 3
			last = bh&1 != 0
			n := int(bh >> 3)
			switch (bh >> 1) & 3 {
			case 1: // RLE: one byte repeated n times
				n = 1
			case 3:
				return bad("reserved block type")
			}
			if n > len(src)-p {
				return bad("truncated block")
			}
			p += n
		}
		if fhd&0x04 != 0 {
			if len(src)-p < 4 {
				return bad("truncated checksum")
			}
			p += 4
		}
	}
	return total, nil
}
