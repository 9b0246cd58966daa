//go:build wasip1

// upper upper-cases values.
package main

import (
	"bytes"

	"github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"
)

func main() {
	guest.Map(func(r guest.Record) []guest.Record {
		if r.Value != nil {
			r.Value = bytes.ToUpper(r.Value)
		}
		return []guest.Record{r}
	})
}
