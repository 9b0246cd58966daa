package recordbatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/snappy"
)

// ErrBudget: a batch waited for room in its DecompressBudget until its context ended.
// Not a corruption: the same batch may succeed once other requests are done.
var ErrBudget = errors.New("decompression budget busy")

// DecompressBudget bounds the decompressed output held at once by every validation
// that shares it (the broker's queued.max.decompressed.bytes), whatever each batch's
// own limit allows: without it, concurrent decompression bombs each within the
// per-batch limit add up (16 of them took 2 GB). Kafka has no such bound.
//
// A validation reserves an estimate before it decompresses and decodes into at most
// that many bytes; when the output outgrows the reservation it gives the reservation
// back, reserves four times as much and starts again (so the extra work is at most a
// third, and nobody waits while holding budget: no deadlock between batches). The
// output limit of a batch is also capped at the whole budget, so a batch whose records
// inflate past it fails ErrTooLarge rather than waiting forever.
//
// Invariant: used <= limit. Safe for concurrent use.
type DecompressBudget struct {
	limit int64
	// maxWait bounds one acquire's wait for room (besides its context); the timer
	// exists only while a batch waits, so the common case costs one lock.
	maxWait time.Duration

	mu   sync.Mutex
	used int64
	// changed is closed on a release to wake waiters; made only when someone waits
	// (nil otherwise), so a release with nobody waiting allocates nothing.
	changed chan struct{}
}

// DefaultDecompressWait is how long a batch waits for room in a DecompressBudget
// before it fails ErrBudget (REQUEST_TIMED_OUT at the broker: retriable).
const DefaultDecompressWait = 10 * time.Second

// NewDecompressBudget returns a budget of limit bytes (limit <= 0: 1 byte, which
// admits one batch at a time; callers pass a validated size) whose waits are bounded
// by DefaultDecompressWait.
func NewDecompressBudget(limit int64) *DecompressBudget {
	return &DecompressBudget{limit: max(limit, 1), maxWait: DefaultDecompressWait}
}

// Limit returns the budget's size in bytes.
func (b *DecompressBudget) Limit() int64 { return b.limit }

// InUse returns the bytes reserved now.
func (b *DecompressBudget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// acquire reserves n bytes (at most the limit), waiting until they fit, ctx ends or
// maxWait passes.
func (b *DecompressBudget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.limit)
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		ch := b.changed
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(b.maxWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-timeout:
			return fmt.Errorf("%w: %d of %d bytes in use after waiting %s", ErrBudget, b.InUse(), b.limit, b.maxWait)
		case <-ctx.Done():
			return fmt.Errorf("%w: %d of %d bytes in use: %v", ErrBudget, b.InUse(), b.limit, context.Cause(ctx))
		}
	}
}

// Reserve reserves n bytes (at most the limit) for work outside this package that
// holds decompressed output (recompression), waiting as validation does (ErrBudget
// when no room comes in time); release gives them back, once.
func (b *DecompressBudget) Reserve(ctx context.Context, n int64) (release func(), err error) {
	n = max(n, 0)
	if err := b.acquire(ctx, n); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { b.release(n) }) }, nil
}

func (b *DecompressBudget) release(n int64) {
	n = min(n, b.limit)
	b.mu.Lock()
	b.used -= n
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	b.mu.Unlock()
}

// budgetFirstGuess is the smallest first reservation; budgetGrowth the factor by which
// a reservation grows when the output outgrows it.
const (
	budgetFirstGuess = 64 << 10
	budgetGrowth     = 4
)

// ValidateBudget is Validate with its decompression output reserved from b (see
// DecompressBudget), waiting for room until ctx ends or DefaultDecompressWait passes
// (then ErrBudget). The output is
// bounded by DefaultMaxUncompressed(len(batch)) and by b's size. A nil b is Validate.
func ValidateBudget(ctx context.Context, batch []byte, b *DecompressBudget) (Info, error) {
	if b == nil {
		return Validate(batch)
	}
	h, err := checkBatch(batch)
	if err != nil {
		return Info{Header: h}, err
	}
	data := batch[HeaderSize:]
	if h.Codec() == CodecNone {
		res, err := checkRecords(&h, data)
		if err != nil {
			return Info{Header: h}, err
		}
		return info(&h, res, len(data)), nil
	}
	limit := min(int64(limitFor(batch, 0)), b.limit-1)
	if h.Codec() == CodecZstd {
		limit = min(limit, max(b.limit/2-1, zstdMaxWindow)) // output and history (below)
	}
	// Records compress a few times at most in practice; start at 4x the input.
	want := min(max(budgetGrowth*int64(len(data)), budgetFirstGuess), limit+1)
	if n := sizeHint(h.Codec(), data, limit); n > 0 {
		// One byte over, so the decoder sees the end with room left and does not
		// grow the buffer for nothing.
		want = min(n+1, limit+1)
	}
	for retry := false; ; retry = true {
		// A zstd decoder keeps a history as large as the frame's window, which for a
		// single-segment frame is its whole content: a large zstd output costs twice
		// its size, and its decoder is dropped afterwards rather than pooled with it.
		reserve, bigZstd := want, h.Codec() == CodecZstd && want > zstdMaxWindow
		if bigZstd {
			reserve = 2 * want
		}
		if err := b.acquire(ctx, reserve); err != nil {
			return Info{Header: h}, err
		}
		d := getDecompressor()
		release := func() {
			if bigZstd && d.zs != nil {
				d.zs.Close()
				d.zs = nil
			}
			putDecompressor(d)
			b.release(reserve)
		}
		buf := d.buf
		switch {
		case retry:
			// The output is known to pass want/4: one buffer of the reservation, not a
			// doubling series (measured: the series' spans of every size, held until
			// collected and hard to reuse, cost the broker twice the resident set).
			buf = make([]byte, 0, want)
		case int64(cap(buf)) > want:
			buf = nil // a pooled buffer larger than the reservation would break the bound
		}
		out, err := d.decompress(h.Codec(), data, buf, int(want-1))
		if errors.Is(err, ErrTooLarge) && want <= limit {
			// Outgrew the reservation, not the limit: retry with a larger one.
			d.buf = nil
			release()
			want = min(want*budgetGrowth, limit+1)
			continue
		}
		var in Info
		if err == nil {
			var res scanResult
			if res, err = checkRecords(&h, out); err == nil {
				in = info(&h, res, len(out))
			}
		}
		if err != nil {
			err = fmt.Errorf("%w (decompression bounded at %d bytes)", err, limit)
			in = Info{Header: h}
			out = nil // do not pool what a bomb made us allocate
		}
		d.buf = out
		release()
		return in, err
	}
}

// sizeHint returns the output size a records section declares for itself, or 0: the
// sum of zstd frames' content sizes, a raw snappy block's length, gzip's ISIZE trailer
// (the last member's size, modulo 2^32). It is only where the first reservation
// starts: a section that lies is still bounded, by a retry or by the limit.
func sizeHint(codec int, src []byte, limit int64) int64 {
	var n uint64
	switch codec {
	case CodecZstd:
		n, _ = zstdDeclared(src, int(limit))
	case CodecSnappy:
		if m, err := snappy.DecodedLen(src); err == nil && !bytes.HasPrefix(src, xerialMagic[:]) {
			n = uint64(m)
		}
	case CodecGzip:
		if len(src) >= 18 {
			n = uint64(binary.LittleEndian.Uint32(src[len(src)-4:]))
		}
	}
	return int64(min(n, uint64(limit)))
}
