//go:build wasip1

// bench is a benchmark guest; BENCH_MODE selects what it does per batch,
// without allocating:
//
//	noop:      takes the batch, emits nothing
//	rawcopy:   emits every input record verbatim (one copy per record)
//	loopcopy:  copies the records section 1 byte at a time, emits nothing
//	memcopy:   copies the records section with copy(), emits nothing
package main

import (
	"encoding/binary"
	"os"
	"runtime"
	"unsafe"
)

//go:wasmimport sluice_transform_v1 check_abi
func checkABI(version int32) int32

//go:wasmimport sluice_transform_v1 next_batch
func nextBatch(buf unsafe.Pointer, capacity int32) int32

//go:wasmimport sluice_transform_v1 emit
func emit(buf unsafe.Pointer, n int32) int32

var (
	in  = make([]byte, 1<<20)
	out = make([]byte, 0, 1<<20)
	cp  = make([]byte, 1<<20)
)

func main() {
	if checkABI(1) != 0 {
		panic("ABI")
	}
	mode := os.Getenv("BENCH_MODE")
	for {
		runtime.Gosched()
		n := nextBatch(unsafe.Pointer(&in[0]), int32(len(in)))
		if n < 0 {
			panic("batch too large")
		}
		b := in[:n]
		tl := int(binary.LittleEndian.Uint16(b[52:]))
		recs := b[54+tl:]
		switch mode {
		case "rawcopy":
			out = out[:0]
			for len(recs) > 0 {
				l, k := binary.Varint(recs)
				out = append(out, 0)
				out = append(out, recs[:k+int(l)]...)
				recs = recs[k+int(l):]
			}
			if emit(unsafe.Pointer(&out[0]), int32(len(out))) != 0 {
				panic("emit")
			}
		case "loopcopy":
			for i := range recs {
				cp[i] = recs[i]
			}
		case "memcopy":
			copy(cp, recs)
		}
	}
}
