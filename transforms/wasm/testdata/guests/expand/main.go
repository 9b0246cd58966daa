//go:build wasip1

// expand emits every record twice.
package main

import "github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"

func main() {
	guest.Map(func(r guest.Record) []guest.Record { return []guest.Record{r, r} })
}
