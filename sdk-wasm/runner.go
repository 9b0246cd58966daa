package sdk

import (
	"fmt"
	"runtime"
	"time"
	"unicode/utf8"
)

// abiVersion is the minor ABI version passed to check_abi.
const abiVersion = 1

// host is the broker side of the ABI (sluice_transform_v1). On wasip1 it is
// the imported functions; natively it is a stub, and tests use a fake.
type host interface {
	// checkABI is check_abi.
	checkABI(version int32) int32
	// nextBatch is next_batch into buf: the batch's length, or -len if buf
	// is too small. ok=false stops the loop (fake hosts only; the real
	// host blocks until there is a batch).
	nextBatch(buf []byte) (n int32, ok bool)
	// emit is emit: 0 or a negative errno.
	emit(buf []byte) int32
	// fail is fail.
	fail(msg []byte)
	// batchSource is batch_source into buf: the source's length, -len if
	// buf is too small, or a negative errno.
	batchSource(buf []byte) int32
}

const (
	initialInputSize = 64 << 10
	maxFailMessage   = 1024
)

// runner is the guest's loop: next_batch, decode, call the transform,
// emit, next_batch, ... Its buffers are reused from batch to batch.
type runner struct {
	h   host
	in  []byte
	dec decoder
	w   writer
	src batchSource // the current batch's, fetched on first use
}

func newRunner(h host) *runner {
	if rc := h.checkABI(abiVersion); rc != 0 {
		panic(fmt.Sprintf("sluice sdk: the broker does not support transform ABI sluice_transform_v1 version %d (check_abi returned %d)", abiVersion, rc))
	}
	r := &runner{h: h, in: make([]byte, initialInputSize)}
	r.w.outputs = numOutputs()
	r.src.h = h
	return r
}

// serve runs the loop until the host stops it (never, on wasip1).
func serve(h host, fn func(*Batch, *writer) error) {
	r := newRunner(h)
	for r.step(fn) {
	}
}

// step handles one batch. It returns false when the host has no more.
func (r *runner) step(fn func(*Batch, *writer) error) bool {
	n, ok := r.next()
	if !ok {
		return false
	}
	b, err := r.dec.decode(r.in[:n])
	if err != nil {
		r.fail("sluice sdk: malformed input batch: " + err.Error())
		return true
	}
	r.src.reset()
	b.src = &r.src
	for i := range b.Records {
		b.Records[i].src = &r.src
	}
	r.w.reset(b)
	if err := fn(b, &r.w); err != nil {
		r.w.out = r.w.out[:0]
		r.fail(err.Error())
		return true
	}
	if len(r.w.out) > 0 {
		if rc := r.h.emit(r.w.out); rc != 0 {
			// The host has failed the batch already (ABI.md, "Errors and
			// policies"); say why in the batch's failure message.
			r.fail(emitError(rc))
		}
	}
	return true
}

// next calls next_batch, growing the input buffer when the host asks for it.
//
// It yields first: Go on wasm has one thread and no preemption, and the guest's
// goroutine blocks inside next_batch (a host call) rather than in the Go scheduler,
// so without a yield per batch the garbage collector's background work never runs
// and a busy transform eventually dies out of memory.
func (r *runner) next() (int32, bool) {
	runtime.Gosched()
	for {
		n, ok := r.h.nextBatch(r.in)
		if !ok {
			return 0, false
		}
		if n >= 0 {
			if int(n) > len(r.in) {
				panic(fmt.Sprintf("sluice sdk: next_batch returned %d for a %d-byte buffer", n, len(r.in)))
			}
			return n, true
		}
		need := -int64(n)
		if need <= int64(len(r.in)) {
			panic(fmt.Sprintf("sluice sdk: next_batch asked for %d bytes with a %d-byte buffer", need, len(r.in)))
		}
		// Grow at least geometrically so a slowly growing batch size does
		// not reallocate every time; the old buffer becomes garbage.
		size := max(need, min(2*int64(len(r.in)), 1<<31-1))
		r.in = nil
		r.in = make([]byte, size)
	}
}

