//go:build wasip1

// fail fails batches containing a value "fail"; other batches pass unchanged.
package main

import (
	"errors"

	"github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"
)

func main() {
	guest.Run(func(b *guest.Batch) ([]byte, error) {
		var out []byte
		for _, r := range b.Records {
			if string(r.Value) == "fail" {
				return nil, errors.New("record says fail")
			}
			out = guest.AppendRecord(out, 0, r)
		}
		return out, nil
	})
}
