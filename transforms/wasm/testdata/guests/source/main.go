//go:build wasip1

// source answers each input record with the record and, in headers, what
// batch_source said about its batch: the three fields (type, name, client) and
// the return codes of a call with no buffer (rc.zero), of one with the length
// asked for (rc.ok) and of the last call made outside a batch (rc.outside: before
// the first batch, then after each fail). A batch with a value "fail" calls fail;
// one with "oob" passes batch_source a buffer past the end of memory (a trap).
package main

import (
	"encoding/binary"
	"runtime"
	"strconv"

	"github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"
)

func main() {
	if guest.CheckABI(2) != 0 {
		panic("ABI minor version 2 not supported")
	}
	scratch := make([]byte, 64)
	outside := guest.SourceRaw(guest.Ptr(scratch), int32(len(scratch)))
	for {
		runtime.Gosched()
		b := guest.Next()
		zero := guest.SourceRaw(0, 0)
		ok := zero
		var buf []byte
		if zero <= -6 {
			buf = make([]byte, -zero)
			ok = guest.SourceRaw(guest.Ptr(buf), int32(len(buf)))
		}
		var fields [3][]byte
		if ok >= 0 {
			p := buf[:ok]
			for i := range fields {
				n := int(binary.LittleEndian.Uint16(p))
				fields[i], p = p[2:2+n], p[2+n:]
			}
		}
		var out []byte
		failed := false
		for _, r := range b.Records {
			switch string(r.Value) {
			case "fail":
				failed = true
			case "oob":
				guest.SourceRaw(0xFFFF_FF00, 1<<20)
			}
			r.Headers = append(r.Headers,
				guest.Header{Key: "type", Value: fields[0]},
				guest.Header{Key: "name", Value: fields[1]},
				guest.Header{Key: "client", Value: fields[2]},
				guest.Header{Key: "rc.zero", Value: []byte(strconv.Itoa(int(zero)))},
				guest.Header{Key: "rc.ok", Value: []byte(strconv.Itoa(int(ok)))},
				guest.Header{Key: "rc.outside", Value: []byte(strconv.Itoa(int(outside)))})
			out = guest.AppendRecord(out, 0, r)
		}
		if failed {
			guest.Fail("asked to fail")
			outside = guest.SourceRaw(guest.Ptr(scratch), int32(len(scratch)))
			continue
		}
		if guest.Emit(out) != 0 {
			panic("emit failed")
		}
	}
}
