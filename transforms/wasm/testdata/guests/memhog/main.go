//go:build wasip1

// memhog allocates until it dies on a value "hog"; other records pass unchanged.
package main

import "github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"

var hoard [][]byte

func main() {
	guest.Map(func(r guest.Record) []guest.Record {
		if string(r.Value) == "hog" {
			for {
				hoard = append(hoard, make([]byte, 1<<20))
			}
		}
		return []guest.Record{r}
	})
}
