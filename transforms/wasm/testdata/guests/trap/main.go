//go:build wasip1

// trap panics on a value "trap"; other records pass unchanged.
package main

import "github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"

func main() {
	guest.Map(func(r guest.Record) []guest.Record {
		if string(r.Value) == "trap" {
			panic("guest trap")
		}
		return []guest.Record{r}
	})
}