func (r *runner) fail(msg string) {
	if msg == "" {
		msg = "transform failed"
	}
	if len(msg) > maxFailMessage {
		cut := maxFailMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	r.h.fail([]byte(msg))
}

func emitError(rc int32) string {
	switch rc {
	case -1:
		return "sluice sdk: emit: malformed output encoding (-1)"
	case -2:
		return "sluice sdk: emit: output too large for one batch (-2)"
	case -3:
		return "sluice sdk: emit: output index out of range (-3)"
	case -4:
		return "sluice sdk: emit: outside a batch (-4)"
	}
	return fmt.Sprintf("sluice sdk: emit failed (%d)", rc)
}

// writer implements Writer over the batch's output buffer.
type writer struct {
	out       []byte
	baseTS    int64     // the batch's base_timestamp (ms)
	defaultTS time.Time // used for written records with a zero Timestamp
	inline    bool
	outputs   int // output topics named in the environment; 0 if unknown
}

func (w *writer) reset(b *Batch) {
	w.out = w.out[:0]
	w.baseTS = b.BaseTimestamp.UnixMilli()
	w.defaultTS = b.BaseTimestamp
	w.inline = b.Inline()
}

func (w *writer) Write(r Record) error { return w.WriteTo(0, r) }

func (w *writer) WriteTo(output int, r Record) error {
	switch {
	case output < 0 || output >= maxOutputs:
		return fmt.Errorf("sluice sdk: output %d out of range 0..%d", output, maxOutputs-1)
	case output != 0 && w.inline:
		return fmt.Errorf("sluice sdk: output %d: an inline transform can only write to output 0", output)
	case w.outputs > 0 && output >= w.outputs:
		return fmt.Errorf("sluice sdk: output %d: the transform has %d output topics", output, w.outputs)
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = w.defaultTS
	}
	out, err := appendOutput(w.out, output, &r, ts.UnixMilli()-w.baseTS)
	w.out = out
	return err
}

// batchSource is the source of the batch being served, asked of the host on
// the first Source call of each batch (so a transform that never asks does not
// link batch_source in), or a fixed value (WithSource). A nil *batchSource is
// the zero Source.
type batchSource struct {
	h      host // nil: fixed
	buf    []byte
	loaded bool
	val    Source
}

func fixedSource(s Source) *batchSource { return &batchSource{loaded: true, val: s} }

func (s *batchSource) reset() {
	s.loaded = false
	s.val = Source{}
}

func (s *batchSource) get() Source {
	if s == nil {
		return Source{}
	}
	if !s.loaded && s.h != nil {
		s.val = s.fetch()
		s.loaded = true
	}
	return s.val
}

// fetch calls batch_source, growing the buffer when the host asks for it. The
// host's errors (outside a batch, a field too large) cannot happen inside a
// callback on a conforming broker: they panic, which fails the batch.
func (s *batchSource) fetch() Source {
	if s.buf == nil {
		s.buf = make([]byte, initialSourceSize)
	}
	for {
		n := s.h.batchSource(s.buf)
		switch {
		case n >= 0:
			if int(n) > len(s.buf) {
				panic(fmt.Sprintf("sluice sdk: batch_source returned %d for a %d-byte buffer", n, len(s.buf)))
			}
			src, err := decodeSource(s.buf[:n])
			if err != nil {
				panic("sluice sdk: batch_source: " + err.Error())
			}
			return src
		case n <= -minSourceSize:
			need := -int64(n)
			if need <= int64(len(s.buf)) || need > maxSourceSize {
				panic(fmt.Sprintf("sluice sdk: batch_source asked for %d bytes with a %d-byte buffer", need, len(s.buf)))
			}
			s.buf = make([]byte, need)
		default:
			panic(fmt.Sprintf("sluice sdk: batch_source failed (%d)", n))
		}
	}
}
