//go:build wasip1

// rpsource binds Redpanda's ABI v3 by hand (its Go SDK in go.mod predates v3): for
// each input record it writes a record whose value lists what read_batch_metadata
// returned for keys 0..7 ("k<key>=<value or rc>"), for key 1 with a one-byte
// buffer ("short=") and, before the first batch, outside one ("outside=").
package main

import (
	"runtime"
	"strconv"
	"strings"
	"unsafe"
)

//go:wasmimport redpanda_transform check_abi_version_3
func checkABIVersion3()

//go:wasmimport redpanda_transform read_batch_metadata
func readBatchMetadata(key int32, buf unsafe.Pointer, n int32) int32

//go:wasmimport redpanda_transform read_batch_header
func readBatchHeader(a, b, c, d, e, f, g, h, i, j unsafe.Pointer) int32

//go:wasmimport redpanda_transform read_next_record
func readNextRecord(attrs, ts, off, buf unsafe.Pointer, n int32) int32

//go:wasmimport redpanda_transform write_record
func writeRecord(buf unsafe.Pointer, n int32) int32

var (
	hdr  [10]int64
	meta = make([]byte, 256)
)

func metadata(key int32, n int32) string {
	rc := readBatchMetadata(key, unsafe.Pointer(&meta[0]), n)
	if rc <= 0 {
		return strconv.Itoa(int(rc))
	}
	return "'" + string(meta[:rc]) + "'"
}

func main() {
	checkABIVersion3()
	outside := metadata(1, int32(len(meta)))
	payload := make([]byte, 1<<16)
	for {
		runtime.Gosched()
		p := func(i int) unsafe.Pointer { return unsafe.Pointer(&hdr[i]) }
		if rc := readBatchHeader(p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7), p(8), p(9)); rc < 0 {
			panic("read_batch_header")
		}
		var parts []string
		for k := int32(0); k <= 7; k++ {
			parts = append(parts, "k"+strconv.Itoa(int(k))+"="+metadata(k, int32(len(meta))))
		}
		parts = append(parts, "short="+metadata(1, 1), "outside="+outside)
		value := strings.Join(parts, ";")
		var attr [8]byte
		var ts, off int64
		for {
			n := readNextRecord(unsafe.Pointer(&attr[0]), unsafe.Pointer(&ts), unsafe.Pointer(&off), unsafe.Pointer(&payload[0]), int32(len(payload)))
			if n == -2 { // all records read
				break
			}
			if n < 0 {
				panic("read_next_record")
			}
			// key null (varint -1), the value, no headers.
			out := []byte{1}
			out = appendVarint(out, int64(len(value)))
			out = append(out, value...)
			out = append(out, 0)
			if rc := writeRecord(unsafe.Pointer(&out[0]), int32(len(out))); rc != int32(len(out)) {
				panic("write_record")
			}
		}
	}
}

func appendVarint(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}
