// Command filter-by-header is an inline transform that drops the records
// that have a header named "drop" (any value, even null) and keeps the
// others unchanged.
//
// The deployment can change the header with FILTER_HEADER, and with
// FILTER_VALUE drop only the records whose header has exactly that value.
package main

import (
	"os"

	sdk "github.com/sluicehq/sluice/sdk-wasm"
)

func main() {
	f := filter{header: os.Getenv("FILTER_HEADER"), value: os.Getenv("FILTER_VALUE")}
	if f.header == "" {
		f.header = "drop"
	}
	_, f.matchValue = os.LookupEnv("FILTER_VALUE")
	sdk.OnRecord(func(r sdk.Record, w sdk.Writer) error {
		if f.drop(r) {
			return nil
		}
		return w.Write(r)
	})
}

type filter struct {
	header     string
	value      string
	matchValue bool // drop only if the header's value is value
}

// drop reports whether r has the header (with the value, if one is set).
func (f filter) drop(r sdk.Record) bool {
	for _, h := range r.Headers {
		if h.Key == f.header && (!f.matchValue || (h.Value != nil && string(h.Value) == f.value)) {
			return true
		}
	}
	return false
}
