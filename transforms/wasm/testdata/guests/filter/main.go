//go:build wasip1

// filter drops records with a header "drop".
package main

import "github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"

func main() {
	guest.Map(func(r guest.Record) []guest.Record {
		for _, h := range r.Headers {
			if h.Key == "drop" {
				return nil
			}
		}
		return []guest.Record{r}
	})
}
