//go:build wasip1

// bademit misbehaves according to the first record's value, and reports the
// errno of its bad call in an output record's key when the host lets it
// continue: "garbage" (malformed encoding), "oob" (pointer out of bounds),
// "hugelen" (length past the end of memory), "index" (output 5), "big" (more
// than max_output_bytes), "twice" (a second emit after a failed one),
// "nextoob" (next_batch with a bogus buffer: the host traps it). Other batches
// pass unchanged.
package main

import (
	"strconv"

	"github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"
)

func main() {
	guest.Run(func(b *guest.Batch) ([]byte, error) {
		var out []byte
		for _, r := range b.Records {
			out = guest.AppendRecord(out, 0, r)
		}
		if len(b.Records) == 0 {
			return out, nil
		}
		var rc int32
		switch string(b.Records[0].Value) {
		case "garbage":
			rc = guest.Emit([]byte{0, 0x7f, 1, 2, 3})
		case "oob":
			rc = guest.EmitRaw(0xfffffff0, 100)
		case "hugelen":
			rc = guest.EmitRaw(16, 0x7fffffff)
		case "index":
			rc = guest.Emit(guest.AppendRecord(nil, 5, b.Records[0]))
		case "big":
			rc = guest.Emit(make([]byte, 2<<20))
		case "twice":
			rc = guest.Emit([]byte{0, 0x7f})
			if rc2 := guest.Emit(out); rc2 != rc {
				panic("second emit returned " + strconv.Itoa(int(rc2)))
			}
		case "nextoob":
			guest.NextRaw(0xffffff00, 0x7fffffff) // completes this batch, traps on the next
			return nil, nil
		default:
			return out, nil
		}
		println("emit errno", rc)
		return nil, nil
	})
}
