package kernel

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce request buffers are reused.
//
// A produce request is mostly record bytes (up to a MiB per partition), so allocating a
// fresh buffer for each one makes the Go runtime zero it (a large allocation is always
// cleared) and the GC collect it: at 1 KiB records that was a fifth of the broker's CPU.
// The reader of a connection whose last request was a Produce reads the next frame into
// a pooled buffer, and the processor returns it once the request is answered.
//
// Invariant (why only Produce): kmsg's decoders alias []byte fields into the frame, so a
// buffer may only be reused when nothing keeps those bytes after the handler returns.
// The Produce handler (modules/replication) hands the records to storage, which copies
// them (segmentlog writes them to the file; memory appends them to its own slice), and
// answers before returning (acks=all waits inside the handler). Other requests keep
// aliased bytes (JoinGroup protocol metadata, SyncGroup assignments, ...), so their
// frames are never returned to the pool: a non-Produce frame read into a pooled buffer
// is simply left to the GC.

// maxPooledFrame bounds the buffers kept for reuse, so one huge request does not pin
// its buffer (franz-go's default produce requests are at most ~1 MiB per partition).
const maxPooledFrame = 8 << 20

// maxPoolBytes bounds the capacity the free list keeps (a broker-wide constant cost in
// RSS); buffers beyond it go to a sync.Pool, which the GC may empty.
const maxPoolBytes = 32 << 20

// framePool holds reusable produce frame buffers: a LIFO free list bounded by
// maxPoolBytes of capacity, then a sync.Pool for the overflow. A sync.Pool alone would
// not do: every GC cycle empties it, and the refill (1 MiB growth steps, each copying
// what was read so far, see readFrame) cost a tenth of the broker's CPU on 100-byte
// records; a bounded list alone was too small for a producer's pipelined requests
// (up to pipelineDepth frames of several MiB per connection).
type framePool struct {
	mu    sync.Mutex
	free  [][]byte  // each len 0
	bytes int       // sum of cap(free[i]) <= maxPoolBytes
	spill sync.Pool // of *[]byte
}

// get returns an empty buffer, reused if one is free (nil otherwise; readFrame grows it).
func (fp *framePool) get() []byte {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	n := len(fp.free)
	if n == 0 {
		if b, ok := fp.spill.Get().(*[]byte); ok {
			return (*b)[:0]
		}
		return nil
	}
	b := fp.free[n-1]
	fp.free[n-1] = nil
	fp.free = fp.free[:n-1]
	fp.bytes -= cap(b)
	return b
}

// put offers buf for reuse; the caller must not touch it afterwards.
func (fp *framePool) put(buf []byte) {
	if cap(buf) == 0 || cap(buf) > maxPooledFrame {
		return
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.bytes+cap(buf) > maxPoolBytes {
		buf = buf[:0]
		fp.spill.Put(&buf)
		return
	}
	fp.free = append(fp.free, buf[:0])
	fp.bytes += cap(buf)
}

// isProduceFrame reports whether a request frame is a Produce request.
func isProduceFrame(buf []byte) bool {
	return len(buf) >= 2 && int16(buf[0])<<8|int16(buf[1]) == kmsg.Produce.Int16()
}
