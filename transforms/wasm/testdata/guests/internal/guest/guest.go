//go:build wasip1

// Package guest is a minimal raw binding of the sluice_transform_v1 ABI for
// the test guests (independent of sdk-wasm on purpose).
package guest

import (
	"encoding/binary"
	"runtime"
	"unsafe"
)

//go:wasmimport sluice_transform_v1 check_abi
func checkABI(version int32) int32

//go:wasmimport sluice_transform_v1 next_batch
func nextBatch(buf uint32, capacity int32) int32

//go:wasmimport sluice_transform_v1 emit
func emit(buf uint32, n int32) int32

//go:wasmimport sluice_transform_v1 fail
func fail(msg uint32, n int32)

//go:wasmimport sluice_transform_v1 batch_source
func batchSource(buf uint32, capacity int32) int32

// CheckABI calls check_abi.
func CheckABI(version int32) int32 { return checkABI(version) }

// SourceRaw calls batch_source with a caller-chosen buffer (possibly bogus). Only
// the guests that call it import batch_source.
func SourceRaw(buf uint32, capacity int32) int32 { return batchSource(buf, capacity) }

// Ptr is the guest address of b's first byte (0 for an empty b).
func Ptr(b []byte) uint32 { return ptr(b) }

func ptr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is an input or output record.
type Record struct {
	TsDelta  int64
	OffDelta int32
	Key      []byte
	Value    []byte
	Headers  []Header
}

// Batch is one input batch.
type Batch struct {
	Partition     int32
	BaseOffset    int64
	BaseTimestamp int64
	RecordCount   int32
	Topic         string
	Records       []Record
}

var inbuf = make([]byte, 64)

// Next completes the previous batch and returns the next one.
func Next() *Batch {
	for {
		n := nextBatch(ptr(inbuf), int32(len(inbuf)))
		if n < 0 {
			inbuf = make([]byte, -n)
			continue
		}
		return parse(inbuf[:n])
	}
}

// NextRaw is Next with a caller-chosen buffer (possibly bogus).
func NextRaw(buf uint32, capacity int32) int32 { return nextBatch(buf, capacity) }

// Emit emits output entries.
func Emit(b []byte) int32 { return emit(ptr(b), int32(len(b))) }

// EmitRaw emits with a caller-chosen pointer and length.
func EmitRaw(buf uint32, n int32) int32 { return emit(buf, n) }

// Fail fails the current batch.
func Fail(msg string) {
	b := []byte(msg)
	fail(ptr(b), int32(len(b)))
}

// Run checks the ABI and serves batches with fn forever.
func Run(fn func(b *Batch) ([]byte, error)) {
	if checkABI(1) != 0 {
		panic("ABI version 1 not supported")
	}
	for {
		// Go on wasm has no preemption: a guest that never yields starves the
		// GC's background workers and its heap grows until it dies. Yield once
		// per batch.
		runtime.Gosched()
		b := Next()
		out, err := fn(b)
		if err != nil {
			Fail(err.Error())
			continue
		}
		if len(out) > 0 {
			if rc := Emit(out); rc != 0 {
				panic("emit failed")
			}
		}
	}
}

func parse(b []byte) *Batch {
	le := binary.LittleEndian
	bt := &Batch{
		Partition:     int32(le.Uint32(b[4:])),
		BaseOffset:    int64(le.Uint64(b[8:])),
		BaseTimestamp: int64(le.Uint64(b[16:])),
		RecordCount:   int32(le.Uint32(b[48:])),
	}
	tl := int(le.Uint16(b[52:]))
	bt.Topic = string(b[54 : 54+tl])
	r := b[54+tl:]
	for len(r) > 0 {
		l, n := binary.Varint(r)
		rec := r[n : n+int(l)]
		r = r[n+int(l):]
		rec = rec[1:] // attributes
		var x Record
		x.TsDelta, n = binary.Varint(rec)
		rec = rec[n:]
		od, n := binary.Varint(rec)
		x.OffDelta = int32(od)
		rec = rec[n:]
		x.Key, rec = bytesOf(rec)
		x.Value, rec = bytesOf(rec)
		hc, n := binary.Varint(rec)
		rec = rec[n:]
		for range hc {
			var k, v []byte
			k, rec = bytesOf(rec)
			v, rec = bytesOf(rec)
			x.Headers = append(x.Headers, Header{Key: string(k), Value: v})
		}
		bt.Records = append(bt.Records, x)
	}
	return bt
}

func bytesOf(b []byte) ([]byte, []byte) {
	l, n := binary.Varint(b)
	if l < 0 {
		return nil, b[n:]
	}
	return b[n : n+int(l)], b[n+int(l):]
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

// AppendRecord appends an output entry for r to output idx.
func AppendRecord(dst []byte, idx byte, r Record) []byte {
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, r.TsDelta)
	body = binary.AppendVarint(body, int64(r.OffDelta))
	body = appendBytes(body, r.Key)
	body = appendBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = appendBytes(body, []byte(h.Key))
		body = appendBytes(body, h.Value)
	}
	dst = append(dst, idx)
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// Map runs fn on each record and emits what it returns to output 0.
func Map(fn func(r Record) []Record) {
	Run(func(b *Batch) ([]byte, error) {
		var out []byte
		for _, r := range b.Records {
			for _, o := range fn(r) {
				out = AppendRecord(out, 0, o)
			}
		}
		return out, nil
	})
}
