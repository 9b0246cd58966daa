//go:build wasip1

// loop spins forever on a value "loop"; other records pass unchanged.
package main

import "github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"

var sink int

func main() {
	guest.Map(func(r guest.Record) []guest.Record {
		if string(r.Value) == "loop" {
			for i := 0; ; i++ {
				sink += i
			}
		}
		return []guest.Record{r}
	})
}
